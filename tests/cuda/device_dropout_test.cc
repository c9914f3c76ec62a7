// dropout on the CUDA device (braid/cuda/dropout_*): the device evaluates
// the same Philox words as the CPU kernel, so from one generator state the
// f32/f64 outputs are equal element for element and both generators move on
// by numel() words; 16-bit inputs keep the same elements, scaled by
// 1 / (1 - p) rounded to the dtype. Skips without a GPU (braid_cuda_test).
#include <gtest/gtest.h>

#include "braid/ops/dropout.h"
#include "braid/ops/registry.h"
#include "braid/tensor/backend.h"
#include "device_test.h"
#include "torch_oracle.h"

namespace braid::testing {
namespace {

TEST(DeviceDropout, EqualsTheCpuFromOneGeneratorState) {
  BRAID_REQUIRE_GPU();
  Generator data(3);
  for (DType dtype : {DType::f32, DType::f64}) {
    // [29, 37] transposed: a strided input of 1073 elements, from an offset
    // that starts mid-way through a Philox block.
    const Tensor x = random_tensor({29, 37}, DType::f32, data, 0.5, 1.5).to(dtype).as_strided({37, 29}, {1, 37}, 0);
    Generator on_cpu(11, 2), on_gpu(11, 2);
    on_cpu.set_state({11, 2, 6});
    on_gpu.set_state({11, 2, 6});
    const Tensor y_cpu = dropout(x, {.p = 0.3, .generator = &on_cpu});
    const Tensor y_gpu = dropout(x.to(kGpu), {.p = 0.3, .generator = &on_gpu});
    EXPECT_EQ(y_gpu.device(), kGpu);
    EXPECT_TRUE(all_close(y_gpu.to(Device::cpu), y_cpu, 0, 0)) << name(dtype);
    EXPECT_EQ(on_gpu.state().offset, on_cpu.state().offset);
    EXPECT_EQ(on_gpu.state().offset, 6u + 37 * 29);
  }
}

TEST(DeviceDropout, KeepsAboutOneMinusPAndScalesTheSurvivors) {
  BRAID_REQUIRE_GPU();
  const int64_t n = 100000;
  Generator gen(9);
  const Tensor y = dropout(Tensor::ones({n}, DType::f32, kGpu), {.p = 0.3, .generator = &gen});
  int64_t kept = 0;
  for (float v : y.to_vector<float>()) {
    if (v != 0) {
      ++kept;
      EXPECT_FLOAT_EQ(v, static_cast<float>(1 / 0.7));
    }
  }
  // 0.7 n kept, standard deviation sqrt(0.21 n) ~ 145: 5 sigma.
  EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 725);
}

TEST(DeviceDropout, SixteenBitInputsKeepTheSameElements) {
  BRAID_REQUIRE_GPU();
  Generator data(4);
  const Tensor x = random_tensor({300}, DType::f32, data, 0.5, 1.5);
  const op::OpDef& op = op::find("dropout");
  const op::Attrs attrs{{"p", 0.25}, {"generator", int64_t{0}}};  // this thread's dropout_generator()
  for (DType dtype : {DType::f16, DType::bf16}) {
    dropout_generator().set_state({5, 0, 0});
    const std::vector<Tensor> cpu = op::call(op, {x}, attrs);
    dropout_generator().set_state({5, 0, 0});
    const std::vector<Tensor> gpu = op::call(op, {x.to(dtype).to(kGpu)}, attrs);
    const std::vector<float> mask_cpu = cpu[1].to_vector<float>(), mask_gpu = gpu[1].to_vector<float>();
    const auto scale = static_cast<float>(Tensor::scalar(1 / 0.75).to(dtype).item());
    for (size_t i = 0; i < mask_cpu.size(); ++i) {
      ASSERT_EQ(mask_gpu[i], mask_cpu[i] == 0 ? 0.0f : scale) << name(dtype) << " element " << i;
    }
    EXPECT_TRUE(all_close(gpu[0].to(Device::cpu).to(DType::f32), cpu[0], 1e-2, 1e-2)) << name(dtype);
  }
}

}  // namespace
}  // namespace braid::testing
