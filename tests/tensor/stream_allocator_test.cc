#include "braid/tensor/stream_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "braid/base/error.h"

namespace braid {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr uintptr_t kS1 = 0x10, kS2 = 0x20, kS3 = 0x30;

// Host memory with a byte budget (malloc returns nullptr past it) and streams
// whose work the test completes: record() marks a point in a stream's queue,
// complete(stream) finishes everything queued on it so far.
class FakeDevice final : public DeviceMemory {
 public:
  explicit FakeDevice(size_t budget = size_t{1} << 40) : budget_(budget) {}
  ~FakeDevice() override {
    for (auto& [p, n] : live_) std::free(p);
  }

  void* malloc(size_t nbytes) override {
    std::lock_guard lock(mu_);
    if (nbytes > budget_ - used_) return nullptr;
    void* p = std::malloc(nbytes);
    used_ += nbytes;
    live_[p] = nbytes;
    return p;
  }
  void free(void* p) override {
    std::lock_guard lock(mu_);
    // The allocator promises the device is idle: no stream has work queued.
    for (auto& [stream, n] : queued_) EXPECT_EQ(done_[stream], n) << "free with work queued on " << stream;
    auto it = live_.find(p);
    ASSERT_NE(it, live_.end());
    used_ -= it->second;
    std::free(p);
    live_.erase(it);
  }
  Event record(uintptr_t stream) override {
    std::lock_guard lock(mu_);
    const uintptr_t id = ++next_event_;
    events_[id] = {stream, ++queued_[stream]};
    return reinterpret_cast<Event>(id);
  }
  bool query(Event e) override {
    std::lock_guard lock(mu_);
    const auto [stream, seq] = events_.at(reinterpret_cast<uintptr_t>(e));
    return done_[stream] >= seq;
  }
  void release(Event e) override {
    std::lock_guard lock(mu_);
    EXPECT_EQ(events_.erase(reinterpret_cast<uintptr_t>(e)), 1u);
  }
  void synchronize() override {
    std::lock_guard lock(mu_);
    synchronizes_++;
    for (auto& [stream, n] : queued_) done_[stream] = n;
  }

  void complete(uintptr_t stream) {
    std::lock_guard lock(mu_);
    done_[stream] = queued_[stream];
  }
  size_t used() { std::lock_guard lock(mu_); return used_; }
  size_t live_events() { std::lock_guard lock(mu_); return events_.size(); }
  size_t recorded() { std::lock_guard lock(mu_); return next_event_; }
  int synchronizes() { std::lock_guard lock(mu_); return synchronizes_; }

