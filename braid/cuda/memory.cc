#include "braid/cuda/memory.h"

#include <array>
#include <cstring>
#include <memory>
#include <mutex>

#include "braid/base/error.h"
#include "braid/cuda/deferred_checks.h"
#include "braid/cuda/runtime.h"
#include "braid/tensor/stream_allocator.h"

namespace braid::cuda {

namespace {

// What the caching allocator needs from one GPU.
class GpuMemory final : public DeviceMemory {
 public:
  explicit GpuMemory(int device) : device_(device) {}

  void* malloc(size_t nbytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, nbytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    check(e, "cudaMalloc");
    return p;
  }
  void free(void* p) override { check(cudaFree(p), "cudaFree"); }
  Event record(uintptr_t stream) override {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)), "cudaEventRecord");
    return e;
  }
  bool query(Event e) override {
    const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) return false;
    check(r, "cudaEventQuery");
    return true;
  }
  void release(Event e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
  void synchronize() override { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

 private:
  int device_;
};

struct Gpu {
  std::unique_ptr<GpuMemory> memory;
  std::unique_ptr<StreamCachingAllocator> allocator;
};

Gpu& gpu(int index) {
  static std::array<Gpu, 128> gpus;
  static std::array<std::once_flag, 128> once;
  std::call_once(once[index], [index] {
    gpus[index].memory = std::make_unique<GpuMemory>(index);
    gpus[index].allocator = std::make_unique<StreamCachingAllocator>(*gpus[index].memory, name(Device::cuda(index)));
  });
  return gpus[index];
}

// The thread's current GPU while a call needs another one.
class OnGpu {
 public:
  explicit OnGpu(int index) : previous_(current_device()) { set_device(index); }
  ~OnGpu() {
    try {
      set_device(previous_);
    } catch (const Error&) {
    }
  }

 private:
  int previous_ = 0;
};

// Small copies to the device (a host scalar joining a device op, a batch of
// labels) go through pinned memory: from pageable memory cudaMemcpyAsync
// first waits for the stream to drain, which would stall the GPU's queue on
// every scalar. Slots of a pinned ring are reused once the copy that last
// used them has run (an event per slot).
class PinnedRing {
 public:
  static constexpr size_t kSlot = 64 * 1024;
  static constexpr size_t kSlots = 64;

  void copy_to_device(void* dst, const void* src, size_t nbytes, cudaStream_t stream) {
    std::lock_guard lock(mu_);
    if (base_ == nullptr) {
      check(cudaHostAlloc(&base_, kSlot * kSlots, cudaHostAllocPortable), "cudaHostAlloc");
      for (auto& e : used_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    }
    const size_t slot = next_++ % kSlots;
    check(cudaEventSynchronize(used_[slot]), "cudaEventSynchronize");  // at once unless 64 copies are queued
    char* staging = static_cast<char*>(base_) + slot * kSlot;
    std::memcpy(staging, src, nbytes);
    check(cudaMemcpyAsync(dst, staging, nbytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
    check(cudaEventRecord(used_[slot], stream), "cudaEventRecord");
  }

 private:
  std::mutex mu_;
  void* base_ = nullptr;
  std::array<cudaEvent_t, kSlots> used_{};
  size_t next_ = 0;
};

PinnedRing& pinned_ring() {
  static PinnedRing* ring = new PinnedRing;  // never destroyed: the runtime may be gone at exit
  return *ring;
}

}  // namespace

int gpu_count() { return device_count(); }

void use_gpu(int index) { set_device(index); }

void* device_allocate(size_t nbytes, int index) {
  OnGpu on(index);
  return gpu(index).allocator->allocate(nbytes, reinterpret_cast<uintptr_t>(current_stream(index)));
}

void device_free(void* p, int index) {
  OnGpu on(index);
  gpu(index).allocator->deallocate(p);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  const Device gpu_side = dst_device.is_cuda() ? dst_device : src_device;
  OnGpu on(gpu_side.index);
  cudaStream_t stream = current_stream(gpu_side.index);
  if (!src_device.is_cuda() && nbytes <= PinnedRing::kSlot) return pinned_ring().copy_to_device(dst, src, nbytes, stream);
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
  // The host reads its side as soon as this returns. (From pageable host
  // memory the call itself returns only once the source is staged, so a copy
  // to the device needs no wait.) A wait is where checks run on the device
  // report (deferred_checks.h).
  if (!dst_device.is_cuda()) {
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    raise_failed_checks(gpu_side.index);
  }
}

void synchronize_gpu(int index) {
  OnGpu on(index);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  raise_failed_checks(index);
}

namespace {

struct Records {
  std::mutex mu;
  std::array<CheckRecord*, 128> on_gpu{};  // allocated by the first check on each GPU, kept for the process
};

Records& records() {
  static Records* r = new Records;
  return *r;
}

}  // namespace

CheckRecord* check_record(int index) {
  Records& r = records();
  std::lock_guard lock(r.mu);
  CheckRecord*& p = r.on_gpu[index];
  if (p == nullptr) {
    OnGpu on(index);
    void* raw = nullptr;
    check(cudaMalloc(&raw, sizeof(CheckRecord)), "cudaMalloc");
    // On the stream the checks go to, so it is zero before the first one runs.
    check(cudaMemsetAsync(raw, 0, sizeof(CheckRecord), current_stream(index)), "cudaMemsetAsync");
    p = static_cast<CheckRecord*>(raw);
  }
  return p;
}

CheckRecord take_check_record(int index) {
  CheckRecord* p = nullptr;
  {
    Records& r = records();
    std::lock_guard lock(r.mu);
    p = r.on_gpu[index];
  }
  CheckRecord out;
  if (p == nullptr) return out;  // no check ever ran there
  OnGpu on(index);
  // The caller has waited for the device: these plain copies find the checks done.
  check(cudaMemcpy(&out, p, sizeof(CheckRecord), cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (out.check != 0) check(cudaMemset(p, 0, sizeof(CheckRecord)), "cudaMemset");
  return out;
}

}  // namespace braid::cuda
