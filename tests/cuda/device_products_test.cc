// The CUDA backend's products (matmul, linear, conv2d) and pooling against the
// CPU backend, calling the ops directly in every dtype the device adds (the
// eager functions take f32 and f64 only; device_ops_test.cc runs those), on
// the layouts and edge cases the op table does not sweep: transposed and
// broadcast factors, summed batches, 1-D and empty inputs, an f32 bias beside
// bf16 operands. The CPU reference sees the same rounded inputs in f32 (f64 for f64).
#include <gtest/gtest.h>

#include "braid/ops/ops.h"
#include "braid/ops/registry.h"
#include "braid/tensor/backend.h"
#include "device_test.h"
#include "conv_geometries.h"
#include "op_table.h"

namespace braid::testing {
namespace {

constexpr DType kDtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

double tol(DType d) { return d == DType::f64 ? 1e-10 : d == DType::f32 ? 1e-4 : d == DType::f16 ? 1e-2 : 4e-2; }

// Runs op on the GPU with inputs in `dtype` (f32 inputs only; others as they
// are) and on the CPU with the same rounded values in f32 (f64 for f64), and
// compares every output. `f32_inputs` marks inputs that stay f32 (a bias).
void check(const char* name, std::vector<Tensor> inputs, const op::Attrs& attrs, DType dtype,
           std::vector<int> f32_inputs = {}) {
  std::vector<Tensor> dev, host;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const bool keep = !t.defined() || t.dtype() != DType::f32 ||
                      std::count(f32_inputs.begin(), f32_inputs.end(), static_cast<int>(i));
    const Tensor rounded = keep ? t : t.to(dtype);
    if (rounded.defined() && rounded.numel() == 0) {
      dev.push_back(Tensor::empty(rounded.shape(), rounded.dtype(), kGpu));
    } else {
      dev.push_back(rounded.defined() ? rounded.to(kGpu) : Tensor());
    }
    // Views keep their layout on the device: as_strided over the copy.
    if (t.defined() && t.numel() > 0 && !keep && !t.is_contiguous()) dev.back() = strided_copy(rounded).to(kGpu);
    const DType ref = dtype == DType::f64 ? DType::f64 : DType::f32;
    host.push_back(rounded.defined() && is_floating(rounded.dtype()) ? rounded.to(ref) : rounded);
  }
  const std::vector<Tensor> got = op::call(op::find(name), dev, attrs);
  const std::vector<Tensor> want = op::call(op::find(name), host, attrs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].defined(), want[i].defined()) << name;
    if (!got[i].defined()) continue;
    EXPECT_EQ(got[i].shape(), want[i].shape()) << name;
    if (want[i].numel() == 0) continue;
    const Tensor g = got[i].to(Device::cpu);
    const bool floating = is_floating(g.dtype());
    EXPECT_TRUE(all_close(floating ? g.to(DType::f64) : g, floating ? want[i].to(DType::f64) : want[i], tol(dtype),
                          tol(dtype)))
        << name << " output " << i << " in " << braid::name(dtype) << " " << attrs.to_string();
  }
}

TEST(DeviceProducts, MatmulLayoutsAndBatchesInEveryDtype) {
  BRAID_REQUIRE_GPU();
  Generator gen(11);
  auto r = [&](const Shape& s) { return random_tensor(s, DType::f32, gen); };
  const std::vector<std::pair<Shape, Shape>> shapes = {{{7, 5}, {5, 3}}, {{1, 4}, {4, 1}}, {{4, 6, 5}, {4, 5, 2}},
                                                       {{6, 5}, {3, 5, 2}}, {{3, 6, 5}, {5, 2}}, {{1, 6, 5}, {3, 5, 2}},
                                                       {{0, 5}, {5, 3}}, {{4, 0}, {0, 3}}, {{2, 3, 0}, {2, 0, 4}}};
  for (DType d : kDtypes) {
    for (const auto& [sa, sb] : shapes) {
      check("matmul", {r(sa), r(sb)}, {}, d);
      if (numel(sa) > 0 && numel(sb) > 0) check("matmul", {strided_copy(r(sa)), strided_copy(r(sb))}, {}, d);
    }
    // Transposed views: cuBLAS reads them in place.
    check("matmul", {r({5, 7}).as_strided({7, 5}, {1, 7}, 0), r({3, 5}).as_strided({5, 3}, {1, 5}, 0)}, {}, d);
    // The backward products: per batch item, summed over a broadcast batch
    // (one GEMM over the stacked batch, or one per item), transposed results.
    check("matmul_backward_a", {r({4, 6, 2}), r({4, 5, 2})}, {{"shape", Shape{4, 6, 5}}}, d);
    check("matmul_backward_a", {r({3, 6, 2}), r({3, 5, 2})}, {{"shape", Shape{6, 5}}}, d);
    check("matmul_backward_a", {r({3, 6, 2}), r({3, 5, 2})}, {{"shape", Shape{1, 6, 5}}}, d);
    check("matmul_backward_a", {r({3, 6, 2}), r({5, 2})}, {{"shape", Shape{3, 6, 5}}}, d);
    check("matmul_backward_a", {r({7, 3}), r({5, 3})}, {{"shape", Shape{7, 5}}}, d);
    check("matmul_backward_b", {r({3, 6, 5}), r({3, 6, 2})}, {{"shape", Shape{1, 5, 2}}}, d);
    check("matmul_backward_b", {r({6, 5}), r({3, 6, 2})}, {{"shape", Shape{3, 5, 2}}}, d);
    check("matmul_backward_b", {r({3, 6, 5}), r({3, 6, 2})}, {{"shape", Shape{5, 2}}}, d);
  }
}

