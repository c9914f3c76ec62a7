#include <gtest/gtest.h>

#include "braid/tensor/allocator.h"
#include "braid/tensor/tensor.h"

namespace braid {
namespace {

TEST(Allocator, ReusesFreedBlocks) {
  CachingAllocator alloc;
  void* a = alloc.allocate(1000000);
  alloc.deallocate(a, 1000000);
  void* b = alloc.allocate(990000);  // same size class
  EXPECT_EQ(a, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  alloc.deallocate(b, 990000);
  auto s = alloc.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.system_allocations, 1u);
  EXPECT_EQ(s.bytes_in_use, 0u);
  alloc.release_cached();
  EXPECT_EQ(alloc.stats().bytes_cached, 0u);
}

TEST(Allocator, TrainingLoopReachesSteadyState) {
  auto before = CachingAllocator::host().stats();
  for (int step = 0; step < 20; ++step) {
    Tensor a = Tensor::empty({256, 784});
    Tensor b = Tensor::empty({64, 32, 26, 26});
    Tensor c = Tensor::empty({7});
  }
  auto after = CachingAllocator::host().stats();
  EXPECT_LE(after.system_allocations - before.system_allocations, 3u);
  EXPECT_EQ(after.allocations - before.allocations, 60u);
}

TEST(Allocator, PeakFollowsTheMostInUseSinceTheLastReset) {
  CachingAllocator a;
  void* p = a.allocate(1 << 20);
  void* q = a.allocate(1 << 20);
  a.deallocate(q, 1 << 20);
  EXPECT_EQ(a.stats().peak_bytes_in_use, size_t{2} << 20);
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_bytes_in_use, size_t{1} << 20);
  void* r = a.allocate(1 << 19);
  EXPECT_EQ(a.stats().peak_bytes_in_use, (size_t{1} << 20) + (size_t{1} << 19));
  a.deallocate(r, 1 << 19);
  a.deallocate(p, 1 << 20);
}

TEST(Allocator, CategoriesCountRequestedBytesAndTheirJointPeak) {
  CachingAllocator a;
  using C = MemoryCategory;
  void* params = a.allocate(1000, C::parameters);
  void* grads = a.allocate(300, C::gradients);
  a.deallocate(grads, 300, C::gradients);
  void* state = a.allocate(200);  // starts as `other`, then re-labelled
  a.recategorize(200, C::other, C::optimizer_state);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s[C::parameters].in_use, 1000u);
  EXPECT_EQ(s[C::gradients].in_use, 0u);
  EXPECT_EQ(s[C::gradients].peak, 300u);
  EXPECT_EQ(s[C::optimizer_state].in_use, 200u);
  EXPECT_EQ(s[C::other].in_use, 0u);
  EXPECT_EQ(s[C::other].peak, 200u);
  // The gradients were gone before the state came: the joint peak is
  // 1000 + 300, not the sum of the three peaks (1500).
  EXPECT_EQ(s.model_state_peak, 1300u);
  a.reset_peak();
  EXPECT_EQ(a.stats().model_state_peak, 1200u);
  EXPECT_EQ(a.stats()[C::gradients].peak, 0u);
  a.deallocate(params, 1000, C::parameters);
  a.deallocate(state, 200, C::optimizer_state);
}

TEST(Allocator, RoundSizeWithinQuarter) {
  for (size_t n : {1ul, 64ul, 65ul, 4097ul, 1000000ul, 123456789ul}) {
    size_t r = CachingAllocator::round_size(n);
    EXPECT_GE(r, n);
    EXPECT_LE(r, std::max<size_t>(n + n / 4 + 64, 64));
  }
}

