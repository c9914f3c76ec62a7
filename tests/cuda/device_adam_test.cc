// The multi-tensor Adam step on the device (adam_update_multi_, braid/cuda/
// update_kernels.h): Adam and AdamW over more parameters than one launch
// takes, with a decay mask splitting them in two groups, bit for bit equal to
// a call of adam_update_ per parameter, and in a few launches.
#include <gtest/gtest.h>

#if defined(BRAID_CUDA_EMULATE)
#include "braid/cuda/emulated.h"
#endif
#include "braid/ops/update.h"
#include "braid/optim/adam.h"
#include "braid/optim/clip.h"
#include "device_test.h"
#include "torch_oracle.h"

namespace braid::testing {
namespace {

// 45 parameters (more than a launch's 32) of assorted sizes, one element
// included; even ones decay.
std::vector<Tensor> parameters(Generator& gen) {
  std::vector<Tensor> p;
  for (int64_t i = 0; i < 45; ++i) p.push_back(random_tensor({1 + (i * 7) % 13, 1 + i % 3}, DType::f32, gen).to(kGpu));
  return p;
}

std::vector<bool> mask(size_t n) {
  std::vector<bool> m;
  for (size_t i = 0; i < n; ++i) m.push_back(i % 2 == 0);
  return m;
}

TEST(DeviceAdam, MultiTensorStepIsBitEqualToAStepPerParameter) {
  BRAID_REQUIRE_GPU();
  for (const bool decoupled : {false, true}) {
    Generator gen(21);
    std::vector<Tensor> fused = parameters(gen), single;
    for (const Tensor& t : fused) single.push_back(t.clone());
    const double lr = 0.01, wd = 0.1;
    std::unique_ptr<optim::Adam> opt;
    if (decoupled) {
      opt = std::make_unique<optim::AdamW>(fused, optim::AdamWOptions{.lr = lr, .weight_decay = wd});
    } else {
      opt = std::make_unique<optim::Adam>(fused, optim::AdamOptions{.lr = lr, .weight_decay = wd});
    }
    opt->set_decay_mask(mask(fused.size()));
    std::vector<Tensor> m, v;
    for (const Tensor& t : single) {
      m.push_back(Tensor::zeros(t.shape(), DType::f32, kGpu));
      v.push_back(Tensor::zeros(t.shape(), DType::f32, kGpu));
    }
    for (int step = 1; step <= 3; ++step) {
#if defined(BRAID_CUDA_EMULATE)
      cuda::emulated::reset_counters();
#endif
      for (size_t i = 0; i < fused.size(); ++i) {
        const Tensor g = random_tensor(fused[i].shape(), DType::f32, gen).to(kGpu);
        fused[i].set_grad(g);
        single[i].set_grad(g);
      }
      opt->step();
#if defined(BRAID_CUDA_EMULATE)
      // Two groups (decay and none) of 23 and 22 tensors: the constants and
      // one chunk each, against 90 launches a parameter at a time.
      const auto by_kernel = cuda::emulated::counters().by_kernel;
      EXPECT_EQ(by_kernel.count("adam_update_"), 0u);
      EXPECT_EQ(by_kernel.at("adam_update_multi_"), 2);
      EXPECT_EQ(by_kernel.at("adam_update_ (constants)"), 2);
#endif
      const Tensor scalars = Tensor::from_vector<double>({lr, static_cast<double>(step)}, {2}).to(kGpu);
      for (size_t i = 0; i < single.size(); ++i) {
        adam_update_(single[i], single[i].grad(), m[i], v[i], scalars,
                     {.weight_decay = i % 2 == 0 ? wd : 0.0, .decoupled = decoupled});
      }
    }
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_TRUE(all_close(fused[i].to(Device::cpu), single[i].to(Device::cpu), 0, 0))
          << (decoupled ? "AdamW" : "Adam") << " parameter " << i;
    }
  }
}

// Gradient clipping's squared norm: the same bits as the CPU kernel, in a
// launch per 32 tensors and one for the total.
TEST(DeviceAdam, SumOfSquaresOverManyTensorsEqualsTheCpus) {
  BRAID_REQUIRE_GPU();
  Generator gen(22);
  std::vector<Tensor> on_gpu = parameters(gen), on_cpu;
  on_gpu.push_back(random_tensor({3000}, DType::f32, gen).to(kGpu));  // several blocks of 1024
  for (const Tensor& t : on_gpu) on_cpu.push_back(t.to(Device::cpu));
#if defined(BRAID_CUDA_EMULATE)
  cuda::emulated::reset_counters();
#endif
  const Tensor gpu = sum_squares_multi(on_gpu);
#if defined(BRAID_CUDA_EMULATE)
  EXPECT_EQ(cuda::emulated::counters().launches, 3);
#endif
  EXPECT_EQ(gpu.device(), kGpu);
  EXPECT_EQ(gpu.item(), sum_squares_multi(on_cpu).item());
}

// Gradient clipping's scale: one launch per 32 gradients, the CPU's float
// products bit for bit.
TEST(DeviceAdam, ClippingScalesEveryGradientInFewLaunches) {
  BRAID_REQUIRE_GPU();
  Generator gen(23);
  std::vector<Tensor> on_gpu = parameters(gen), on_cpu;
  for (const Tensor& t : on_gpu) on_cpu.push_back(t.to(Device::cpu).clone());
  for (size_t i = 0; i < on_gpu.size(); ++i) {
    const Tensor g = random_tensor(on_gpu[i].shape(), DType::f32, gen);
    on_gpu[i].set_grad(g.to(kGpu));
    on_cpu[i].set_grad(g.clone());
  }
#if defined(BRAID_CUDA_EMULATE)
  cuda::emulated::reset_counters();
#endif
  const double norm = optim::clip_grad_norm(on_gpu, 0.5);
#if defined(BRAID_CUDA_EMULATE)
  EXPECT_EQ(cuda::emulated::counters().by_kernel.at("scale_multi_"), 2);  // 45 gradients
#endif
  EXPECT_GT(norm, 0.5);
  optim::clip_grads_to(on_cpu, norm, 0.5);
  for (size_t i = 0; i < on_gpu.size(); ++i) {
    EXPECT_TRUE(all_close(on_gpu[i].grad().to(Device::cpu), on_cpu[i].grad(), 0, 0)) << "gradient " << i;
  }
}

TEST(DeviceAdam, MultiTensorStepRefusesMismatchedTensors) {
  BRAID_REQUIRE_GPU();
  const Tensor p = Tensor::zeros({4}, DType::f32, kGpu), short_buffer = Tensor::zeros({3}, DType::f32, kGpu);
  const Tensor s = Tensor::from_vector<double>({0.1, 1}, {2}).to(kGpu);
  const std::vector<Tensor> ps{p, p}, gs{p, p}, ms{p, short_buffer}, vs{p, p};
  try {
    adam_update_multi_(ps, gs, ms, vs, s, {});
    ADD_FAILURE() << "a short state buffer was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("exp_avg [3] does not match the parameter [4]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(adam_update_multi_(ps, gs, ms, std::vector<Tensor>{p}, s, {}), ValueError);
}

}  // namespace
}  // namespace braid::testing
