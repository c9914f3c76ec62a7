// One table-driven suite over the op registry (see op_table.h).
#include "op_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "braid/autograd/gradcheck.h"
#include "braid/ops/tensor_ops.h"

namespace braid::testing {
namespace {

std::vector<Tensor> inputs_of(const OpCase& c) {
  std::vector<Tensor> in;
  for (const auto& [n, t] : c.check.inputs) in.push_back(t);
  return in;
}

TEST(OpTable, EveryRegisteredOpHasACase) {
  std::set<std::string> covered;
  for (const OpCase& c : all_cases()) {
    covered.insert(c.op);
    EXPECT_NE(op::find_or_null(c.op), nullptr) << "a case names op '" << c.op << "', which is not registered";
    if (c.check.expr.empty()) {
      EXPECT_FALSE(c.why.empty()) << c.op << ": a case without a PyTorch oracle says why";
    }
  }
  for (const op::OpDef* d : op::all()) EXPECT_TRUE(covered.count(d->name)) << "op '" << d->name << "' has no case";
}

TEST(OpTable, ValuesAndGradientsMatchTorch) {
  BRAID_REQUIRE_TORCH();
  std::vector<OpCheck> checks;
  for (const OpCase& c : all_cases()) {
    if (!c.check.expr.empty()) checks.push_back(c.check);
  }
  expect_matches_torch(checks);
}

TEST(OpTable, FiniteDifferenceGradientsInF64) {
  for (const OpCase& c : all_cases()) {
    if (c.check.grad.empty() || !c.gradcheck) continue;
    std::vector<Tensor> in;
    for (const auto& [n, t] : c.check.inputs) {
      Tensor x = is_floating(t.dtype()) ? t.to(DType::f64).clone() : t;
      if (std::count(c.check.grad.begin(), c.check.grad.end(), n)) x.set_requires_grad();
      in.push_back(x);
    }
    const auto r = autograd::gradcheck(c.check.fn, in);
    EXPECT_TRUE(r.ok) << c.op << " (" << c.check.expr << "):\n" << r.report;
  }
}

TEST(OpTable, StridedInputsGiveTheSameValues) {
  for (const OpCase& c : all_cases()) {
    if (!c.strided) continue;
    const std::vector<Tensor> in = inputs_of(c);
    std::vector<Tensor> strided;
    bool any = false;
    for (const Tensor& t : in) {
      const bool s = t.defined() && t.ndim() >= 2 && t.is_contiguous();
      strided.push_back(s ? strided_copy(t) : t);
      any = any || s;
    }
    if (!any) continue;
    // Not bit for bit: a product's GEMM is autotuned, so two calls of one
    // shape may run different libraries and sum in another order (measured:
    // 2e-6 relative on a convolution's weight gradient). A layout bug is O(1).
    EXPECT_TRUE(all_close(c.check.fn(strided), c.check.fn(in), 1e-5, 1e-6)) << c.op << " on strided inputs";
  }
}

TEST(OpTable, MetaInferenceMatchesTheKernels) {
  for (const OpCase& c : all_cases()) {
    std::vector<Tensor> meta;
    for (const Tensor& t : inputs_of(c)) meta.push_back(t.defined() ? Tensor::empty(t.shape(), t.dtype(), Device::meta) : t);
    const Tensor real = c.check.fn(inputs_of(c));
    Tensor traced;
    try {
      traced = c.check.fn(meta);
    } catch (const Error& e) {
      ADD_FAILURE() << c.op << " cannot run on the meta device: " << e.what();
      continue;
    }
    EXPECT_TRUE(traced.is_meta()) << c.op;
    EXPECT_EQ(traced.shape(), real.shape()) << c.op;
    EXPECT_EQ(traced.dtype(), real.dtype()) << c.op;
  }
}

// Inputs with the case's primary dtype (`primary`: which of `in` have it)
// converted to `to`; others as they are.
std::vector<Tensor> converted(const std::vector<Tensor>& in, const std::vector<bool>& primary, DType to) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < in.size(); ++i) out.push_back(primary[i] ? in[i].to(to) : in[i]);
  return out;
}

double tolerance(DType d) {
  switch (d) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-5;
    case DType::bf16: case DType::f16: return 2e-2;
    default: return 0;
  }
}

TEST(OpTable, EveryDeclaredDtypeRunsAndTheOthersAreRefused) {
  for (const OpCase& c : all_cases()) {
    if (!c.sweep) continue;
    const op::OpDef& d = op::find(c.op);
    const std::vector<Tensor> in = inputs_of(c);
    const DType primary = in.at(d.dtype_input).dtype();
    std::vector<bool> is_primary;
    for (const Tensor& t : in) is_primary.push_back(t.defined() && t.dtype() == primary);
    std::vector<DType> declared;
    for (const op::KernelEntry& k : d.kernels) {
      if (k.device == Device::cpu) declared.insert(declared.end(), k.dtypes.begin(), k.dtypes.end());
    }
    if (declared.empty()) declared.assign(std::begin(kAllDTypes), std::end(kAllDTypes));
    // An in-place op writes its inputs: each call gets its own copies.
    auto run = [&](std::vector<Tensor> args) {
      if (d.effect == op::Effect::inplace) {
        for (int i : d.mutates) args[i] = args[i].clone();
      }
      return op::call(d, args, c.attrs);
    };
    for (DType dt : kAllDTypes) {
      const std::vector<Tensor> typed = converted(in, is_primary, dt);
      if (std::find(declared.begin(), declared.end(), dt) == declared.end()) {
        EXPECT_THROW(run(typed), ValueError) << c.op << " accepted undeclared dtype " << name(dt);
        continue;
      }
      std::vector<Tensor> out;
      try {
        out = run(typed);
      } catch (const Error& e) {
        ADD_FAILURE() << c.op << " refused declared dtype " << name(dt) << ": " << e.what();
        continue;
      }
      // The reference: the same (rounded) values computed in f64 where the op
      // takes f64, converted to the dtype under test.
      if (dt == DType::f64 || std::find(declared.begin(), declared.end(), DType::f64) == declared.end()) continue;
      const std::vector<Tensor> ref = run(converted(typed, is_primary, DType::f64));
      for (size_t i = 0; i < out.size(); ++i) {
        if (ref[i].dtype() != DType::f64) continue;  // bool or index outputs: same dtype both ways, checked by meta
        const double tol = tolerance(out[i].dtype());
        EXPECT_TRUE(all_close(out[i].to(DType::f64), ref[i].to(out[i].dtype()).to(DType::f64), tol, tol))
            << c.op << " in " << name(dt) << ", output " << i;
      }
    }
  }
}

}  // namespace
}  // namespace braid::testing
