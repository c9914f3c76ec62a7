#include "braid/data/text.h"

#include <algorithm>
#include <filesystem>

#include "braid/data/file_bytes.h"

namespace braid::data {

namespace {

std::vector<uint8_t> read_corpus(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::directory_iterator(path)) {
      // Skips symlinks (fortunes' *.u8 aliases) and strfile index files (*.dat).
      if (e.is_symlink() || !e.is_regular_file() || e.path().extension() == ".dat") continue;
      files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) fail<IoError>("text dataset: folder {} holds no regular files", path);
  } else {
    if (!fs::exists(path)) {
      fail<IoError>("text dataset: {} does not exist (for the fortune cookies install the Debian package fortunes)",
                    path);
    }
    files.push_back(path);
  }
  std::vector<uint8_t> out;
  for (const auto& f : files) {
    std::vector<std::byte> b = read_maybe_gzip(f);
    const auto* p = reinterpret_cast<const uint8_t*>(b.data());
    out.insert(out.end(), p, p + b.size());
  }
  return out;
}

}  // namespace

CharTextDataset::CharTextDataset(const std::string& path, const TextOptions& options)
    : CharTextDataset(read_corpus(path), options, path) {}

CharTextDataset CharTextDataset::from_string(std::string text, const TextOptions& options, const std::string& name) {
  return CharTextDataset(std::vector<uint8_t>(text.begin(), text.end()), options, name);
}

CharTextDataset::CharTextDataset(std::vector<uint8_t> bytes, const TextOptions& o, const std::string& name) : o_(o) {
  if (o.context < 1 || o.stride < 1) {
    fail<ValueError>("text dataset: context and stride must be >= 1, got {} and {}", o.context, o.stride);
  }
  const auto n = static_cast<int64_t>(bytes.size());
  if (n < o.context + 1) {
    fail<IoError>("text dataset {}: {} bytes is too short for one example of context {} (needs {})", name, n,
                  o.context, o.context + 1);
  }
  std::array<bool, 256> seen{};
  for (uint8_t c : bytes) seen[c] = true;
  token_of_.fill(-1);
  for (int c = 0; c < 256; ++c) {
    if (!seen[c]) continue;
    token_of_[c] = static_cast<int64_t>(vocab_.size());
    vocab_.push_back(static_cast<uint8_t>(c));
  }
  for (auto& c : bytes) c = static_cast<uint8_t>(token_of_[c]);
  tokens_ = std::move(bytes);
  size_ = (n - o.context - 1) / o.stride + 1;
}

ExampleSpec CharTextDataset::spec() const {
  return {{o_.context}, DType::i64, {o_.context}, DType::i64};
}

void CharTextDataset::read(int64_t index, std::byte* input, std::byte* target) const {
  const uint8_t* src = tokens_.data() + index * o_.stride;
  auto* x = reinterpret_cast<int64_t*>(input);
  auto* y = reinterpret_cast<int64_t*>(target);
  for (int64_t i = 0; i < o_.context; ++i) {
    x[i] = src[i];
    y[i] = src[i + 1];
  }
}

std::string CharTextDataset::decode(const std::vector<int64_t>& tokens) const {
  std::string s;
  for (int64_t t : tokens) {
    if (t < 0 || t >= vocab_size()) fail<IndexError>("text dataset: token {} outside vocabulary of {}", t, vocab_size());
    s.push_back(static_cast<char>(vocab_[t]));
  }
  return s;
}

std::vector<int64_t> CharTextDataset::encode(const std::string& text) const {
  std::vector<int64_t> out;
  for (unsigned char c : text) {
    if (token_of_[c] < 0) fail<ValueError>("text dataset: byte {:#04x} is not in the vocabulary", c);
    out.push_back(token_of_[c]);
  }
  return out;
}

}  // namespace braid::data
