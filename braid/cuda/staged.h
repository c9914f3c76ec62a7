// Collectives on device buffers staged through host memory (comm/device_comm.h,
// the `staged` path): each call copies the device buffer to the host, runs
// braid's own algorithm for the host buffer over the communicator's
// transport, and copies the result back, so any group braid's transports
// reach can hold device buffers — several processes on one GPU, ranks NCCL
// cannot join. The copy to the host waits for the compute queued so far; the
// copy back happens when the host collective finishes, on the thread that
// finishes it (a waiter, or the communicator's progress engine). Results are
// the host algorithms' own, bit for bit.
#pragma once

#include "braid/comm/communicator.h"

namespace braid::cuda {

// The staged collectives for CUDA buffers (one per process; stateless).
comm::DeviceCollectives& staged_collectives();

}  // namespace braid::cuda
