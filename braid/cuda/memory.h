// Device memory and raw copies, as the CUDA backend's kernels and the tensor
// backend need them. memory.cc implements them with the CUDA runtime and the
// stream-ordered caching allocator; emulated builds (loop.h) with host memory.
#pragma once

#include <cstddef>

#include "braid/tensor/device.h"

namespace braid::cuda {

// GPUs this process can use.
int gpu_count();
// Makes `index` the calling thread's GPU (kernels launch there).
void use_gpu(int index);
// A block on GPU `index`, ordered on its current stream.
void* device_allocate(size_t nbytes, int index);
void device_free(void* p, int index);
// nbytes between host and GPU memory in either direction or within/between
// GPUs; to the host it has finished on return.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
// Waits for every stream of GPU `index`.
void synchronize_gpu(int index);

// Where checks that run on the device (deferred_checks.h) leave their first
// failure: check 0 while none failed.
struct CheckRecord {
  int64_t check = 0, position = 0, value = 0;
};
// GPU `index`'s record in device memory, zeroed when first asked for.
CheckRecord* check_record(int index);
// The record, read once the host has waited for the device, and cleared when
// a check failed; a GPU that never ran a check reads as none failed.
CheckRecord take_check_record(int index);

}  // namespace braid::cuda
