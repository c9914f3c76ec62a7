// Fused attention on the device (braid/cuda/attention_kernels.h) against the
// CPU kernel: values and the gradients of q, k and v over the geometries the
// op table's one case does not reach (grouped-query heads, fewer queries than
// keys, more than one 64-row dropout tile, no mask, strided views of a packed
// projection, f64), dropout masks equal to the CPU's for the same generator
// state, nn's attention taking the fused op on the device, and the refusals.
#include <gtest/gtest.h>

#include <functional>

#include "braid/autograd/engine.h"
#include "braid/nn/attention.h"
#include "braid/ops/ops.h"
#include "device_test.h"
#include "torch_oracle.h"

namespace braid::testing {
namespace {

struct Result {
  Tensor out, dq, dk, dv;
};

// fn(q, k, v) and the gradients of sum(fn * r), with q, k, v on `device`.
Result run(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& fn, const Tensor& q,
           const Tensor& k, const Tensor& v, const Tensor& r, Device device) {
  Tensor qd = q.to(device).clone(), kd = k.to(device).clone(), vd = v.to(device).clone();
  for (Tensor* t : {&qd, &kd, &vd}) t->set_requires_grad();
  const Tensor out = fn(qd, kd, vd);
  backward(sum(mul(out, r.to(device))));
  return {out.to(Device::cpu), qd.grad().to(Device::cpu), kd.grad().to(Device::cpu), vd.grad().to(Device::cpu)};
}

void expect_same(const Result& gpu, const Result& cpu, double tol, const std::string& what) {
  EXPECT_TRUE(all_close(gpu.out, cpu.out, tol, tol)) << what << ": output";
  EXPECT_TRUE(all_close(gpu.dq, cpu.dq, tol, tol)) << what << ": dq";
  EXPECT_TRUE(all_close(gpu.dk, cpu.dk, tol, tol)) << what << ": dk";
  EXPECT_TRUE(all_close(gpu.dv, cpu.dv, tol, tol)) << what << ": dv";
}

struct Geometry {
  int64_t b, tq, tk, hq, hkv, d;
};

TEST(DeviceAttention, ValuesAndGradientsMatchTheCpu) {
  BRAID_REQUIRE_GPU();
  Generator gen(5);
  // Equal lengths; grouped heads with fewer queries than keys and a second
  // key tile; a second query tile; one query (a decoding step).
  for (const Geometry g : {Geometry{2, 7, 7, 2, 2, 5}, Geometry{1, 3, 70, 4, 2, 8}, Geometry{1, 66, 66, 1, 1, 16},
                           Geometry{2, 1, 9, 3, 1, 4}}) {
    for (const bool causal : {true, false}) {
      for (const DType dtype : {DType::f32, DType::f64}) {
        const Tensor q = random_tensor({g.b, g.tq, g.hq, g.d}, dtype, gen, -2, 2);
        const Tensor k = random_tensor({g.b, g.tk, g.hkv, g.d}, dtype, gen, -2, 2);
        const Tensor v = random_tensor({g.b, g.tk, g.hkv, g.d}, dtype, gen, -2, 2);
        const Tensor r = random_tensor(q.shape(), dtype, gen);
        auto fn = [causal](const Tensor& a, const Tensor& b, const Tensor& c) {
          return scaled_dot_product_attention(a, b, c, {.causal = causal});
        };
        const std::string what = to_string(q.shape()) + " x " + to_string(k.shape()) + (causal ? " causal " : " ") +
                                 std::string(name(dtype));
        expect_same(run(fn, q, k, v, r, kGpu), run(fn, q, k, v, r, Device::cpu), dtype == DType::f64 ? 1e-10 : 1e-4,
                    what);
      }
    }
  }
}

// q, k and v as slices of one packed projection [B, T, 3 H D], read in place.
TEST(DeviceAttention, StridedViewsOfAPackedProjection) {
  BRAID_REQUIRE_GPU();
  Generator gen(6);
  const int64_t b = 2, t = 9, h = 2, d = 4;
  const Tensor qkv = random_tensor({b, t, 3 * h * d}, DType::f32, gen, -2, 2);
  const Tensor r = random_tensor({b, t, h, d}, DType::f32, gen);
  auto part = [&](const Tensor& x, int64_t i) { return reshape(slice(x, 2, i * h * d, (i + 1) * h * d), {b, t, h, d}); };
  auto run_on = [&](Device device) {
    Tensor x = qkv.to(device).clone();
    x.set_requires_grad();
    const Tensor q = part(x, 0), k = part(x, 1), v = part(x, 2);
    EXPECT_FALSE(q.is_contiguous());
    const Tensor out = scaled_dot_product_attention(q, k, v);
    backward(sum(mul(out, r.to(device))));
    return std::pair{out.to(Device::cpu), x.grad().to(Device::cpu)};
  };
  const auto [gpu_out, gpu_grad] = run_on(kGpu);
  const auto [cpu_out, cpu_grad] = run_on(Device::cpu);
  EXPECT_TRUE(all_close(gpu_out, cpu_out, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(gpu_grad, cpu_grad, 1e-4, 1e-5));
}

// The same generator state draws the same mask on either device (the CPU
// kernel's Philox words), and both move the generator alike.
TEST(DeviceAttention, DropoutMasksEqualTheCpus) {
  BRAID_REQUIRE_GPU();
  Generator data(7);
  const Tensor q = random_tensor({2, 70, 2, 4}, DType::f32, data, -1, 1);
  const Tensor k = random_tensor({2, 70, 1, 4}, DType::f32, data, -1, 1);
  const Tensor v = random_tensor({2, 70, 1, 4}, DType::f32, data, -1, 1);
  const Tensor r = random_tensor(q.shape(), DType::f32, data);
  for (const double p : {0.3, 1.0}) {
    Generator on_cpu(11), on_gpu(11);
    auto with = [p](Generator& gen) {
      return [p, &gen](const Tensor& a, const Tensor& b, const Tensor& c) {
        return scaled_dot_product_attention(a, b, c, {.dropout = p, .generator = &gen});
      };
    };
    const Result gpu = run(with(on_gpu), q, k, v, r, kGpu), cpu = run(with(on_cpu), q, k, v, r, Device::cpu);
    expect_same(gpu, cpu, 1e-4, "dropout " + std::to_string(p));
    EXPECT_EQ(on_gpu.state().offset, on_cpu.state().offset);
    if (p == 1.0) {
      EXPECT_EQ(max(abs(gpu.out)).item(), 0.0);
    }
  }
}

// nn's attention takes the fused op on the device in f32 (no [T, T] scores,
// which selective recompute reads) and follows the CPU.
TEST(DeviceAttention, NnAttentionUsesTheFusedOpOnTheDevice) {
  BRAID_REQUIRE_GPU();
  Generator gen(8);
  const Tensor qkv = random_tensor({2, 6, 3 * 2 * 4}, DType::f32, gen, -1, 1);
  EXPECT_FALSE(nn::attend_keeps_scores(qkv.to(kGpu)));
  EXPECT_TRUE(nn::attend_keeps_scores(qkv.to(DType::bf16).to(kGpu)));
  const Tensor cpu = nn::attend(qkv, 2, 2, /*causal=*/true, 0, nullptr);
  const Tensor gpu = nn::attend(qkv.to(kGpu), 2, 2, /*causal=*/true, 0, nullptr);
  EXPECT_TRUE(all_close(gpu.to(Device::cpu), cpu, 1e-4, 1e-5));
}

TEST(DeviceAttention, RefusesWhatItCannotRun) {
  BRAID_REQUIRE_GPU();
  const Tensor wide = Tensor::zeros({1, 2, 1, 300}, DType::f32, kGpu);
  try {
    scaled_dot_product_attention(wide, wide, wide);
    ADD_FAILURE() << "head dim 300 was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("head dim 300"), std::string::npos) << e.what();
  }
  // The CPU op's own checks, word for word: 16-bit inputs, causal Tq > Tk.
  const Tensor h = Tensor::zeros({1, 2, 1, 4}, DType::bf16, kGpu);
  EXPECT_THROW(scaled_dot_product_attention(h, h, h), ValueError);
  const Tensor q = Tensor::zeros({1, 3, 1, 4}, DType::f32, kGpu), k = Tensor::zeros({1, 2, 1, 4}, DType::f32, kGpu);
  std::string gpu_error, cpu_error;
  try {
    scaled_dot_product_attention(q, k, k);
  } catch (const ValueError& e) {
    gpu_error = e.what();
  }
  try {
    scaled_dot_product_attention(q.to(Device::cpu), k.to(Device::cpu), k.to(Device::cpu));
  } catch (const ValueError& e) {
    cpu_error = e.what();
  }
  EXPECT_NE(cpu_error, "");
  EXPECT_EQ(gpu_error, cpu_error);
}

}  // namespace
}  // namespace braid::testing
