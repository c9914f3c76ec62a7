// A caching host allocator.
//
// Freed blocks go back to per-size free lists instead of to the OS, so a
// training step that allocates the same buffers every iteration reaches a
// steady state with no malloc, no mmap/munmap and no page faults. (glibc's
// moving mmap threshold otherwise turns large short-lived buffers into page-
// fault storms: a PyTorch CNN epoch measured 13 s or 55 s here depending on it.)
// Blocks are 64-byte aligned. Sizes are rounded to 4 steps per power of two, so
// a cached block serves any request within 25 % of its size.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace braid {

// What a block holds, for the per-category figures ZeRO's memory accounting
// reads. Blocks start as `other` (activations, temporaries); the layers that
// own model state re-label theirs: modules their parameters, autograd the
// gradients it stores on leaves, optimizers their buffers.
enum class MemoryCategory : uint8_t { other, parameters, gradients, optimizer_state };
inline constexpr size_t kMemoryCategories = 4;
const char* name(MemoryCategory c);

// Bytes requested (not rounded to blocks) in one category.
struct CategoryStats {
  size_t in_use = 0;
  size_t peak = 0;  // since the last reset_peak()
};

struct AllocatorStats {
  size_t bytes_in_use = 0;   // handed out and not yet freed
  size_t peak_bytes_in_use = 0;  // the most bytes_in_use has been since the last reset_peak()
  size_t bytes_cached = 0;   // held in free lists
  uint64_t allocations = 0;  // allocate() calls
  uint64_t cache_hits = 0;   // allocate() calls served from a free list
  uint64_t system_allocations = 0;
  std::array<CategoryStats, kMemoryCategories> categories{};
  // Parameters + gradients + optimizer state at their highest at one moment
  // (the per-category peaks may fall at different moments).
  size_t model_state_peak = 0;
  const CategoryStats& operator[](MemoryCategory c) const { return categories[static_cast<size_t>(c)]; }
};

class CachingAllocator {
 public:
  // The process-wide host allocator used by tensors.
  static CachingAllocator& host();

  // Returns a 64-byte aligned block of at least `nbytes` (nbytes may be 0).
  void* allocate(size_t nbytes, MemoryCategory category = MemoryCategory::other);
  // Returns a block obtained from allocate(nbytes, category) to the cache.
  void deallocate(void* ptr, size_t nbytes, MemoryCategory category = MemoryCategory::other);
  // Moves `nbytes` in use from one category's figures to another's.
  void recategorize(size_t nbytes, MemoryCategory from, MemoryCategory to);
  // Gives every cached block back to the system.
  void release_cached();
  // Starts a new peak from what is in use now (benchmarks measure one phase).
  void reset_peak();
  AllocatorStats stats() const;

  // The block size a request of `nbytes` is served with.
  static size_t round_size(size_t nbytes);

  CachingAllocator();
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid
