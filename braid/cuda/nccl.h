// NCCL behind braid's communicators: a Communicator routes collectives on
// buffers in GPU memory here (comm::DeviceCollectives), so the same call —
// comm.allreduce(BufferRef(grad.raw_data(), n, f32, grad.device())) — runs on
// NCCL for device tensors and on braid's own algorithms for host ones.
//
// Each braid communicator gets one NCCL communicator, made on its first
// device collective (a collective call itself: rank 0's ncclUniqueId travels
// over the braid communicator). A collective is queued on the device's
// communication stream, after the work queued so far on its current stream
// (runtime.h), so that it overlaps the compute queued next; it returns a Work
// that is done once the GPU has finished it; waiting past the collective's timeout aborts the NCCL
// communicator and fails with the rank, the operation and the wait, instead of
// hanging in a kernel that waits for a peer that never comes.
#pragma once

#include <cstddef>

namespace braid::cuda {

// The NCCL version linked ("2.27.3"), for reports.
const char* nccl_version();

}  // namespace braid::cuda
