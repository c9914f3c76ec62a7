// NCCL behind the communicator, on the real GPU (braid_cuda_test only). One
// GPU allows one NCCL rank (NCCL refuses two ranks on one device), so these
// check the routing, the bootstrap, the collectives' results against the
// host communicator's, and the stream ordering at world size 1.
#include <gtest/gtest.h>

#include "braid/comm/communicator.h"
#include "braid/comm/transport/inproc.h"
#include "braid/cuda/nccl.h"
#include "braid/ops/ops.h"
#include "braid/tensor/backend.h"
#include "device_test.h"
#include "braid/comm/tensor_buffer.h"

namespace braid {
namespace {

using testing::kGpu;

comm::Communicator solo() {
  auto world = comm::InprocWorld::create(1);
  return comm::Communicator(std::shared_ptr<comm::Transport>(std::move(world->transports()[0])));
}

TEST(Nccl, CollectivesOnDeviceBuffersMatchTheHostCommunicator) {
  BRAID_REQUIRE_GPU();
  comm::Communicator c = solo();
  const Deadline soon = Deadline::after(std::chrono::seconds(60));
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 3;
  const Tensor host = Tensor::from_vector(values, {1000});
  for (comm::Op op : {comm::Op::sum, comm::Op::avg, comm::Op::max}) {
    Tensor h = host.clone();
    c.allreduce(comm::buffer_of(h), {.op = op}).wait(soon);
    Tensor d = host.to(kGpu);
    c.allreduce(comm::buffer_of(d), {.op = op}).wait(soon);
    EXPECT_EQ(d.to_vector<float>(), h.to_vector<float>()) << comm::name(op);
  }
  Tensor d = host.to(kGpu);
  c.broadcast(comm::buffer_of(d), {.root = 0}).wait(soon);
  EXPECT_EQ(d.to_vector<float>(), values);
  Tensor gathered = Tensor::zeros({1000}, DType::f32, kGpu);
  c.allgather(comm::buffer_of(d), comm::buffer_of(gathered)).wait(soon);
  EXPECT_EQ(gathered.to_vector<float>(), values);
  Tensor scattered = Tensor::zeros({1000}, DType::f32, kGpu);
  c.reduce_scatter(comm::buffer_of(d), comm::buffer_of(scattered)).wait(soon);
  EXPECT_EQ(scattered.to_vector<float>(), values);
  EXPECT_STRNE(cuda::nccl_version(), "");
}

TEST(Nccl, TheAllReduceSeesWhatComputeQueuedBeforeIt) {
  BRAID_REQUIRE_GPU();
  comm::Communicator c = solo();
  // A long chain of kernels on the compute stream, then the all-reduce on the
  // communication stream: it must wait for the chain (an event between them).
  Tensor x = Tensor::zeros({1 << 20}, DType::f32, kGpu);
  Tensor y = x;
  for (int i = 0; i < 50; ++i) y = add(y, 1.0);
  c.allreduce(comm::buffer_of(y), {.op = comm::Op::sum}).wait(Deadline::after(std::chrono::seconds(60)));
  const std::vector<float> v = y.to_vector<float>();
  EXPECT_EQ(v.front(), 50.0f);
  EXPECT_EQ(v.back(), 50.0f);
}

TEST(Nccl, BuffersOnTwoDevicesOrOnTheHostAndDeviceAreRefused) {
  BRAID_REQUIRE_GPU();
  comm::Communicator c = solo();
  Tensor d = Tensor::zeros({4}, DType::f32, kGpu);
  Tensor h = Tensor::zeros({4});
  EXPECT_THROW(c.allgather(comm::buffer_of(h), comm::buffer_of(d)), ValueError);
}

}  // namespace
}  // namespace braid