TEST(Tensor, CreationAndItem) {
  Tensor t = Tensor::full({2, 3}, 2.5);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_TRUE(t.is_contiguous());
  for (float v : t.to_vector<float>()) EXPECT_EQ(v, 2.5f);
  EXPECT_EQ(Tensor::scalar(4.0).item(), 4.0);
  EXPECT_THROW(t.item(), ValueError);
  EXPECT_THROW(Tensor::empty({2, -1}), ValueError);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::arange(12).as_strided({3, 4}, {4, 1}, 0);
  Tensor tr = t.as_strided({4, 3}, {1, 4}, 0);  // transpose
  EXPECT_FALSE(tr.is_contiguous());
  Tensor c = tr.contiguous();
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  tr.fill(0);
  EXPECT_EQ(t.to_vector<float>()[5], 0.0f);  // the view wrote through
  Tensor row = t.as_strided({4}, {1}, 8);
  row.copy_from(Tensor::from_vector<float>({1, 2, 3, 4}, {4}));
  EXPECT_EQ(t.to_vector<float>()[11], 4.0f);
  EXPECT_THROW(t.as_strided({4}, {1}, 10), IndexError);
}

TEST(Tensor, CopyBetweenOverlappingViewsMovesLikeMemmove) {
  // Large enough for the non-overlapping path's vector copy, and views of one
  // storage 4 bytes apart: the copy must read every source element before
  // overwriting it, in either direction.
  const int64_t n = 5000;
  Tensor t = Tensor::arange(n + 1);
  t.as_strided({n}, {1}, 1).copy_from(t.as_strided({n}, {1}, 0));  // shift up
  std::vector<float> v = t.to_vector<float>();
  EXPECT_EQ(v[0], 0.0f);
  for (int64_t i = 1; i <= n; ++i) ASSERT_EQ(v[i], static_cast<float>(i - 1)) << i;
  t.as_strided({n}, {1}, 0).copy_from(t.as_strided({n}, {1}, 1));  // and back down
  v = t.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], static_cast<float>(i)) << i;
  // Disjoint views 4 bytes apart modulo 4 KiB take copy_bytes's backward path.
  Tensor big = Tensor::arange(2 * 4096);
  big.as_strided({4000}, {1}, 4097).copy_from(big.as_strided({4000}, {1}, 0));
  v = big.to_vector<float>();
  for (int64_t i = 0; i < 4000; ++i) ASSERT_EQ(v[4097 + i], static_cast<float>(i)) << i;
}

TEST(Tensor, LongRowsAreSplitAcrossThreadsCorrectly) {
  // 3 rows of 100003 elements, each a strided row of a wider buffer: fewer
  // rows than threads, so strided_loop splits inside the rows.
  Tensor wide = Tensor::zeros({3, 100010});
  Tensor rows = wide.as_strided({3, 100003}, {100010, 1}, 2);
  rows.fill(1.5);
  std::vector<float> v = wide.to_vector<float>();
  double sum = 0;
  for (float x : v) sum += x;
  EXPECT_EQ(sum, 1.5 * 3 * 100003);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[2], 1.5f);
  EXPECT_EQ(v[100004], 1.5f);
  EXPECT_EQ(v[100005], 0.0f);
  Tensor big = Tensor::arange(300001, DType::f64);
  EXPECT_EQ(big.to(DType::f32).to(DType::i64).to_vector<int64_t>()[300000], 300000);
}

TEST(Tensor, DtypeConversions) {
  Tensor t = Tensor::from_vector<float>({-1.5f, 0.0f, 2.25f, 3.0f}, {4});
  EXPECT_EQ(t.to(DType::f16).to_vector<float>(), (std::vector<float>{-1.5f, 0.0f, 2.25f, 3.0f}));
  EXPECT_EQ(t.to(DType::bf16).to_vector<float>(), (std::vector<float>{-1.5f, 0.0f, 2.25f, 3.0f}));
  EXPECT_EQ(t.to(DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 2, 3}));
  EXPECT_EQ(t.to(DType::b8).to_vector<bool>(), (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(t.to(DType::f64).to_vector<double>()[2], 2.25);
  EXPECT_THROW(t.data<double>(), ValueError);
}

TEST(Tensor, GradMetaSharedByCopies) {
  Tensor a = Tensor::zeros({2});
  Tensor b = a;
  a.set_requires_grad();
  EXPECT_TRUE(b.requires_grad());
  EXPECT_FALSE(a.detach().requires_grad());
  EXPECT_THROW(Tensor::zeros({2}, DType::i64).set_requires_grad(), ValueError);
  EXPECT_THROW(a.set_grad(Tensor::zeros({3})), ValueError);
}

}  // namespace
}  // namespace braid
