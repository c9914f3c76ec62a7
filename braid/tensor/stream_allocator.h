// A caching allocator for device memory with stream-ordered reuse.
//
// Device malloc/free are slow and synchronise the device (cudaFree waits for
// every stream), so freed blocks are kept and handed out again. Reuse is safe
// without waiting because of stream order: a block freed by work queued on
// stream S is handed only to later requests on S, whose work runs after the
// previous user's. A block that other streams also used (record_stream) waits
// in a pending state until events recorded on those streams at free time are
// done, then joins S's free pool.
//
// Sizes: requests under 1 MiB round up to 512-byte multiples (0 bytes still
// gets a 512-byte block, so every pointer is distinct); from 1 MiB up to 2 MiB
// multiples. A request takes the smallest cached block of its stream that is at
// least its rounded size and at most twice it (best fit, waste <= 50 %); else
// the device allocates one. The 2x bound also keeps small requests off large
// blocks: the largest small size doubled is still below 2 MiB.
//
// Blocks are never split or merged. Training steps request the same sizes
// every iteration, so whole blocks already reach a steady state with no device
// malloc; and since every cached block is a whole device allocation, the cache
// can always be given back in full (a split block returns only once all its
// pieces are free, which is how fragmentation pins memory).
//
// When the device is out of memory the allocator waits for the device, gives
// every cached block back and retries once; then it throws OutOfMemoryError.
//
// Thread-safe: one mutex around everything, device calls included. Lookups
// by pointer and by (stream, size) are O(log n) in the blocks held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace braid {

// What the caching allocator needs from one device (CUDA in braid/cuda; host
// memory in tests). Streams are opaque handles (a cudaStream_t as an integer).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // nbytes of device memory; nullptr when the device is out of memory (any
  // other failure throws).
  virtual void* malloc(size_t nbytes) = 0;
  // Called only after synchronize(), so no queued work still uses p.
  virtual void free(void* p) = 0;
  using Event = void*;  // opaque
  // Marks the work queued on `stream` so far.
  virtual Event record(uintptr_t stream) = 0;
  // True once the work marked by `e` is done. A stream's work completes in
  // the order it was queued.
  virtual bool query(Event e) = 0;
  // `e` is no longer needed.
  virtual void release(Event e) = 0;
  // Waits for all the device's queued work.
  virtual void synchronize() = 0;
};

struct StreamAllocatorStats {
  size_t bytes_in_use = 0;       // block bytes handed out and not yet freed
  size_t peak_bytes_in_use = 0;  // the most bytes_in_use since reset_peak()
  size_t bytes_cached = 0;       // held from the device, not in use (free or pending)
  uint64_t allocations = 0;      // allocate() calls
  uint64_t cache_hits = 0;       // allocate() calls served from the cache
  uint64_t device_mallocs = 0;   // successful DeviceMemory::malloc calls
  uint64_t device_frees = 0;     // DeviceMemory::free calls
  uint64_t malloc_retries = 0;   // times a failed malloc emptied the cache and retried
  size_t pending_blocks = 0;     // freed, waiting for other streams' work
};

class StreamCachingAllocator {
 public:
  // `name` names the device in errors ("cuda:0"). `memory` must outlive this.
  StreamCachingAllocator(DeviceMemory& memory, std::string name);
  // Gives the cache back (after waiting for the device). Blocks still in use
  // are not freed: the allocator must outlive its blocks.
  ~StreamCachingAllocator();
  StreamCachingAllocator(const StreamCachingAllocator&) = delete;
  StreamCachingAllocator& operator=(const StreamCachingAllocator&) = delete;

  // A block of at least nbytes for work queued on `stream`. Throws
  // OutOfMemoryError when the device cannot provide it even without the cache.
  void* allocate(size_t nbytes, uintptr_t stream);
  // Returns p (from allocate; nullptr is ignored) to the cache; throws
  // ValueError for a pointer this allocator does not have in use.
  void deallocate(void* p);
  // p is also used by work queued on `stream` (besides its allocation
  // stream): once freed, p waits for that stream's work queued up to the free.
  void record_stream(void* p, uintptr_t stream);
  // Waits for the device and gives every cached block back, pending ones
  // included (they are done once the device is idle).
  void empty_cache();
  // Starts a new peak from what is in use now.
  void reset_peak();
  StreamAllocatorStats stats() const;

  // The block size a request of nbytes is rounded to.
  static size_t round_size(size_t nbytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid
