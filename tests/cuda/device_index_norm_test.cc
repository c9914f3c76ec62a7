// Cases the op table does not reach, for the CUDA kernels of the index, norm
// and update families: index errors equal the CPU's (type and message), bags
// that are empty or averaged, layer norm rows long enough for a block per
// row, 16-bit parameters with f32 optimizer state, and an in-place update
// through strides. Each checks the device against the CPU backend.
#include <gtest/gtest.h>

#include <functional>

#include "braid/ops/ops.h"
#include "braid/ops/registry.h"
#include "braid/ops/update.h"
#include "braid/tensor/backend.h"
#include "device_test.h"
#include "torch_oracle.h"

namespace braid::testing {
namespace {

// "IndexError: message" for what fn throws, "" when it does not.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const IndexError& e) {
    return std::string("IndexError: ") + e.what();
  } catch (const ValueError& e) {
    return std::string("ValueError: ") + e.what();
  }
  return "";
}

// Runs fn on CPU inputs and on their device copies; both must throw alike.
// Index values are checked on the device and raise at the next sync
// (braid/cuda/deferred_checks.h): the device run ends with one.
void expect_same_error(const std::vector<Tensor>& in, const std::function<void(const std::vector<Tensor>&)>& fn) {
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : in) on_gpu.push_back(t.defined() ? t.to(kGpu) : t);
  const std::string cpu = error_of([&] { fn(in); }), gpu = error_of([&] {
    fn(on_gpu);
    backend(kGpu).synchronize(kGpu.index);
  });
  EXPECT_NE(cpu, "");
  EXPECT_EQ(gpu, cpu);
}

::testing::AssertionResult close(const Tensor& gpu, const Tensor& cpu, double tol) {
  return all_close(gpu.to(Device::cpu).to(DType::f64), cpu.to(DType::f64), tol, tol);
}

Tensor ints(std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {n});
}

TEST(DeviceIndex, BadIndicesFailAsOnTheCpu) {
  BRAID_REQUIRE_GPU();
  Generator gen(1);
  const Tensor x = random_tensor({4, 5}, DType::f32, gen);
  const Tensor bad = ints({0, 5, 1});
  expect_same_error({x, bad}, [](const auto& v) { index_select(v[0], 1, v[1]); });
  expect_same_error({x, ints({-1})}, [](const auto& v) { index_select(v[0], 0, v[1]); });
  expect_same_error({x, bad.to(DType::i32)}, [](const auto& v) { index_select(v[0], 1, v[1]); });
  expect_same_error({x, ints({0, 4})}, [](const auto& v) { embedding(v[0], v[1]); });
  expect_same_error({x, Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 9, 0, 0}, {4, 2})},
                    [](const auto& v) { gather(v[0], 1, v[1]); });
  // The adjoints scatter x's leading columns.
  expect_same_error({x, ints({0, 1, 7})}, [](const auto& v) {
    index_select_backward(v[0].as_strided({4, 3}, {5, 1}, 0).contiguous(), 1, v[1], {4, 5});
  });
  expect_same_error({x, Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 9, 0, 0}, {4, 2})}, [](const auto& v) {
    gather_backward(v[0].as_strided({4, 2}, {5, 1}, 0).contiguous(), 1, v[1], {4, 5});
  });
  // embedding_bag: an index past V, offsets not starting at 0, decreasing offsets.
  expect_same_error({x, ints({0, 4}), ints({0})}, [](const auto& v) { embedding_bag(v[0], v[1], v[2]); });
  expect_same_error({x, ints({0, 1}), ints({1})}, [](const auto& v) { embedding_bag(v[0], v[1], v[2]); });
  expect_same_error({x, ints({0, 1, 2}), ints({0, 2, 1})}, [](const auto& v) { embedding_bag(v[0], v[1], v[2]); });
}

TEST(DeviceIndex, EmptyAndAveragedBagsMatchTheCpu) {
  BRAID_REQUIRE_GPU();
  Generator gen(2);
  const Tensor w = random_tensor({6, 70}, DType::f32, gen), idx = ints({5, 0, 5, 2, 2, 1, 3});
  const Tensor offsets = ints({0, 0, 3, 3, 7});  // bags 0, 3 and 4 are empty
  const Tensor psw = random_tensor({7}, DType::f32, gen), g = random_tensor({5, 70}, DType::f32, gen);
  for (DType dtype : {DType::f32, DType::bf16}) {
    const double tol = dtype == DType::f32 ? 1e-5 : 4e-2;
    const auto on_gpu = [dtype](const Tensor& t) { return t.to(dtype).to(kGpu); };
    const auto rounded = [dtype](const Tensor& t) { return t.to(dtype).to(DType::f32); };
    for (EmbeddingBagMode mode : {EmbeddingBagMode::sum, EmbeddingBagMode::mean}) {
      const Tensor p = mode == EmbeddingBagMode::sum ? psw : Tensor();
      const Tensor y_cpu = embedding_bag(rounded(w), idx, offsets, p.defined() ? rounded(p) : p, mode);
      const Tensor y_gpu = embedding_bag(on_gpu(w), idx.to(kGpu), offsets.to(kGpu), p.defined() ? on_gpu(p) : p, mode);
      EXPECT_TRUE(close(y_gpu, y_cpu, tol)) << name(dtype);
      const op::Attrs attrs{{"mode", static_cast<int64_t>(mode)}, {"num_weights", int64_t{6}}};
      const op::OpDef& back = op::find("embedding_bag_backward");
      const Tensor gw_cpu = op::call1(back, {rounded(g), idx, offsets, p.defined() ? rounded(p) : p}, attrs);
      const Tensor gw_gpu =
          op::call1(back, {on_gpu(g), idx.to(kGpu), offsets.to(kGpu), p.defined() ? on_gpu(p) : p}, attrs);
      EXPECT_TRUE(close(gw_gpu, gw_cpu, tol)) << name(dtype);
    }
    const op::OpDef& psw_back = op::find("embedding_bag_per_sample_weights_backward");
    const Tensor gp_cpu = op::call1(psw_back, {rounded(g), rounded(w), idx, offsets});
    const Tensor gp_gpu = op::call1(psw_back, {on_gpu(g), on_gpu(w), idx.to(kGpu), offsets.to(kGpu)});
    EXPECT_TRUE(close(gp_gpu, gp_cpu, dtype == DType::f32 ? 1e-5 : 0.3)) << name(dtype);  // sums of 70 products
  }
}

