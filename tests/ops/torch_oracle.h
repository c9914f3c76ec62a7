// PyTorch as an independent oracle for op values and gradients (docs/design.md,
// "Tested against independent references").
//
// One persistent `/usr/bin/python3 tests/ops/torch_oracle.py` child per test
// process (spawned on first use), talking JSON lines over a socket pair. Each
// case is a Python expression over named input tensors, with `torch`, `F`
// (torch.nn.functional) and `math` in scope:
//
//   auto ref = torch_eval("F.conv2d(a, w, stride=2)", {{"a", a}, {"w", w}},
//                         {.grad = {"a", "w"}, .grad_output = R});
//   EXPECT_TRUE(all_close(braid_out, ref.value()));
//   EXPECT_TRUE(all_close(a.grad(), ref.grads.at("a")));
//
// Gradients are those of sum(outputs[0] * grad_output) (grad_output defaults to
// ones), i.e. exactly what backward(out, R) accumulates in braid.
//
// ctest runs every TEST in its own process and the child's `import torch` costs
// ~2 s, so put many cases in one TEST and send them in one torch_eval_batch
// round trip. Tests call BRAID_REQUIRE_TORCH() first: it skips, with the
// reason, only when /usr/bin/python3 cannot import torch.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "braid/base/rng.h"
#include "braid/tensor/tensor.h"

namespace braid::testing {

struct TorchEvalOptions {
  std::vector<std::string> grad;  // input names to differentiate with respect to
  Tensor grad_output;             // R in sum(out * R); undefined = ones
};

struct TorchCase {
  std::string expr;
  std::vector<std::pair<std::string, Tensor>> inputs;
  TorchEvalOptions options;
};

struct TorchResult {
  std::vector<Tensor> outputs;        // one per tensor of a tuple/list result
  std::map<std::string, Tensor> grads;  // by input name, same dtype/shape as the input
  const Tensor& value() const { return outputs.at(0); }
};

// Empty when torch is usable, else why not (the child's import error).
std::string torch_unavailable_reason();

// Evaluates many cases in one round trip. Throws braid::ValueError carrying the
// Python traceback when a case fails, TimeoutError when the child is silent
// for more than 120 s.
std::vector<TorchResult> torch_eval_batch(const std::vector<TorchCase>& cases);

TorchResult torch_eval(const std::string& expr, std::vector<std::pair<std::string, Tensor>> inputs,
                       TorchEvalOptions options = {});

// ---- comparing braid ops with PyTorch ----

// One op evaluated by both: `fn` gets the inputs (in order) and returns braid's
// result; `expr` is the same op in Python over the inputs' names. The inputs
// named in `grad` are made leaves requiring gradients; both sides are then
// differentiated through sum(out * R) with the same random R.
struct OpCheck {
  std::string expr;
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  std::vector<std::string> grad;
  double rtol = 1e-4, atol = 1e-5;
};

// Runs every check (one oracle round trip) and records a gtest failure naming
// the expression for each value or gradient that differs.
void expect_matches_torch(const std::vector<OpCheck>& checks, uint64_t seed = 0);

// ---- helpers for value tests ----

// Uniform values in [lo, hi) of the given floating or integer dtype.
Tensor random_tensor(const Shape& shape, DType dtype, Generator& gen, double lo = -1, double hi = 1);
// Integers in [0, n) as i64.
Tensor random_index(const Shape& shape, int64_t n, Generator& gen);
// A non-contiguous view holding the same values as t: the last two dims are
// stored transposed and the innermost is strided by 2 (a slice with step).
Tensor strided_copy(const Tensor& t);

// Elementwise |a - b| <= atol + rtol * |b| on equal shapes; NaNs must match.
::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-6);

}  // namespace braid::testing

#define BRAID_REQUIRE_TORCH()                                                     \
  do {                                                                            \
    const std::string braid_reason_ = ::braid::testing::torch_unavailable_reason(); \
    if (!braid_reason_.empty()) GTEST_SKIP() << "PyTorch oracle unavailable: " << braid_reason_; \
  } while (0)
