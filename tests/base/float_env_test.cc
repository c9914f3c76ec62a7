// Subnormal floats flushed to zero on the calling thread, on the intra-op
// pool's threads and on threads started afterwards; and back.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "braid/base/float_env.h"
#include "braid/base/thread_pool.h"

namespace braid {
namespace {

// A product whose exact value is subnormal (1e-38 * 1e-3 = 1e-41), computed
// at run time (volatile: not folded by the compiler).
float tiny_product() {
  volatile float a = 1e-38f, b = 1e-3f;
  return a * b;
}

// The product on every thread of a two-thread parallel_for, one per chunk.
std::vector<float> on_pool() {
  std::vector<float> out(2, -1.0f);
  parallel_for(0, 2, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[static_cast<size_t>(i)] = tiny_product();
  });
  return out;
}

TEST(FloatEnv, FlushesOnThisThreadThePoolAndLaterThreads) {
  if (!can_flush_denormals()) GTEST_SKIP() << "no flush-to-zero bits on this CPU";
  set_num_threads(2);
  set_flush_denormals(false);
  EXPECT_FALSE(flushing_denormals());
  EXPECT_EQ(std::fpclassify(tiny_product()), FP_SUBNORMAL);
  for (float v : on_pool()) EXPECT_EQ(std::fpclassify(v), FP_SUBNORMAL);

  set_flush_denormals(true);
  EXPECT_TRUE(flushing_denormals());
  EXPECT_EQ(tiny_product(), 0.0f);
  for (float v : on_pool()) EXPECT_EQ(v, 0.0f);
  std::atomic<bool> later{false};
  std::thread([&] { later = flushing_denormals() && tiny_product() == 0.0f; }).join();
  EXPECT_TRUE(later);

  set_flush_denormals(false);
  EXPECT_EQ(std::fpclassify(tiny_product()), FP_SUBNORMAL);
  for (float v : on_pool()) EXPECT_EQ(std::fpclassify(v), FP_SUBNORMAL);
}

}  // namespace
}  // namespace braid
