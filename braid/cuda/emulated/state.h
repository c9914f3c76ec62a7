// The emulated backend's process-wide record (emulated.h), writable by its
// own files: memory.cc counts allocations and copies, counters.cc launches.
#pragma once

#include <mutex>
#include <unordered_map>

#include "braid/cuda/emulated.h"

namespace braid::cuda::emulated {

struct State {
  Counters counters;  // by_kernel left empty: launches are counted by name below
  // Keyed by the launch site's string literal: a launch on the null device
  // costs an increment, not a string's construction, so the host time
  // measured there stays the framework's own.
  std::unordered_map<const char*, int64_t> by_kernel;
  // Guards the counts: ranks that are threads (the emulated NCCL's tests)
  // launch at once, and a new name in by_kernel rehashes the map.
  std::mutex mu;
  bool null_device = false;
  bool capturing = false;
};

// ValueError "CUDA graph capture: `what` ..." while a Capture is alive.
void refuse_in_capture(const char* what);

State& state();

// Gives every cached free block back (memory.cc): blocks then come zeroed
// from the system, where earlier kernels' leftovers (NaN among them) would
// reach a null-device step's reads.
void release_cached_blocks();

}  // namespace braid::cuda::emulated
