// Device memory for the emulated CUDA backend: one "GPU" whose memory is host
// memory, so the backend's kernels (host loops here) read it directly.
#include <cstdlib>
#include <cstring>

#include "braid/cuda/memory.h"

namespace braid::cuda {

int gpu_count() { return 1; }
void use_gpu(int) {}
void* device_allocate(size_t nbytes, int) { return std::aligned_alloc(64, (nbytes + 63) / 64 * 64 + 64); }
void device_free(void* p, int) { std::free(p); }
void copy_bytes(void* dst, Device, const void* src, Device, size_t nbytes) {
  if (nbytes > 0) std::memmove(dst, src, nbytes);
}
void synchronize_gpu(int) {}

}  // namespace braid::cuda
