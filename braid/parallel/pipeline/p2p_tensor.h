// Tensors between pipeline stages over a communicator's point-to-point
// messages: a fixed-size header (dtype, rank, dims) and then the values, both
// under the same tag, so the receiver needs to know nothing in advance and
// refuses a header it could not have been sent (bad dtype, rank or size).
#pragma once

#include <memory>
#include <string>

#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel::pipeline {

// The most elements a stage accepts in one message (4 GiB of f32).
inline constexpr int64_t kMaxElements = int64_t{1} << 30;

// A send in flight; keeps its buffers alive until wait() returns. The header
// goes through host memory, the values from the tensor's own device.
class TensorSend {
 public:
  TensorSend(comm::Communicator& comm, const Tensor& t, int peer, uint64_t tag);
  void wait(Deadline deadline) const;

 private:
  std::shared_ptr<std::array<int64_t, 8>> header_;
  Tensor values_;
  comm::Work header_work_, values_work_;
};

// Receives a tensor sent by TensorSend with the same tag, onto `device`.
// `what` names the message in errors ("activation of micro-batch 3 from
// stage 0"). Values on a device travel as device buffers (NCCL or staged,
// comm/device_comm.h), which match first in first out per pair of ranks
// rather than by tag: sender and receiver must agree on the order.
Tensor recv_tensor(comm::Communicator& comm, int peer, uint64_t tag, Deadline deadline, const std::string& what,
                   Device device = Device::cpu);

}  // namespace braid::parallel::pipeline