 private:
  std::mutex mu_;
  size_t budget_;                  // bytes
  size_t used_ = 0;                // bytes
  std::map<void*, size_t> live_;   // block -> bytes
  uintptr_t next_event_ = 0;
  std::map<uintptr_t, std::pair<uintptr_t, uint64_t>> events_;  // id -> (stream, position in its queue)
  std::map<uintptr_t, uint64_t> queued_, done_;  // per stream: events recorded, events done
  int synchronizes_ = 0;
};

TEST(StreamCachingAllocator, RoundsSmallTo512AndLargeTo2MiB) {
  using A = StreamCachingAllocator;
  EXPECT_EQ(A::round_size(0), 512u);
  EXPECT_EQ(A::round_size(1), 512u);
  EXPECT_EQ(A::round_size(512), 512u);
  EXPECT_EQ(A::round_size(513), 1024u);
  EXPECT_EQ(A::round_size(kMiB - 1), kMiB);
  EXPECT_EQ(A::round_size(kMiB), 2 * kMiB);
  EXPECT_EQ(A::round_size(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(A::round_size(2 * kMiB + 1), 4 * kMiB);
  EXPECT_EQ(A::round_size(SIZE_MAX), SIZE_MAX);  // saturates, never wraps to a small size
}

TEST(StreamCachingAllocator, ReusesABlockOnTheSameStream) {
  FakeDevice dev;
  StreamCachingAllocator a(dev, "fake:0");
  void* p = a.allocate(1000, kS1);
  a.deallocate(p);
  EXPECT_EQ(a.allocate(900, kS1), p);  // both round to 1024
  const StreamAllocatorStats s = a.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.device_mallocs, 1u);
  EXPECT_EQ(dev.recorded(), 0u);  // same-stream reuse needs no event
  a.deallocate(p);
}

TEST(StreamCachingAllocator, DoesNotReuseAcrossStreams) {
  FakeDevice dev;
  StreamCachingAllocator a(dev, "fake:0");
  void* p = a.allocate(1000, kS1);
  a.deallocate(p);
  void* q = a.allocate(1000, kS2);
  EXPECT_NE(q, p);
  EXPECT_EQ(a.stats().device_mallocs, 2u);
  EXPECT_EQ(a.allocate(1000, kS1), p);  // still cached for its own stream
  a.deallocate(p);
  a.deallocate(q);
}

TEST(StreamCachingAllocator, BestFitWithinTwiceTheRequest) {
  FakeDevice dev;
  StreamCachingAllocator a(dev, "fake:0");
  void* small = a.allocate(1024, kS1);
  void* mid = a.allocate(2048, kS1);
  void* big = a.allocate(8 * kMiB, kS1);
  void* large = a.allocate(2 * kMiB, kS1);
  for (void* p : {small, mid, big, large}) a.deallocate(p);
  EXPECT_EQ(a.allocate(1000, kS1), small);   // 1024: the smallest that fits
  EXPECT_EQ(a.allocate(1500, kS1), mid);     // 1536 -> the 2048 block
  void* fresh = a.allocate(3 * kMiB, kS1);   // 4 MiB: the 8 MiB block is within 2x of it...
  EXPECT_EQ(fresh, big);
  void* other = a.allocate(kMiB - 512, kS1);  // ...but the 2 MiB block is not within 2x of this
  EXPECT_NE(other, large);
  EXPECT_EQ(a.stats().device_mallocs, 5u);
  for (void* p : {small, mid, big, other}) a.deallocate(p);
}

TEST(StreamCachingAllocator, RecordedStreamKeepsABlockPendingUntilItsWorkIsDone) {
  FakeDevice dev;
  StreamCachingAllocator a(dev, "fake:0");
  void* p = a.allocate(4096, kS1);
  a.record_stream(p, kS2);
  a.record_stream(p, kS2);  // once per stream
  a.record_stream(p, kS1);  // the allocation stream needs no event
  a.deallocate(p);
  EXPECT_EQ(dev.recorded(), 1u);
  EXPECT_EQ(a.stats().pending_blocks, 1u);
  EXPECT_EQ(a.stats().bytes_cached, 4096u);

  void* q = a.allocate(4096, kS1);  // S2 may still read p
  EXPECT_NE(q, p);
  dev.complete(kS2);
  EXPECT_EQ(a.allocate(4096, kS1), p);
  EXPECT_EQ(a.stats().pending_blocks, 0u);
  EXPECT_EQ(dev.live_events(), 0u);
  a.deallocate(p);
  a.deallocate(q);
}

TEST(StreamCachingAllocator, BlockWaitsForEveryRecordedStream) {
  FakeDevice dev;
  StreamCachingAllocator a(dev, "fake:0");
  void* p = a.allocate(2 * kMiB, kS1);
  a.record_stream(p, kS2);
  a.record_stream(p, kS3);
  a.deallocate(p);
  dev.complete(kS2);
  void* q = a.allocate(2 * kMiB, kS1);
  EXPECT_NE(q, p);  // S3's work is still queued
  dev.complete(kS3);
  void* r = a.allocate(2 * kMiB, kS1);
  EXPECT_EQ(r, p);
  EXPECT_EQ(a.stats().pending_blocks, 0u);
  // Freed again with no recorded stream: straight back to S1's pool.
  a.deallocate(r);
  EXPECT_EQ(a.stats().pending_blocks, 0u);
  EXPECT_EQ(a.allocate(2 * kMiB, kS1), r);
  a.deallocate(r);
  a.deallocate(q);
}

TEST(StreamCachingAllocator, OutOfMemoryEmptiesTheCacheAndRetries) {
  FakeDevice dev(8 * kMiB);
  StreamCachingAllocator a(dev, "fake:0");
  void* p = a.allocate(2 * kMiB, kS1);
  void* q = a.allocate(2 * kMiB, kS2);
  void* r = a.allocate(2 * kMiB, kS1);
  a.record_stream(r, kS3);  // pending, its work never completed by the test
  for (void* x : {p, q, r}) a.deallocate(x);
  void* big = a.allocate(6 * kMiB, kS1);  // fits only once all three are given back
  ASSERT_NE(big, nullptr);
  const StreamAllocatorStats s = a.stats();
  EXPECT_EQ(s.malloc_retries, 1u);
  EXPECT_EQ(s.device_frees, 3u);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.pending_blocks, 0u);
  EXPECT_EQ(s.bytes_in_use, 6 * kMiB);
  EXPECT_GE(dev.synchronizes(), 1);
  EXPECT_EQ(dev.live_events(), 0u);
  a.deallocate(big);
}

TEST(StreamCachingAllocator, UnsatisfiableRequestThrowsNamingTheSizes) {
  FakeDevice dev(6 * kMiB);
  StreamCachingAllocator a(dev, "cuda:3");
  void* p = a.allocate(4 * kMiB, kS1);
  a.deallocate(a.allocate(2 * kMiB, kS2));  // 2 MiB cached
  try {
    a.allocate(3 * kMiB, kS1);  // 4 MiB, with only 2 MiB left without the cache
    FAIL() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda:3"), std::string::npos) << what;
    EXPECT_NE(what.find("allocating 4194304 bytes (requested 3145728)"), std::string::npos) << what;
    EXPECT_NE(what.find("4194304 bytes in use"), std::string::npos) << what;
    EXPECT_NE(what.find("2097152 bytes were cached"), std::string::npos) << what;
  }
  EXPECT_THROW(a.allocate(SIZE_MAX, kS1), Error);  // a braid::Error callers can catch
  // Still usable afterwards.
  EXPECT_EQ(a.stats().bytes_in_use, 4 * kMiB);
  a.deallocate(p);
  EXPECT_EQ(a.allocate(2 * kMiB, kS1), p);  // within 2x of the 4 MiB block
  a.deallocate(p);
}

TEST(StreamCachingAllocator, StatsCountBlockBytesAndThePeak) {
  FakeDevice dev;
  StreamCachingAllocator a(dev, "fake:0");
  void* p = a.allocate(100, kS1);      // 512
  void* q = a.allocate(kMiB, kS1);     // 2 MiB
  StreamAllocatorStats s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 512 + 2 * kMiB);
  EXPECT_EQ(s.peak_bytes_in_use, 512 + 2 * kMiB);
  a.deallocate(q);
  s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 512u);
  EXPECT_EQ(s.bytes_cached, 2 * kMiB);
  EXPECT_EQ(s.peak_bytes_in_use, 512 + 2 * kMiB);
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_bytes_in_use, 512u);
  void* r = a.allocate(kMiB + 1, kS1);  // 2 MiB: from the cache
  s = a.stats();
  EXPECT_EQ(s.peak_bytes_in_use, 512 + 2 * kMiB);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.allocations, 3u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.device_mallocs, 2u);
  EXPECT_EQ(s.device_frees, 0u);
  EXPECT_EQ(dev.used(), 512 + 2 * kMiB);
  a.deallocate(p);
  a.deallocate(r);
}

