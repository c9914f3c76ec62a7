// Synchronised batch norm on a device: its statistics reach the communicator
// as device buffers (so it sends them through NCCL or stages them), never as
// host pointers that the host collectives would read. Emulated backend only:
// the recorder below stages through host memory, which emulated device memory is.
#include <gtest/gtest.h>

#include <atomic>

#include "braid/autograd/engine.h"
#include "braid/base/rng.h"
#include "braid/nn/norm.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/parallel/sync_batch_norm.h"
#include "tests/cuda/device_test.h"
#include "tests/parallel/inproc_ranks.h"

namespace braid {
namespace {

#ifdef BRAID_CUDA_EMULATE

// Counts the device buffers it is handed and all-reduces them through the
// host transport (emulated device memory is host memory).
class RecordingCollectives final : public comm::DeviceCollectives {
 public:
  std::atomic<int> device_allreduces{0};
  comm::Work allreduce(const comm::Communicator& comm, comm::BufferRef buf, comm::Op op, Duration timeout) override {
    if (buf.device.is_cuda()) ++device_allreduces;
    return comm::Communicator(comm).allreduce({buf.data, buf.count, buf.dtype}, {.op = op, .timeout = timeout});
  }
  comm::Work broadcast(const comm::Communicator&, comm::BufferRef, int, Duration) override { unexpected(); }
  comm::Work reduce_scatter(const comm::Communicator&, comm::BufferRef, comm::BufferRef, comm::Op, Duration) override {
    unexpected();
  }
  comm::Work allgather(const comm::Communicator&, comm::BufferRef, comm::BufferRef, Duration) override { unexpected(); }
  comm::Work send(const comm::Communicator&, comm::BufferRef, int, Duration) override { unexpected(); }
  comm::Work recv(const comm::Communicator&, comm::BufferRef, int, Duration) override { unexpected(); }

 private:
  [[noreturn]] static void unexpected() { fail<Error>("synchronised batch norm only all-reduces"); }
};

TEST(DeviceSyncBatchNorm, StatisticsTravelAsDeviceBuffers) {
  BRAID_REQUIRE_GPU();
  RecordingCollectives recorder;
  comm::set_device_collectives(DeviceType::cuda, &recorder);
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
  comm::set_device_collectives(DeviceType::cuda, nullptr);
  // Forward (mean, mean of squares) and backward: every all-reduce saw a device buffer.
  EXPECT_GE(recorder.device_allreduces.load(), 2 * 2);
}

#endif  // BRAID_CUDA_EMULATE

}  // namespace
}  // namespace braid
