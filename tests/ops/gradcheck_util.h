// Shared by the op tests: leaves that require grad, and gradcheck with the
// op's name in the failure message.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "braid/autograd/gradcheck.h"
#include "braid/tensor/tensor.h"

namespace braid::testing {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

inline Tensor leaf(Tensor t) {
  t.set_requires_grad();
  return t;
}

inline void expect_gradcheck(const Fn& fn, const std::vector<Tensor>& inputs, const char* what) {
  auto r = autograd::gradcheck(fn, inputs);
  EXPECT_TRUE(r.ok) << what << ":\n" << r.report;
}

}  // namespace braid::testing
