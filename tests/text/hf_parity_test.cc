// braid's tokenizer against Hugging Face `tokenizers`: the ids it gave for a
// corpus and adversarial strings (fixtures/expected.json, make_fixtures.py).
#include <gtest/gtest.h>

#include "braid/text/bpe.h"
#include "braid/text/formats.h"
#include "braid/text/unicode.h"
#include "tests/testing/temp_dir.h"
#include "tests/text/fixtures.h"

namespace braid::text {
namespace {

TEST(HfParity, BothLayoutsLoadTheSameModel) {
  const Tokenizer a = load_tokenizer_json(test::fixture("tokenizer.json"));
  const Tokenizer b = load_vocab_merges(test::fixture("vocab.json"), test::fixture("merges.txt"));
  EXPECT_EQ(a.vocab(), b.vocab());
  EXPECT_EQ(a.merges(), b.merges());
  EXPECT_EQ(a.vocab_size(), 1000u);
  ASSERT_EQ(a.added_tokens().size(), 1u);
  EXPECT_EQ(a.added_tokens()[0].content, "<|endoftext|>");
  EXPECT_EQ(b.added_tokens().size(), 0u);  // merges.txt and vocab.json carry none
}

TEST(HfParity, AdversarialStringsGiveHfIds) {
  const Tokenizer t = load_tokenizer(test::fixture(""));
  const auto e = test::expected();
  int n = 0;
  for (const auto& c : e["cases"]) {
    const std::string text = test::from_hex(c["hex"]);
    const auto want = c["ids"].get<std::vector<uint32_t>>();
    EXPECT_EQ(t.encode(text), want) << "text (hex) " << c["hex"].get<std::string>();
    // Decoding gives the text back, ill-formed bytes as U+FFFD.
    std::string valid = text;
    repair_utf8(text, &valid);
    EXPECT_EQ(t.decode(want), valid);
    ++n;
  }
  EXPECT_GE(n, 30);
}

TEST(HfParity, PrefixSpaceAndIgnoreMergesAsHf) {
  const Tokenizer base = load_tokenizer_json(test::fixture("tokenizer.json"));
  const auto e = test::expected();
  const std::vector<std::pair<std::string, TokenizerOptions>> variants = {
      {"add_prefix_space", {.add_prefix_space = true}}, {"ignore_merges", {.ignore_merges = true}}};
  for (const auto& [name, options] : variants) {
    const Tokenizer t(base.vocab(), base.merges(), base.added_tokens(), options);
    const auto& want = e["variants"][name];
    ASSERT_GE(want.size(), 20u);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(t.encode(test::from_hex(e["cases"][i]["hex"])), want[i].get<std::vector<uint32_t>>())
          << name << ", text (hex) " << e["cases"][i]["hex"].get<std::string>();
  }
}

TEST(HfParity, CorpusGivesHfIdsOnOneAndTwoThreads) {
  const auto e = test::expected();
  std::string why;
  const auto files = test::corpus(e, &why);
  if (files.empty()) GTEST_SKIP() << why;
  const Tokenizer t = load_tokenizer_json(test::fixture("tokenizer.json"));
  for (size_t f = 0; f < files.size(); ++f) {
    const auto& c = e["corpus"][f];
    for (const int threads : {1, 2}) {
      const auto ids = t.encode(files[f], {.threads = threads});
      ASSERT_EQ(ids.size(), c["count"].get<size_t>()) << c["path"] << " threads " << threads;
      const auto head = c["head"].get<std::vector<uint32_t>>();
      EXPECT_EQ(std::vector<uint32_t>(ids.begin(), ids.begin() + static_cast<long>(head.size())), head);
      EXPECT_EQ(test::fnv1a64(ids), c["fnv1a64"].get<std::string>()) << c["path"] << " threads " << threads;
      if (threads == 1) {
        EXPECT_EQ(t.decode(ids), files[f]);
      }
    }
  }
  // Many documents at once: each as alone.
  std::vector<std::string_view> docs(files.begin(), files.end());
  const auto batch = t.encode_batch(docs);
  for (size_t f = 0; f < files.size(); ++f)
    EXPECT_EQ(test::fnv1a64(batch[f]), e["corpus"][f]["fnv1a64"].get<std::string>());
}

TEST(HfParity, SavedTokenizerLoadsBackIdentical) {
  const Tokenizer t = load_tokenizer_json(test::fixture("tokenizer.json"));
  EXPECT_EQ(to_vocab_json(t), test::slurp(test::fixture("vocab.json")));  // byte for byte as HF writes it
  EXPECT_EQ(to_merges_txt(t), test::slurp(test::fixture("merges.txt")));
  test::TempDir dir;
  save_tokenizer(t, dir.str());
  const Tokenizer u = load_tokenizer(dir.str());
  EXPECT_EQ(u.vocab(), t.vocab());
  EXPECT_EQ(u.merges(), t.merges());
  const std::string s = "The quick brown fox's <|endoftext|> 123 \xf0\x9f\x98\x80";
  EXPECT_EQ(u.encode(s), t.encode(s));
}

}  // namespace
}  // namespace braid::text
