#include "braid/tensor/stream_allocator.h"

#include <algorithm>
#include <compare>
#include <deque>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "braid/base/error.h"

namespace braid {

namespace {

constexpr size_t kSmallStep = 512;            // bytes
constexpr size_t kLargeThreshold = 1u << 20;  // bytes; requests from here round to kLargeStep
constexpr size_t kLargeStep = 2u << 20;       // bytes
constexpr size_t kMaxWaste = 2;               // a cached block serves requests down to 1/kMaxWaste of its size

enum class State : uint8_t { in_use, pending, free };

struct Block {
  size_t size = 0;        // bytes, as the device allocated it
  uintptr_t stream = 0;   // the allocation stream; only requests on it reuse the block
  State state = State::in_use;
  std::vector<uintptr_t> other_streams;  // record_stream()s since allocation; rarely more than one
  size_t events = 0;      // while pending: events not yet done
};

// A free block, ordered so that lower_bound({stream, size, 0}) is the best fit.
struct FreeKey {
  uintptr_t stream;
  size_t size;
  uintptr_t address;  // an integer: <=> on unrelated pointers is unspecified
  auto operator<=>(const FreeKey&) const = default;
};

struct PendingEvent {
  DeviceMemory::Event event;
  void* block;
};

}  // namespace

struct StreamCachingAllocator::Impl {
  DeviceMemory& memory;
  std::string name;
  mutable std::mutex mu;
  std::map<void*, Block> blocks;  // every block held from the device
  std::set<FreeKey> free;         // the blocks in State::free
  // Per stream, the events recorded at frees, oldest first.
  std::map<uintptr_t, std::deque<PendingEvent>> pending;
  StreamAllocatorStats stats;

  Impl(DeviceMemory& m, std::string n) : memory(m), name(std::move(n)) {}

  Block& block(void* p) { return blocks.find(p)->second; }

  // A block in use, or ValueError naming what went wrong.
  Block& in_use(void* p, const char* op) {
    auto it = blocks.find(p);
    if (it == blocks.end() || it->second.state != State::in_use)
      fail<ValueError>("{}: {}({}) of a pointer this allocator does not have in use ({})", name, op, p,
                       it == blocks.end() ? "not allocated here" : "already freed");
    return it->second;
  }

  void make_free(void* p, Block& b) {
    b.state = State::free;
    free.insert({b.stream, b.size, reinterpret_cast<uintptr_t>(p)});
  }

  // The best-fitting free block of `stream` for `size` bytes, or nullptr.
  void* take_cached(size_t size, uintptr_t stream) {
    auto it = free.lower_bound({stream, size, 0});
    // Sizes are even, so size/kMaxWaste > size means more than kMaxWaste times
    // it, without overflowing.
    if (it == free.end() || it->stream != stream || it->size / kMaxWaste > size) return nullptr;
    void* p = reinterpret_cast<void*>(it->address);
    stats.bytes_cached -= it->size;
    free.erase(it);
    block(p).state = State::in_use;
    return p;
  }

  // Moves pending blocks whose events are all done to their free pools.
  void process_events() {
    for (auto it = pending.begin(); it != pending.end();) {
      std::deque<PendingEvent>& queue = it->second;
      // A stream's work completes in queue order: its first event not done
      // ends the scan, so this costs one query per stream when nothing is done.
      while (!queue.empty() && memory.query(queue.front().event)) {
        const PendingEvent done = queue.front();
        queue.pop_front();
        memory.release(done.event);
        Block& b = block(done.block);
        if (--b.events == 0) {
          stats.pending_blocks--;
          make_free(done.block, b);
        }
      }
      it = queue.empty() ? pending.erase(it) : std::next(it);
    }
  }

  // Gives every cached block back. The device must be idle first: stream-
  // ordered reuse hands a block back to the cache while its last user's work
  // may still be queued, and pending blocks finish only once their events do.
  void release_cache() {
    if (free.empty() && pending.empty()) return;
    memory.synchronize();
    process_events();
    while (!free.empty()) {
      const FreeKey k = *free.begin();
      void* p = reinterpret_cast<void*>(k.address);
      memory.free(p);
      free.erase(free.begin());
      blocks.erase(p);
      stats.bytes_cached -= k.size;
      stats.device_frees++;
    }
  }