TEST(DeviceNorm, LongRowsMatchTheCpu) {
  BRAID_REQUIRE_GPU();
  Generator gen(3);
  // Rows of 300 (a block per row) and of 1000 (several elements per thread).
  for (int64_t d : {300, 1000}) {
    const Tensor x = random_tensor({5, d}, DType::f32, gen, -2, 3), g = random_tensor({5, d}, DType::f32, gen);
    const Tensor w = random_tensor({d}, DType::f32, gen), b = random_tensor({d}, DType::f32, gen);
    const op::Attrs attrs{{"normalized_shape", std::vector<int64_t>{d}}, {"eps", 1e-5}};
    const std::vector<Tensor> cpu = op::call(op::find("layer_norm"), {x, w, b}, attrs);
    const std::vector<Tensor> gpu = op::call(op::find("layer_norm"), {x.to(kGpu), w.to(kGpu), b.to(kGpu)}, attrs);
    EXPECT_TRUE(close(gpu[0], cpu[0], 1e-5)) << d;
    EXPECT_TRUE(close(gpu[1], cpu[1], 1e-10)) << d;
    const op::Attrs battrs{{"normalized_shape", std::vector<int64_t>{d}}, {"weight_grad", int64_t{1}}};
    const op::OpDef& back = op::find("layer_norm_backward");
    const std::vector<Tensor> bc = op::call(back, {g, x, w, cpu[1]}, battrs);
    const std::vector<Tensor> bg = op::call(back, {g.to(kGpu), x.to(kGpu), w.to(kGpu), gpu[1]}, battrs);
    EXPECT_TRUE(close(bg[0], bc[0], 1e-4)) << d;
    EXPECT_TRUE(close(bg[1], bc[1], 1e-5)) << d;
  }
}

TEST(DeviceNorm, RunningUpdateWritesThroughStrides) {
  BRAID_REQUIRE_GPU();
  Generator gen(4);
  const Tensor base = random_tensor({8}, DType::f32, gen), batch = random_tensor({1, 4}, DType::f32, gen);
  const Tensor on_gpu = base.to(kGpu).clone();
  const op::Attrs attrs{{"momentum", 0.1}, {"scale", 1.5}};
  op::call(op::find("batch_norm_running_update_"), {base.as_strided({4}, {2}, 1), batch}, attrs);
  op::call(op::find("batch_norm_running_update_"), {on_gpu.as_strided({4}, {2}, 1), batch.to(kGpu)}, attrs);
  EXPECT_TRUE(close(on_gpu, base, 1e-6));  // the untouched elements too
}

TEST(DeviceUpdate, SixteenBitParametersWithF32State) {
  BRAID_REQUIRE_GPU();
  Generator gen(5);
  const Tensor p = random_tensor({33}, DType::f32, gen).to(DType::bf16).to(DType::f32);
  const Tensor g = random_tensor({33}, DType::f32, gen).to(DType::bf16).to(DType::f32);
  const Tensor m = random_tensor({33}, DType::f32, gen), v = random_tensor({33}, DType::f32, gen, 0.1, 1);
  const Tensor scalars = Tensor::from_vector<double>({0.01, 3}, {2});
  for (DType dtype : {DType::bf16, DType::f16}) {
    Tensor pc = p.clone(), bc = m.clone();
    Tensor pg = p.to(dtype).to(kGpu), bg = m.to(kGpu);
    const SgdUpdate sgd{.weight_decay = 0.01, .momentum = 0.9, .dampening = 0.25, .nesterov = false, .first = false};
    sgd_update_(pc, g, bc, scalars, sgd);
    sgd_update_(pg, g.to(dtype).to(kGpu), bg, scalars.to(kGpu), sgd);
    EXPECT_TRUE(close(bg, bc, 1e-6)) << name(dtype);  // f32 state: as exact as the CPU's
    EXPECT_TRUE(close(pg, pc, 1e-2)) << name(dtype);
    Tensor pa = p.clone(), ma = m.clone(), va = v.clone();
    Tensor pd = p.to(dtype).to(kGpu), md = m.to(kGpu), vd = v.to(kGpu);
    adam_update_(pa, g, ma, va, scalars, {.weight_decay = 0.1, .decoupled = true});
    adam_update_(pd, g.to(dtype).to(kGpu), md, vd, scalars.to(kGpu), {.weight_decay = 0.1, .decoupled = true});
    EXPECT_TRUE(close(md, ma, 1e-6)) << name(dtype);
    EXPECT_TRUE(close(vd, va, 1e-6)) << name(dtype);
    EXPECT_TRUE(close(pd, pa, 1e-2)) << name(dtype);
  }
}

}  // namespace
}  // namespace braid::testing