TEST(StreamCachingAllocator, EmptyCacheGivesBackFreeAndPendingBlocksOnly) {
  FakeDevice dev;
  StreamCachingAllocator a(dev, "fake:0");
  void* kept = a.allocate(1000, kS1);
  void* p = a.allocate(1000, kS1);
  void* q = a.allocate(4 * kMiB, kS2);
  a.record_stream(q, kS1);
  a.deallocate(p);
  a.deallocate(q);
  EXPECT_EQ(a.stats().pending_blocks, 1u);
  a.empty_cache();
  const StreamAllocatorStats s = a.stats();
  EXPECT_EQ(s.device_frees, 2u);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.pending_blocks, 0u);
  EXPECT_EQ(s.bytes_in_use, 1024u);
  EXPECT_EQ(dev.used(), 1024u);
  EXPECT_EQ(dev.live_events(), 0u);
  a.deallocate(kept);
  const int syncs = dev.synchronizes();
  a.empty_cache();
  a.empty_cache();  // nothing cached: no device wait
  EXPECT_EQ(dev.synchronizes(), syncs + 1);
  EXPECT_EQ(dev.used(), 0u);
}

TEST(StreamCachingAllocator, DestructorGivesTheCacheBack) {
  FakeDevice dev;
  {
    StreamCachingAllocator a(dev, "fake:0");
    void* p = a.allocate(3 * kMiB, kS1);
    a.record_stream(p, kS2);
    a.deallocate(p);
    a.deallocate(a.allocate(10, kS3));
  }
  EXPECT_EQ(dev.used(), 0u);
  EXPECT_EQ(dev.live_events(), 0u);
}

