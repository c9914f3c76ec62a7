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

}  // namespace braid::cuda