TEST(DeviceProducts, LinearInEveryDtype) {
  BRAID_REQUIRE_GPU();
  Generator gen(12);
  auto r = [&](const Shape& s) { return random_tensor(s, DType::f32, gen); };
  for (DType d : kDtypes) {
    check("linear", {r({9, 13}), r({10, 13}), r({10})}, {}, d);
    check("linear", {r({2, 5, 7}), r({3, 7}), r({3})}, {}, d);
    check("linear", {r({7}), r({3, 7}), Tensor()}, {}, d);
    check("linear", {strided_copy(r({9, 13})), strided_copy(r({10, 13})), r({10})}, {}, d);
    check("linear", {r({3, 0}), r({2, 0}), r({2})}, {}, d);
    check("linear_backward_bias", {r({2, 5, 3})}, {}, d);
    check("linear_backward_bias", {r({300, 70})}, {}, d);
    // bf16 operands take an f32 bias (their result's dtype).
    if (d == DType::bf16) check("linear", {r({9, 13}), r({10, 13}), r({10})}, {}, d, {2});
  }
}

op::Attrs conv_attrs(const Conv2dOptions& o) {
  return {{"stride", std::vector<int64_t>{o.stride[0], o.stride[1]}},
          {"padding", std::vector<int64_t>{o.padding[0], o.padding[1]}},
          {"dilation", std::vector<int64_t>{o.dilation[0], o.dilation[1]}},
          {"groups", o.groups},
          {"backend", int64_t{0}}};
}

TEST(DeviceProducts, ConvolutionsInEveryDtype) {
  BRAID_REQUIRE_GPU();
  Generator gen(13);
  auto r = [&](const Shape& s) { return random_tensor(s, DType::f32, gen); };
  for (DType d : kDtypes) {
    for (const ConvGeometry& c : conv_geometries()) {
      const op::Attrs attrs = conv_attrs(c.opt);
      const Tensor x = r(c.x), w = r(c.w);
      check("conv2d", {x, w, c.bias ? r({c.w[0]}) : Tensor()}, attrs, d);
      const Tensor dy = r(op::call1(op::find("conv2d"), {x, w, Tensor()}, attrs).shape());
      op::Attrs in_attrs = attrs;
      in_attrs.set("input_shape", c.x);
      check("conv2d_backward_input", {dy, w}, in_attrs, d);
      op::Attrs w_attrs = attrs;
      w_attrs.set("weight_shape", c.w);
      w_attrs.set("bias", int64_t{c.bias});
      check("conv2d_backward_weight", {dy, x}, w_attrs, d);
    }
    if (d == DType::bf16) {
      const ConvGeometry& c = conv_geometries()[1];
      check("conv2d", {r(c.x), r(c.w), r({c.w[0]})}, conv_attrs(c.opt), d, {2});
    }
  }
}

TEST(DeviceProducts, PoolingInEveryDtype) {
  BRAID_REQUIRE_GPU();
  Generator gen(14);
  const Shape xs{2, 3, 7, 9};
  for (DType d : kDtypes) {
    for (const auto& [k, s, p] : {std::tuple{3, 2, 1}, std::tuple{2, 2, 0}, std::tuple{3, 1, 1}}) {
      op::Attrs attrs{{"kernel", std::vector<int64_t>{k, k}}, {"stride", std::vector<int64_t>{s, s}},
                      {"padding", std::vector<int64_t>{p, p}}};
      const Tensor x = random_tensor(xs, DType::f32, gen);
      check("max_pool2d", {x}, attrs, d);
      // Indices from the rounded input, so both sides scatter through the same ones.
      const Tensor idx = op::call(op::find("max_pool2d"), {x.to(d).to(DType::f32)}, attrs)[1];
      const Tensor dy = random_tensor(idx.shape(), DType::f32, gen);
      op::Attrs back = attrs;
      back.set("input_shape", xs);
      check("max_pool2d_backward", {dy, idx}, back, d);
      for (int64_t include : {0, 1}) {
        op::Attrs a = attrs, b = back;
        a.set("count_include_pad", include);
        b.set("count_include_pad", include);
        check("avg_pool2d", {x}, a, d);
        check("avg_pool2d_backward", {dy}, b, d);
      }
    }
  }
}

TEST(DeviceProducts, BadShapesFailAsOnTheCpu) {
  BRAID_REQUIRE_GPU();
  const Tensor a = Tensor::ones({3, 4}), b = Tensor::ones({5, 2});
  std::string cpu, gpu;
  try {
    op::call(op::find("matmul"), {a, b});
  } catch (const ValueError& e) {
    cpu = e.what();
  }
  try {
    op::call(op::find("matmul"), {a.to(kGpu), b.to(kGpu)});
  } catch (const ValueError& e) {
    gpu = e.what();
  }
  EXPECT_FALSE(cpu.empty());
  EXPECT_EQ(gpu, cpu);
}

}  // namespace
}  // namespace braid::testing