TEST(StreamCachingAllocator, RejectsPointersItDoesNotHaveInUse) {
  FakeDevice dev;
  StreamCachingAllocator a(dev, "cuda:1");
  int local = 0;
  try {
    a.deallocate(&local);
    FAIL() << "no ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:1: deallocate("), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not allocated here"), std::string::npos) << e.what();
  }
  void* p = a.allocate(64, kS1);
  a.deallocate(p);
  try {
    a.deallocate(p);
    FAIL() << "no ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("already freed"), std::string::npos) << e.what();
  }
  EXPECT_THROW(a.record_stream(p, kS2), ValueError);
  EXPECT_THROW(a.record_stream(&local, kS2), ValueError);
  a.deallocate(nullptr);  // like free(nullptr)
  EXPECT_EQ(a.stats().bytes_cached, 512u);
}

// Threads allocate, share blocks with other streams and free them, while
// others complete streams' work. Each thread marks its blocks with its own
// byte and checks the marks before freeing: a block handed out twice would show.
TEST(StreamCachingAllocator, ManyThreadsAllocateAndFreeConcurrently) {
  FakeDevice dev;
  StreamCachingAllocator a(dev, "fake:0");
  constexpr int kThreads = 8, kSteps = 3000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      const uintptr_t own = 0x100 + static_cast<uintptr_t>(t % 4);  // two threads per stream
      std::vector<std::pair<unsigned char*, size_t>> held;
      for (int i = 0; i < kSteps; ++i) {
        if (held.size() < 8 && rng() % 2 == 0) {
          const size_t n = rng() % 4 == 0 ? (1 + rng() % 3) * kMiB : 1 + rng() % 20000;
          auto* p = static_cast<unsigned char*>(a.allocate(n, own));
          p[0] = p[n / 2] = p[n - 1] = static_cast<unsigned char>(t + 1);
          if (rng() % 4 == 0) a.record_stream(p, 0x200 + rng() % 3);
          held.emplace_back(p, n);
        } else if (!held.empty()) {
          auto [p, n] = held.back();
          held.pop_back();
          EXPECT_TRUE(p[0] == t + 1 && p[n / 2] == t + 1 && p[n - 1] == t + 1) << "block shared between threads";
          a.deallocate(p);
        }
        if (rng() % 16 == 0) dev.complete(0x200 + rng() % 3);
        if (rng() % 500 == 0) a.empty_cache();
      }
      for (auto [p, n] : held) a.deallocate(p);
    });
  }
  for (std::thread& th : threads) th.join();
  StreamAllocatorStats s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_GT(s.cache_hits, 0u);
  EXPECT_EQ(s.bytes_cached, dev.used());  // nothing in use: all the device holds is cache
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.device_mallocs, s.device_frees);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.pending_blocks, 0u);
  EXPECT_EQ(dev.used(), 0u);
  EXPECT_EQ(dev.live_events(), 0u);
}

}  // namespace
}  // namespace braid
