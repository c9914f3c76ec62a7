// Collectives on device buffers through the host transport, for the emulated
// device (whose memory is host memory): what the communicator's host staging
// does for a group NCCL cannot serve. Tests install it process-wide for their
// own duration (InstallStaged) and count the buffers it saw: a path that hands
// the communicator a device pointer as host memory would pass unseen otherwise.
#pragma once

#include <atomic>

#include "braid/base/error.h"
#include "braid/comm/communicator.h"
#include "braid/comm/transport/inproc.h"
#include "braid/tensor/tensor.h"

namespace braid::testing {

class StagedCollectives final : public comm::DeviceCollectives {
 public:
  std::atomic<int> calls{0};
  comm::Work allreduce(const comm::Communicator& comm, comm::BufferRef buf, comm::Op op, Duration timeout) override {
    return host(comm).allreduce(on_host(buf), {.op = op, .timeout = timeout});
  }
  comm::Work allgather(const comm::Communicator& comm, comm::BufferRef in, comm::BufferRef out,
                       Duration timeout) override {
    return host(comm).allgather(on_host(in), on_host(out), {.timeout = timeout});
  }
  comm::Work broadcast(const comm::Communicator& comm, comm::BufferRef buf, int root, Duration timeout) override {
    return host(comm).broadcast(on_host(buf), {.root = root, .timeout = timeout});
  }
  comm::Work reduce_scatter(const comm::Communicator& comm, comm::BufferRef in, comm::BufferRef out, comm::Op op,
                            Duration timeout) override {
    return host(comm).reduce_scatter(on_host(in), on_host(out), {.op = op, .timeout = timeout});
  }
  comm::Work send(const comm::Communicator& comm, comm::BufferRef buf, int peer, Duration) override {
    return host(comm).send(on_host(buf), peer);
  }
  comm::Work recv(const comm::Communicator& comm, comm::BufferRef buf, int peer, Duration) override {
    return host(comm).recv(on_host(buf), peer);
  }

 private:
  comm::Communicator host(const comm::Communicator& c) {
    ++calls;
    return comm::Communicator(c);
  }
  static comm::BufferRef on_host(comm::BufferRef b) { return {b.data, b.count, b.dtype}; }
};

// Installs a StagedCollectives for cuda buffers while it lives, unless the
// process already has collectives for them (an emulated NCCL, the
// communicator's own staging): a test then runs over those, and leaves them.
class InstallStaged {
 public:
  InstallStaged() {
    if (has_cuda_collectives()) return;
    comm::set_device_collectives(DeviceType::cuda, &staged_);
    installed_ = true;
  }
  ~InstallStaged() {
    if (installed_) comm::set_device_collectives(DeviceType::cuda, nullptr);
  }
  InstallStaged(const InstallStaged&) = delete;
  InstallStaged& operator=(const InstallStaged&) = delete;
  bool installed() const { return installed_; }
  int calls() const { return staged_.calls.load(); }

 private:
  // A one-rank all-reduce of a device buffer: ValueError where no
  // collectives serve cuda buffers.
  static bool has_cuda_collectives() {
    auto world = comm::InprocWorld::create(1);
    comm::Communicator one(std::shared_ptr<comm::Transport>(world->transport(0)));
    const Tensor x = Tensor::zeros({1}, DType::f32, Device::cuda(0));
    try {
      one.allreduce({x.raw_data(), 1, DType::f32, x.device()}).wait(Deadline::after(std::chrono::seconds(20)));
      return true;
    } catch (const ValueError&) {
      return false;
    }
  }

  StagedCollectives staged_;
  bool installed_ = false;
};

}  // namespace braid::testing
