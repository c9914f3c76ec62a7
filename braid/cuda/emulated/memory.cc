// Device memory for the emulated CUDA backend: one "GPU" whose memory is host
// memory, so the backend's kernels (host loops here) read it directly. Blocks
// come through the same stream-ordered caching allocator as a real GPU's
// (memory.cc), so a step's system allocations are the ones a GPU would make;
// every wait of the host for the device and every byte crossing is counted
// (emulated.h).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "braid/base/error.h"
#include "braid/cuda/deferred_checks.h"
#include "braid/cuda/emulated.h"
#include "braid/cuda/emulated/state.h"
#include "braid/cuda/memory.h"
#include "braid/tensor/stream_allocator.h"

namespace braid::cuda {

namespace {

// Host memory as a device whose work is always done (kernels run inline).
class HostMemory final : public DeviceMemory {
 public:
  void* malloc(size_t nbytes) override {
    emulated::refuse_in_capture("device memory from the system (cudaMalloc)");
    const size_t padded = (nbytes + 63) / 64 * 64 + 64;
    void* p = std::aligned_alloc(64, padded);
    if (p == nullptr) return nullptr;
    std::memset(p, 0, padded);  // the null device leaves blocks as they came: zeros are finite
    std::lock_guard lock(emulated::state().mu);
    emulated::Counters& c = emulated::state().counters;
    ++c.allocations;
    c.allocated_bytes += static_cast<int64_t>(nbytes);
    return p;
  }
  void free(void* p) override { std::free(p); }
  Event record(uintptr_t) override { return nullptr; }
  bool query(Event) override { return true; }
  void release(Event) override {}
  void synchronize() override {}
};

StreamCachingAllocator& allocator() {
  static HostMemory* memory = new HostMemory;  // never destroyed: tensors may outlive static destruction
  static StreamCachingAllocator* a = new StreamCachingAllocator(*memory, "cuda:0");
  return *a;
}

constexpr uintptr_t kStream = 1;  // the one stream every emulated kernel runs on
constexpr size_t kPinnedSlot = 64 * 1024;  // memory.cc's PinnedRing::kSlot

}  // namespace

int gpu_count() { return 1; }
void use_gpu(int) {}
void* device_allocate(size_t nbytes, int) { return allocator().allocate(nbytes, kStream); }
void device_free(void* p, int) { allocator().deallocate(p); }
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  std::unique_lock lock(emulated::state().mu);  // the counts only: ranks as threads copy at once
  emulated::Counters& c = emulated::state().counters;
  if (dst_device.is_cuda() && !src_device.is_cuda()) {
    c.to_device_bytes += static_cast<int64_t>(nbytes);
    // The real backend stages up to one ring slot through pinned memory.
    if (nbytes > kPinnedSlot) emulated::refuse_in_capture("a copy to the device from pageable host memory");
  }
  if (!dst_device.is_cuda()) {
    emulated::refuse_in_capture("a copy to the host (the host waits for the device)");
    c.to_host_bytes += static_cast<int64_t>(nbytes);
    ++c.syncs;  // the host reads its side at once: a GPU's stream must drain first
  }
  if (dst_device.is_cuda() && src_device.is_cuda()) {
    ++c.launches;  // a device-to-device cudaMemcpyAsync occupies the queue as a kernel does
    ++emulated::state().by_kernel["memcpy"];
    c.copy_bytes += 2 * static_cast<int64_t>(nbytes);
    ++c.copies;
    if (emulated::null_device()) return;
  }
  lock.unlock();
  std::memmove(dst, src, nbytes);
  if (!dst_device.is_cuda()) raise_failed_checks(0);  // a wait: checks run on the device report
}
void synchronize_gpu(int) {
  emulated::refuse_in_capture("synchronize");
  {
    std::lock_guard lock(emulated::state().mu);
    ++emulated::state().counters.syncs;
  }
  raise_failed_checks(0);
}

CheckRecord* check_record(int) {
  static CheckRecord* record = new CheckRecord;
  return record;
}
CheckRecord take_check_record(int) {
  CheckRecord* r = check_record(0);
  const CheckRecord out = *r;
  *r = CheckRecord{};
  return out;
}

namespace emulated {

int64_t memory_in_use() { return static_cast<int64_t>(allocator().stats().bytes_in_use); }
int64_t peak_memory() { return static_cast<int64_t>(allocator().stats().peak_bytes_in_use); }
void reset_peak_memory() { allocator().reset_peak(); }
void release_cached_blocks() { allocator().empty_cache(); }

}  // namespace emulated

}  // namespace braid::cuda
