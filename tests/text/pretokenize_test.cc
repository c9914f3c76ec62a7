#include "braid/text/pretokenize.h"

#include <gtest/gtest.h>

#include <random>

#include "braid/text/byte_level.h"
#include "braid/text/unicode.h"

namespace braid::text {
namespace {

std::vector<std::string> pieces(std::string_view s) {
  std::vector<std::string> out;
  for (auto p : pretokenize(s)) out.emplace_back(p);
  return out;
}

using V = std::vector<std::string>;

TEST(Pretokenize, TheGpt2PatternCaseByCase) {
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("I'm we'll they're x'd"), (V{"I", "'m", " we", "'ll", " they", "'re", " x", "'d"}));
  EXPECT_EQ(pieces("DON'T"), (V{"DON", "'", "T"}));  // upper-case contractions are not contractions
  EXPECT_EQ(pieces(" 's"), (V{" '", "s"}));
  EXPECT_EQ(pieces("''s"), (V{"''", "s"}));  // the run of others is greedy
  EXPECT_EQ(pieces("abc123 456!?"), (V{"abc", "123", " 456", "!?"}));
  EXPECT_EQ(pieces("a   b"), (V{"a", "  ", " b"}));     // a run before a word leaves its last space to it
  EXPECT_EQ(pieces("a \n\nb"), (V{"a", " \n", "\n", "b"}));  // ... and a last '\n' stands alone
  EXPECT_EQ(pieces("a  "), (V{"a", "  "}));                // a run at the end is one piece
  EXPECT_EQ(pieces("\n"), (V{"\n"}));
  EXPECT_EQ(pieces("x\ty"), (V{"x", "\t", "y"}));
  EXPECT_EQ(pieces("e\xcc\x81t\xc3\xa9"), (V{"e", "\xcc\x81", "t\xc3\xa9"}));  // a combining mark is "other"
  EXPECT_EQ(pieces("a\xc2\xa0" "b"), (V{"a", "\xc2\xa0", "b"}));                  // NBSP is \s, but not ' '
  EXPECT_EQ(pieces(""), V{});
}

TEST(Pretokenize, Utf8RepairAsPythonReplace) {
  std::string out;
  EXPECT_FALSE(repair_utf8("ok \xe2\x82\xac", &out));
  ASSERT_TRUE(repair_utf8("\xe2\x82!", &out));
  EXPECT_EQ(out, "\xef\xbf\xbd!");  // one U+FFFD for the maximal subpart
  ASSERT_TRUE(repair_utf8("\xf0\x80\x80", &out));
  EXPECT_EQ(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // F0 80: no valid subpart, three of them
  ASSERT_TRUE(repair_utf8("\xed\xa0\x80", &out));           // a surrogate
  EXPECT_EQ(out.size(), 9u);
}

TEST(Pretokenize, ByteLevelTableIsGpt2s) {
  EXPECT_EQ(to_byte_level(" "), "\xc4\xa0");   // 'Ġ'
  EXPECT_EQ(to_byte_level("\n"), "\xc4\x8a");  // 'Ċ'
  EXPECT_EQ(to_byte_level("a!"), "a!");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  ASSERT_TRUE(from_byte_level(to_byte_level(all), &back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(from_byte_level("\xe4\xb8\xad", &back));  // '中' spells no byte
}

// Encoding parts of a document apart is only right if no piece crosses a cut.
TEST(Pretokenize, SafeCutsSplitNoPiece) {
  std::mt19937 rng(7);
  const std::vector<std::string> atoms = {"a", "Z", " ", "  ", "\n", "\t", "1", "'s", "'", "!", "\xc3\xa9",
                                          "\xe4\xb8\xad", "\xc2\xa0", "\xf0\x9f\x98\x80", "\r\n", "x"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) s += atoms[rng() % atoms.size()];
    const auto whole = pieces(s);
    for (size_t cut = 0; cut <= s.size(); ++cut) {
      if (!is_safe_cut(s, cut)) continue;
      auto left = pieces(std::string_view(s).substr(0, cut));
      const auto right = pieces(std::string_view(s).substr(cut));
      left.insert(left.end(), right.begin(), right.end());
      EXPECT_EQ(left, whole) << "cut " << cut << " of '" << s << "'";
    }
  }
}

}  // namespace
}  // namespace braid::text