  // A new block from the device; on failure, retries once without the cache.
  void* malloc_block(size_t size, size_t nbytes, uintptr_t stream) {
    void* p = memory.malloc(size);
    if (p == nullptr) {
      const size_t cached = stats.bytes_cached;
      stats.malloc_retries++;
      release_cache();
      p = memory.malloc(size);
      if (p == nullptr)
        fail<OutOfMemoryError>(
            "{}: out of memory allocating {} bytes (requested {}) on stream {:#x}: {} bytes in use, "
            "{} bytes were cached and have been given back",
            name, size, nbytes, stream, stats.bytes_in_use, cached);
    }
    stats.device_mallocs++;
    Block& b = blocks[p];
    b.size = size;
    b.stream = stream;
    return p;
  }
};

StreamCachingAllocator::StreamCachingAllocator(DeviceMemory& memory, std::string name)
    : impl_(std::make_unique<Impl>(memory, std::move(name))) {}

StreamCachingAllocator::~StreamCachingAllocator() {
  // A destructor must not throw, and one that runs at process exit may find
  // the device runtime already unloaded; the process's memory goes with it.
  try {
    empty_cache();
  } catch (...) {
  }
}

size_t StreamCachingAllocator::round_size(size_t nbytes) {
  // Saturates rather than wraps: no device has that much, so malloc fails and
  // the caller gets OutOfMemoryError naming the request.
  if (nbytes > std::numeric_limits<size_t>::max() - kLargeStep) return std::numeric_limits<size_t>::max();
  if (nbytes < kLargeThreshold) return std::max<size_t>((nbytes + kSmallStep - 1) / kSmallStep, 1) * kSmallStep;
  return (nbytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

void* StreamCachingAllocator::allocate(size_t nbytes, uintptr_t stream) {
  const size_t size = round_size(nbytes);
  std::lock_guard lock(impl_->mu);
  StreamAllocatorStats& s = impl_->stats;
  s.allocations++;
  impl_->process_events();
  void* p = impl_->take_cached(size, stream);
  if (p != nullptr) {
    s.cache_hits++;
  } else {
    p = impl_->malloc_block(size, nbytes, stream);
  }
  s.bytes_in_use += impl_->block(p).size;
  s.peak_bytes_in_use = std::max(s.peak_bytes_in_use, s.bytes_in_use);
  return p;
}

void StreamCachingAllocator::deallocate(void* p) {
  if (p == nullptr) return;
  std::lock_guard lock(impl_->mu);
  Block& b = impl_->in_use(p, "deallocate");
  // Record every event before changing any state, so a failing record leaves
  // the block in use rather than half pending.
  std::vector<DeviceMemory::Event> events;
  events.reserve(b.other_streams.size());
  try {
    for (uintptr_t stream : b.other_streams) events.push_back(impl_->memory.record(stream));
  } catch (...) {
    for (DeviceMemory::Event e : events) impl_->memory.release(e);
    throw;
  }
  impl_->stats.bytes_in_use -= b.size;
  impl_->stats.bytes_cached += b.size;
  if (events.empty()) {
    impl_->make_free(p, b);
    return;
  }
  b.state = State::pending;
  b.events = events.size();
  impl_->stats.pending_blocks++;
  for (size_t i = 0; i < events.size(); ++i) impl_->pending[b.other_streams[i]].push_back({events[i], p});
  b.other_streams.clear();
}

void StreamCachingAllocator::record_stream(void* p, uintptr_t stream) {
  std::lock_guard lock(impl_->mu);
  Block& b = impl_->in_use(p, "record_stream");
  // The allocation stream needs no event: reuse is ordered on it already.
  if (stream == b.stream || std::ranges::find(b.other_streams, stream) != b.other_streams.end()) return;
  b.other_streams.push_back(stream);
}

void StreamCachingAllocator::empty_cache() {
  std::lock_guard lock(impl_->mu);
  impl_->release_cache();
}

void StreamCachingAllocator::reset_peak() {
  std::lock_guard lock(impl_->mu);
  impl_->stats.peak_bytes_in_use = impl_->stats.bytes_in_use;
}

StreamAllocatorStats StreamCachingAllocator::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

}  // namespace braid
