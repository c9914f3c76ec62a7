#include "braid/text/formats.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "braid/base/atomic_file.h"
#include "braid/base/error.h"

namespace braid::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("tokenizer: cannot read {}", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json parse_json(const std::string& path) {
  try {
    return json::parse(read_text(path));
  } catch (const json::exception& e) {
    fail<IoError>("tokenizer: {} is not JSON: {}", path, e.what());
  }
}

std::vector<std::string> vocab_from_json(const json& v, const std::string& path) {
  if (!v.is_object()) fail<IoError>("tokenizer: {}: the vocabulary is not a JSON object of token: id", path);
  std::vector<std::string> vocab;
  for (const auto& [token, id] : v.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= (uint64_t{1} << 31))
      fail<IoError>("tokenizer: {}: token '{}' has id {}, not an id", path, token, id.dump());
    const auto i = id.get<size_t>();
    if (i >= vocab.size()) vocab.resize(i + 1);
    if (!vocab[i].empty()) fail<IoError>("tokenizer: {}: id {} is given to '{}' and '{}'", path, i, vocab[i], token);
    vocab[i] = token;
  }
  return vocab;
}

std::pair<std::string, std::string> split_merge(const std::string& line, const std::string& path, size_t number) {
  const size_t sp = line.find(' ');
  if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
    fail<IoError>("tokenizer: {} line {}: '{}' is not 'left right'", path, number, line);
  return {line.substr(0, sp), line.substr(sp + 1)};
}

void refuse_unless(bool ok, const std::string& path, const std::string& what) {
  if (!ok) fail<ValueError>("tokenizer: {}: {} (braid reads byte-level BPE tokenizers only)", path, what);
}

bool null_or_empty(const json& j, const char* key) {
  return !j.contains(key) || j[key].is_null() || (j[key].is_string() && j[key].get<std::string>().empty());
}

std::string type_of(const json& j) { return j.is_object() && j.contains("type") ? j["type"].dump() : j.dump(); }

}  // namespace

Tokenizer load_vocab_merges(const std::string& vocab_json, const std::string& merges_txt) {
  auto vocab = vocab_from_json(parse_json(vocab_json), vocab_json);
  std::vector<std::pair<std::string, std::string>> merges;
  std::istringstream in(read_text(merges_txt));
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("#version", 0) == 0) continue;
    if (line.empty() && in.peek() == EOF) break;
    merges.push_back(split_merge(line, merges_txt, number));
  }
  try {
    return Tokenizer(std::move(vocab), std::move(merges));
  } catch (const ValueError& e) {
    fail<ValueError>("tokenizer: {} and {}: {}", vocab_json, merges_txt, e.what());
  }
}

