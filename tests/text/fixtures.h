// The Hugging Face fixtures of tests/text/fixtures (written by make_fixtures.py).
#pragma once

#include <fmt/format.h>
#include <openssl/sha.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace braid::test {

inline std::string fixture(const std::string& name) { return std::string(BRAID_TESTS_DIR) + "/text/fixtures/" + name; }

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json expected() { return nlohmann::json::parse(slurp(fixture("expected.json"))); }

inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// FNV-1a over the ids' little-endian bytes, as make_fixtures.py computes it.
inline std::string fnv1a64(const std::vector<uint32_t>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const uint32_t id : ids)
    for (int b = 0; b < 4; ++b) {
      h ^= (id >> (8 * b)) & 0xff;
      h *= 0x100000001b3ull;
    }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The corpus files' bytes, or an empty list with *why set when they are not
// the files the fixtures were made from (another fortunes version, or none).
inline std::vector<std::string> corpus(const nlohmann::json& e, std::string* why) {
  std::vector<std::string> files;
  for (const auto& c : e["corpus"]) {
    const std::string path = c["path"];
    std::string bytes = slurp(path);
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d);
    std::string hex;
    for (const unsigned char x : d) hex += fmt::format("{:02x}", x);
    if (hex != c["sha256"].get<std::string>()) {
      *why = path + " is missing or not the file the fixtures were made from";
      return {};
    }
    files.push_back(std::move(bytes));
  }
  return files;
}

}  // namespace braid::test
