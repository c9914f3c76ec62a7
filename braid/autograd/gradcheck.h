// Gradient checking by central finite differences (in f64).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 0;  // for the random output weights
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  std::string report;  // the worst mismatches, empty when ok
};

// Checks the gradients fn's output has with respect to every f64 input that
// requires grad. The output is contracted with fixed random weights R, so the
// check covers the whole Jacobian-vector product R^T J, not only a sum.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace braid::autograd
