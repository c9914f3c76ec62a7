// braid's BPE trainer against Hugging Face's BpeTrainer on the fixture corpus.
#include <gtest/gtest.h>

#include "braid/base/error.h"
#include "braid/text/bpe_trainer.h"
#include "braid/text/formats.h"
#include "tests/text/fixtures.h"

namespace braid::text {
namespace {

TEST(BpeTrainer, ReproducesHfMergesAndVocabulary) {
  const auto e = test::expected();
  std::string why;
  const auto files = test::corpus(e, &why);
  if (files.empty()) GTEST_SKIP() << why;
  std::vector<std::string_view> texts(files.begin(), files.end());
  const Tokenizer ours = train_bpe(texts, {.vocab_size = e["vocab_size"], .special_tokens = {"<|endoftext|>"}});
  const Tokenizer hf = load_tokenizer_json(test::fixture("tokenizer.json"));
  ASSERT_EQ(ours.merges().size(), hf.merges().size());
  size_t first_difference = ours.merges().size();
  for (size_t i = 0; i < ours.merges().size(); ++i)
    if (ours.merges()[i] != hf.merges()[i]) {
      first_difference = i;
      break;
    }
  EXPECT_EQ(first_difference, ours.merges().size()) << "merges differ from rank " << first_difference;
  EXPECT_EQ(ours.vocab(), hf.vocab());
  EXPECT_EQ(to_tokenizer_json(ours), to_tokenizer_json(hf));
}

TEST(BpeTrainer, TiesGoToTheSmallerPairOfIds) {
  // "ab" and "cd" occur equally often; 'a' < 'c' in id order, so (a, b) merges first.
  const std::string text = "cd ab\nab cd\n";
  std::vector<std::string_view> texts{text};
  const Tokenizer t = train_bpe(texts, {.vocab_size = 256 + 2, .special_tokens = {}});
  ASSERT_EQ(t.merges().size(), 2u);
  // Pairs with count 2: (a,b), (c,d), (Ġ,a), (Ġ,c). By id: '!'..'~' come first, 'Ġ' after 'ÿ'.
  EXPECT_EQ(t.merges()[0], (std::pair<std::string, std::string>{"a", "b"}));
  EXPECT_EQ(t.merges()[1], (std::pair<std::string, std::string>{"c", "d"}));
}

TEST(BpeTrainer, RepeatedLettersCountAsHfCountsThem) {
  const std::string text = "aaaa aaaa aaaa\n";
  std::vector<std::string_view> texts{text};
  const Tokenizer t = train_bpe(texts, {.vocab_size = 256 + 3, .special_tokens = {"<s>"}});
  EXPECT_EQ(t.vocab()[0], "<s>");
  ASSERT_GE(t.merges().size(), 2u);
  EXPECT_EQ(t.merges()[0], (std::pair<std::string, std::string>{"a", "a"}));
  EXPECT_EQ(t.merges()[1], (std::pair<std::string, std::string>{"aa", "aa"}));
  EXPECT_EQ(t.encode("aaaa"), (std::vector<uint32_t>{*t.token_to_id("aaaa")}));
  EXPECT_THROW(train_bpe(texts, {.vocab_size = 100}), ValueError);
}

}  // namespace
}  // namespace braid::text
