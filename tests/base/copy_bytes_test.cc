#include "braid/base/copy_bytes.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace braid {
namespace {

// Every gap class (0, 1-63 after, 64+, before) and sizes around the piece size.
TEST(CopyBytes, CopiesLikeMemcpyWhateverTheGap) {
  std::vector<std::byte> src(3 * 4096 + 8192), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 131 + 7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{4096}, size_t{10000}}) {
    for (size_t gap : {size_t{0}, size_t{1}, size_t{16}, size_t{63}, size_t{64}, size_t{200}, size_t{4095}}) {
      std::fill(dst.begin(), dst.end(), std::byte{0});
      // Place dst so (dst - src) mod 4096 == gap.
      const auto s = reinterpret_cast<uintptr_t>(src.data()) + 100;
      auto d0 = reinterpret_cast<uintptr_t>(dst.data()) + 4096;
      d0 += (s + gap - d0) & 4095;
      ASSERT_EQ((d0 - s) & 4095, gap);
      copy_bytes(reinterpret_cast<void*>(d0), reinterpret_cast<const void*>(s), n);
      const auto* d = reinterpret_cast<const std::byte*>(d0);
      const auto* from = reinterpret_cast<const std::byte*>(s);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(d[i], from[i]) << "n=" << n << " gap=" << gap << " at " << i;
      }
      if (d0 + n < reinterpret_cast<uintptr_t>(dst.data() + dst.size())) {
        EXPECT_EQ(d[n], std::byte{0});
      }
    }
  }
}

}  // namespace
}  // namespace braid
