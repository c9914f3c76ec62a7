#include "braid/tensor/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "braid/base/error.h"

namespace braid {

namespace {
constexpr size_t kAlign = 64;
constexpr size_t kHugeThreshold = 2u << 20;  // bytes; ask for transparent huge pages above
}  // namespace

struct CachingAllocator::Impl {
  mutable std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_lists;  // block size -> blocks
  AllocatorStats stats;

  CategoryStats& category(MemoryCategory c) { return stats.categories[static_cast<size_t>(c)]; }
  void add(MemoryCategory c, size_t nbytes) {
    CategoryStats& s = category(c);
    s.in_use += nbytes;
    s.peak = std::max(s.peak, s.in_use);
    if (c != MemoryCategory::other) stats.model_state_peak = std::max(stats.model_state_peak, model_state());
  }
  size_t model_state() const {
    return stats[MemoryCategory::parameters].in_use + stats[MemoryCategory::gradients].in_use +
           stats[MemoryCategory::optimizer_state].in_use;
  }
};

const char* name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::other: return "other";
    case MemoryCategory::parameters: return "parameters";
    case MemoryCategory::gradients: return "gradients";
    case MemoryCategory::optimizer_state: return "optimizer_state";
  }
  return "?";
}

CachingAllocator::CachingAllocator() : impl_(std::make_unique<Impl>()) {}

CachingAllocator::~CachingAllocator() { release_cached(); }

CachingAllocator& CachingAllocator::host() {
  // Leaked on purpose: tensors held by static objects may be freed after any
  // static destructor would have run.
  static auto* allocator = new CachingAllocator();
  return *allocator;
}

size_t CachingAllocator::round_size(size_t nbytes) {
  if (nbytes <= 4096) return (std::max<size_t>(nbytes, 1) + kAlign - 1) / kAlign * kAlign;
  // Four steps per power of two: 4096, 5120, 6144, 7168, 8192, 10240, ...
  const size_t top = std::bit_floor(nbytes);
  const size_t step = top / 4;
  return (nbytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t nbytes, MemoryCategory category) {
  const size_t size = round_size(nbytes);
  {
    std::lock_guard lock(impl_->mu);
    impl_->add(category, nbytes);
    impl_->stats.allocations++;
    impl_->stats.bytes_in_use += size;
    impl_->stats.peak_bytes_in_use = std::max(impl_->stats.peak_bytes_in_use, impl_->stats.bytes_in_use);
    auto it = impl_->free_lists.find(size);
    if (it != impl_->free_lists.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      impl_->stats.cache_hits++;
      impl_->stats.bytes_cached -= size;
      return p;
    }
    impl_->stats.system_allocations++;
  }
  // Large blocks are page aligned so madvise may apply to them.
  const size_t align = size >= kHugeThreshold ? 4096 : kAlign;
  void* p = std::aligned_alloc(align, size);
  if (p == nullptr) {
    release_cached();
    p = std::aligned_alloc(align, size);
  }
  if (p == nullptr) fail<Error>("out of host memory allocating {} bytes", size);
  if (size >= kHugeThreshold) madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void CachingAllocator::deallocate(void* ptr, size_t nbytes, MemoryCategory category) {
  if (ptr == nullptr) return;
  const size_t size = round_size(nbytes);
  std::lock_guard lock(impl_->mu);
  impl_->category(category).in_use -= nbytes;
  impl_->free_lists[size].push_back(ptr);
  impl_->stats.bytes_in_use -= size;
  impl_->stats.bytes_cached += size;
}

void CachingAllocator::release_cached() {
  std::lock_guard lock(impl_->mu);
  for (auto& [size, blocks] : impl_->free_lists) {
    for (void* p : blocks) std::free(p);
  }
  impl_->free_lists.clear();
  impl_->stats.bytes_cached = 0;
}

void CachingAllocator::recategorize(size_t nbytes, MemoryCategory from, MemoryCategory to) {
  if (from == to) return;
  std::lock_guard lock(impl_->mu);
  impl_->category(from).in_use -= nbytes;
  impl_->add(to, nbytes);
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(impl_->mu);
  impl_->stats.peak_bytes_in_use = impl_->stats.bytes_in_use;
  for (CategoryStats& c : impl_->stats.categories) c.peak = c.in_use;
  impl_->stats.model_state_peak = impl_->model_state();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

}  // namespace braid
