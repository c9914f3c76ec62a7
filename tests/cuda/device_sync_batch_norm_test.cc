// Synchronised batch norm on a device: its statistics reach the communicator
// as device buffers (so it sends them through NCCL or stages them), never as
// host pointers that the host collectives would read; and its values and
// gradients on the device are the CPU layer's. Emulated backend only: the
// tests' staging (staged_collectives.h) goes through host memory, which
// emulated device memory is.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/autograd/engine.h"
#include "braid/base/rng.h"
#include "braid/nn/norm.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/parallel/sync_batch_norm.h"
#include "tests/cuda/device_test.h"
#include "tests/cuda/staged_collectives.h"
#include "tests/parallel/inproc_ranks.h"

namespace braid {
namespace {

#ifdef BRAID_CUDA_EMULATE

TEST(DeviceSyncBatchNorm, StatisticsTravelAsDeviceBuffers) {
  BRAID_REQUIRE_GPU();
  // Counts the device buffers the communicator hands on (where no other
  // collectives serve cuda buffers: those are left in place, uncounted).
  testing::InstallStaged staged;
  parallel::testing::on_ranks(2, [&](int rank, comm::Communicator comm) {
    nn::BatchNorm2d bn(3);
    bn.to(testing::kGpu);
    ASSERT_EQ(parallel::synchronize_batch_norm(bn, comm), 1);
    Generator g(static_cast<uint64_t>(rank) + 1);
    std::vector<float> v(2 * 3 * 4 * 4);
    for (float& x : v) x = static_cast<float>(g.normal());
    Tensor x = Tensor::from_vector(v, {2, 3, 4, 4}).to(testing::kGpu);
    x.set_requires_grad();
    autograd::backward(sum(bn.forward(x)));
  });
  // Forward (count, sums, squared deviations) and backward, on both ranks:
  // every all-reduce saw a device buffer.
  if (staged.installed()) {
    EXPECT_GE(staged.calls(), 2 * 2);
  }
}

// Two ranks, each with its own slice of the batch: the synchronised layer on
// the device gives the CPU layer's output, input and parameter gradients and
// running statistics (to float rounding: device reductions sum in another order).
TEST(DeviceSyncBatchNorm, ValuesAndGradientsMatchTheCpuLayer) {
  testing::InstallStaged staged;
  parallel::testing::on_ranks(2, [&](int rank, comm::Communicator comm) {
    std::vector<std::vector<Tensor>> got;  // per device: y, x.grad, then parameters' grads and the state
    for (Device d : {Device::cpu, testing::kGpu}) {
      nn::BatchNorm2d bn(3);
      bn.to(d);
      ASSERT_EQ(parallel::synchronize_batch_norm(bn, comm), 1);
      Generator g(static_cast<uint64_t>(rank) + 1);
      std::vector<float> v(2 * 3 * 4 * 4), w(v.size());
      for (float& x : v) x = static_cast<float>(g.normal() * 2 + rank);
      for (float& x : w) x = static_cast<float>(g.normal());
      Tensor x = Tensor::from_vector(v, {2, 3, 4, 4}).to(d);
      x.set_requires_grad();
      const Tensor y = bn.forward(x);
      autograd::backward(sum(mul(y, Tensor::from_vector(w, {2, 3, 4, 4}).to(d))));
      std::vector<Tensor> out = {y.detach(), x.grad()};
      for (const Tensor& p : bn.parameters()) out.push_back(p.grad());
      for (const auto& [name, t] : bn.state_dict()) out.push_back(t);
      got.push_back(out);
    }
    ASSERT_EQ(got[0].size(), got[1].size());
    for (size_t i = 0; i < got[0].size(); ++i) {
      const Tensor a = got[0][i].to(Device::cpu).contiguous(), b = got[1][i].to(Device::cpu).contiguous();
      ASSERT_EQ(a.numel(), b.numel());
      for (int64_t j = 0; j < a.numel(); ++j) {
        EXPECT_NEAR(a.data<float>()[j], b.data<float>()[j], 1e-4 * (1 + std::fabs(a.data<float>()[j])))
            << "tensor " << i << " entry " << j << " rank " << rank;
      }
    }
  });
}

#endif  // BRAID_CUDA_EMULATE

}  // namespace
}  // namespace braid
