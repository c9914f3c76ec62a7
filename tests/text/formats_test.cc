// What the tokenizer files refuse, and how they say it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "braid/base/error.h"
#include "braid/text/formats.h"
#include "tests/testing/error_message.h"
#include "tests/testing/temp_dir.h"
#include "tests/text/fixtures.h"

namespace braid::text {
namespace {

std::string written(const test::TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name), std::ios::binary) << text;
  return dir.file(name);
}

TEST(TokenizerFiles, UnsupportedPartsAreRefusedByName) {
  const auto base = nlohmann::json::parse(test::slurp(test::fixture("tokenizer.json")));
  test::TempDir dir;
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& part) {
    auto j = base;
    edit(j);
    const std::string path = written(dir, "t.json", j.dump());
    const std::string m = test::message_of<ValueError>([&] { load_tokenizer(path); });
    EXPECT_NE(m.find(part), std::string::npos) << m;
    EXPECT_NE(m.find(path), std::string::npos) << m;
  };
  refused([](auto& j) { j["normalizer"] = {{"type", "NFKC"}}; }, "NFKC");
  refused([](auto& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }, "Metaspace");
  refused([](auto& j) { j["model"]["type"] = "WordPiece"; }, "WordPiece");
  refused([](auto& j) { j["model"]["dropout"] = 0.1; }, "dropout");
  refused([](auto& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback");
  refused([](auto& j) { j["decoder"] = {{"type", "WordPiece"}}; }, "decoder");
  refused([](auto& j) { j["added_tokens"][0]["lstrip"] = true; }, "lstrip");
}

TEST(TokenizerFiles, MalformedFilesNameTheFileAndLine) {
  test::TempDir dir;
  const std::string vocab = written(dir, "vocab.json", R"({"a": 0, "b": 1, "ab": 2})");
  EXPECT_EQ(load_vocab_merges(vocab, written(dir, "m1.txt", "#version: 0.2\na b\n")).merges().size(), 1u);
  const std::string bad = written(dir, "m2.txt", "#version: 0.2\na b\nab\n");
  std::string m = test::message_of<IoError>([&] { load_vocab_merges(vocab, bad); });
  EXPECT_NE(m.find(bad + " line 3"), std::string::npos) << m;
  const std::string unknown = written(dir, "m3.txt", "a c\n");
  m = test::message_of<ValueError>([&] { load_vocab_merges(vocab, unknown); });
  EXPECT_NE(m.find("'c' is not in the vocabulary"), std::string::npos) << m;
  m = test::message_of<IoError>([&] { load_tokenizer(written(dir, "x.json", "{not json")); });
  EXPECT_NE(m.find("x.json is not JSON"), std::string::npos) << m;
  m = test::message_of<IoError>([&] { load_tokenizer(dir.file("nothing")); });
  EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
  const std::string twice = written(dir, "v2.json", R"({"a": 0, "b": 0})");
  m = test::message_of<IoError>([&] { load_vocab_merges(twice, unknown); });
  EXPECT_NE(m.find("id 0 is given to"), std::string::npos) << m;
}

}  // namespace
}  // namespace braid::text
