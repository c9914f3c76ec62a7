#include "braid/base/abridge.h"

#include <gtest/gtest.h>

#include <string>

namespace braid {
namespace {

TEST(Abridge, ShortTextIsWhole) {
  EXPECT_EQ(abridge("sgd"), "sgd");
  EXPECT_EQ(abridge(std::string(80, 'a')), std::string(80, 'a'));
}

// A 20 MB config value was echoed whole into a 20 MB error line.
TEST(Abridge, LongTextKeepsItsStartAndSaysItsLength) {
  const std::string big(20 << 20, 'x');
  const std::string a = abridge(big);
  EXPECT_EQ(a, std::string(80, 'x') + "... (20971520 bytes)");
  EXPECT_EQ(abridge("abcdef", 3), "abc... (6 bytes)");
}

TEST(Abridge, NeverCutsAUtf8Character) {
  const std::string s = "ab\u00e9\u00e9\u00e9";  // a b then three 2-byte characters
  EXPECT_EQ(abridge(s, 3), "ab... (8 bytes)");
  EXPECT_EQ(abridge(s, 4), "ab\u00e9... (8 bytes)");
}

}  // namespace
}  // namespace braid