Tokenizer load_tokenizer_json(const std::string& path) {
  const json j = parse_json(path);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    fail<IoError>("tokenizer: {} has no \"model\" object", path);
  const json& m = j["model"];
  refuse_unless(m.value("type", std::string("BPE")) == "BPE", path, "model type " + type_of(m) + " is not BPE");
  refuse_unless(!m.contains("dropout") || m["dropout"].is_null(), path, "BPE dropout is set");
  refuse_unless(null_or_empty(m, "continuing_subword_prefix"), path, "continuing_subword_prefix is set");
  refuse_unless(null_or_empty(m, "end_of_word_suffix"), path, "end_of_word_suffix is set");
  refuse_unless(!m.value("byte_fallback", false), path, "byte_fallback is set");
  refuse_unless(!j.contains("normalizer") || j["normalizer"].is_null(), path,
                "normalizer " + type_of(j.value("normalizer", json())) + " is set");
  TokenizerOptions options;
  options.ignore_merges = m.value("ignore_merges", false);
  const json pre = j.value("pre_tokenizer", json());
  refuse_unless(pre.is_object() && pre.value("type", "") == "ByteLevel", path,
                "pre_tokenizer " + type_of(pre) + " is not ByteLevel");
  refuse_unless(pre.value("use_regex", true), path, "the ByteLevel pre_tokenizer has use_regex false");
  options.add_prefix_space = pre.value("add_prefix_space", false);
  for (const char* part : {"decoder", "post_processor"}) {
    const json p = j.value(part, json());
    refuse_unless(p.is_null() || (p.is_object() && p.value("type", "") == "ByteLevel"), path,
                  std::string(part) + " " + type_of(p) + " is not ByteLevel");
  }

  if (!m.contains("vocab")) fail<IoError>("tokenizer: {}: model has no vocab", path);
  auto vocab = vocab_from_json(m["vocab"], path);
  std::vector<std::pair<std::string, std::string>> merges;
  const json ms = m.value("merges", json::array());
  if (!ms.is_array()) fail<IoError>("tokenizer: {}: model.merges is not a list", path);
  for (size_t i = 0; i < ms.size(); ++i) {
    const json& e = ms[i];
    if (e.is_string()) {
      merges.push_back(split_merge(e.get<std::string>(), path + " model.merges", i + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      fail<IoError>("tokenizer: {}: model.merges[{}] is {}, not \"left right\" or [left, right]", path, i, e.dump());
    }
  }
  std::vector<AddedToken> added;
  for (const json& a : j.value("added_tokens", json::array())) {
    if (!a.is_object() || !a.contains("content") || !a.contains("id"))
      fail<IoError>("tokenizer: {}: added token {} has no content or id", path, a.dump());
    const std::string content = a["content"].get<std::string>();
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      refuse_unless(!a.value(flag, false), path, "added token '" + content + "' sets " + flag);
    added.push_back({content, a["id"].get<uint32_t>(), a.value("special", true)});
  }
  try {
    return Tokenizer(std::move(vocab), std::move(merges), std::move(added), options);
  } catch (const ValueError& e) {
    fail<ValueError>("tokenizer: {}: {}", path, e.what());
  }
}

Tokenizer load_tokenizer(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / "tokenizer.json")) return load_tokenizer_json((dir / "tokenizer.json").string());
    if (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt"))
      return load_vocab_merges((dir / "vocab.json").string(), (dir / "merges.txt").string());
    fail<IoError>("tokenizer: {} holds neither tokenizer.json nor vocab.json + merges.txt", path);
  }
  if (!fs::exists(path, ec)) fail<IoError>("tokenizer: {} does not exist", path);
  return load_tokenizer_json(path);
}

std::string to_vocab_json(const Tokenizer& t) {
  ordered_json v = ordered_json::object();
  for (uint32_t id = 0; id < t.vocab().size(); ++id)
    if (!t.vocab()[id].empty()) v[t.vocab()[id]] = id;
  return v.dump();
}

std::string to_merges_txt(const Tokenizer& t) {
  std::string out = "#version: 0.2\n";
  for (const auto& [l, r] : t.merges()) out += l + " " + r + "\n";
  return out;
}

std::string to_tokenizer_json(const Tokenizer& t) {
  const auto byte_level = [&](bool prefix) {
    return ordered_json{{"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"trim_offsets", true}, {"use_regex", true}};
  };
  ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = ordered_json::array();
  for (const auto& a : t.added_tokens())
    j["added_tokens"].push_back({{"id", a.id}, {"content", a.content}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", a.special}});
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level(t.options().add_prefix_space);
  j["post_processor"] = byte_level(true);
  j["decoder"] = byte_level(true);
  ordered_json m;
  m["type"] = "BPE";
  m["dropout"] = nullptr;
  m["unk_token"] = nullptr;
  m["continuing_subword_prefix"] = nullptr;
  m["end_of_word_suffix"] = nullptr;
  m["fuse_unk"] = false;
  m["byte_fallback"] = false;
  m["ignore_merges"] = t.options().ignore_merges;
  m["vocab"] = ordered_json::object();
  for (uint32_t id = 0; id < t.vocab().size(); ++id)
    if (!t.vocab()[id].empty()) m["vocab"][t.vocab()[id]] = id;
  m["merges"] = ordered_json::array();
  for (const auto& [l, r] : t.merges()) m["merges"].push_back({l, r});
  j["model"] = std::move(m);
  return j.dump(2);
}

void save_tokenizer(const Tokenizer& t, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail<IoError>("tokenizer: cannot create {}: {}", dir, ec.message());
  const fs::path d(dir);
  write_file_atomic((d / "vocab.json").string(), to_vocab_json(t));
  write_file_atomic((d / "merges.txt").string(), to_merges_txt(t));
  write_file_atomic((d / "tokenizer.json").string(), to_tokenizer_json(t));
}

}  // namespace braid::text
