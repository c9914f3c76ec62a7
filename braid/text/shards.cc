#include "braid/text/shards.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "braid/base/error.h"

namespace braid::text {
namespace {

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void write_all(int fd, const unsigned char* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail<IoError>("tokens: writing {}: {}", path, std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

ShardWriter::ShardWriter(ShardWriterOptions o) : o_(std::move(o)) {
  if (o_.vocab_size == 0) fail<ValueError>("tokens: a shard writer needs the vocabulary size");
  if (o_.ids_per_shard == 0) fail<ValueError>("tokens: ids_per_shard must be positive");
  bytes_per_id_ = o_.vocab_size <= 65536 ? 2 : 4;
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void ShardWriter::open_shard() {
  char name[32];
  std::snprintf(name, sizeof name, "-%05zu.tok", written_.size());
  path_ = o_.prefix + name;
  temp_ = path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail<IoError>("tokens: cannot create {}: {}", temp_, std::strerror(errno));
  unsigned char header[kShardHeaderBytes] = {};
  write_all(fd_, header, sizeof header, temp_);  // the real header once the count is known
  count_ = 0;
}

void ShardWriter::close_shard() {
  unsigned char header[kShardHeaderBytes] = {};
  std::memcpy(header, kShardMagic, 8);
  put_u32(header + 8, kShardVersion);
  put_u32(header + 12, static_cast<uint32_t>(bytes_per_id_));
  put_u64(header + 16, count_);
  put_u32(header + 24, o_.vocab_size);
  if (::pwrite(fd_, header, sizeof header, 0) != static_cast<ssize_t>(sizeof header) || ::fsync(fd_) != 0)
    fail<IoError>("tokens: writing {}: {}", temp_, std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    fail<IoError>("tokens: renaming {} to {}: {}", temp_, path_, std::strerror(errno));
  written_.push_back(path_);
}

void ShardWriter::add(std::span<const uint32_t> ids) {
  if (fd_ >= 0 && count_ > 0 && count_ + ids.size() > o_.ids_per_shard) close_shard();
  if (fd_ < 0) open_shard();
  buffer_.resize(ids.size() * static_cast<size_t>(bytes_per_id_));
  unsigned char* p = buffer_.data();
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t id = ids[i];
    if (id >= o_.vocab_size)
      fail<ValueError>("tokens: id {} at position {} of a document is not below the vocabulary size {}", id, i,
                       o_.vocab_size);
    p[0] = static_cast<unsigned char>(id);
    p[1] = static_cast<unsigned char>(id >> 8);
    if (bytes_per_id_ == 4) {
      p[2] = static_cast<unsigned char>(id >> 16);
      p[3] = static_cast<unsigned char>(id >> 24);
    }
    p += bytes_per_id_;
  }
  write_all(fd_, buffer_.data(), buffer_.size(), temp_);
  count_ += ids.size();
}

std::vector<std::string> ShardWriter::finish() {
  if (fd_ >= 0) close_shard();
  return written_;
}

TokenShard::TokenShard(std::string path, ShardAccess access) : path_(std::move(path)) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail<IoError>("tokens: cannot open {}: {}", path_, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail<IoError>("tokens: cannot stat {}: {}", path_, std::strerror(errno));
  }
  const auto bytes = static_cast<uint64_t>(st.st_size);
  unsigned char header[kShardHeaderBytes];
  const ssize_t got = bytes >= kShardHeaderBytes ? ::pread(fd, header, sizeof header, 0) : 0;
  if (bytes < kShardHeaderBytes || got != static_cast<ssize_t>(sizeof header)) {
    ::close(fd);
    fail<IoError>("tokens: {} is truncated: {} bytes, shorter than the {}-byte header", path_, bytes,
                  kShardHeaderBytes);
  }
  const auto refuse = [&](const std::string& what) {
    ::close(fd);
    fail<IoError>("tokens: {}: {}", path_, what);
  };
  if (std::memcmp(header, kShardMagic, 8) != 0) refuse("not a braid token shard (no \"BRAIDTOK\" magic)");
  if (get_u32(header + 8) != kShardVersion)
    refuse(fmt::format("shard version {}, this braid reads version {}", get_u32(header + 8), kShardVersion));
  bytes_per_id_ = static_cast<int>(get_u32(header + 12));
  if (bytes_per_id_ != 2 && bytes_per_id_ != 4)
    refuse(fmt::format("{} bytes per id; shards hold 2 (u16) or 4 (u32)", bytes_per_id_));
  count_ = get_u64(header + 16);
  vocab_size_ = get_u32(header + 24);
  if (vocab_size_ == 0) refuse("vocabulary size 0 in the header");
  if (count_ > (bytes - kShardHeaderBytes) / static_cast<uint64_t>(bytes_per_id_) ||
      kShardHeaderBytes + count_ * static_cast<uint64_t>(bytes_per_id_) != bytes)
    refuse(fmt::format("truncated or padded: the header says {} ids ({} bytes with the header), the file has {} bytes",
                       count_, kShardHeaderBytes + count_ * static_cast<uint64_t>(bytes_per_id_), bytes));
  map_bytes_ = bytes;
  void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) fail<IoError>("tokens: cannot map {}: {}", path_, std::strerror(errno));
  map_ = static_cast<const unsigned char*>(m);
  // Advice only: a kernel that ignores it reads more around each window.
  ::madvise(m, map_bytes_, access == ShardAccess::Random ? MADV_RANDOM : MADV_SEQUENTIAL);
}

TokenShard::~TokenShard() {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

void TokenShard::read(uint64_t start, std::span<uint32_t> out, uint32_t limit) const {
  if (start > count_ || out.size() > count_ - start)
    fail<IndexError>("tokens: {}: ids [{}, {}) past its {} ids", path_, start, start + out.size(), count_);
  if (limit == 0) limit = vocab_size_;
  const unsigned char* p = map_ + kShardHeaderBytes + start * static_cast<uint64_t>(bytes_per_id_);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t id;
    if (bytes_per_id_ == 2) {
      id = uint32_t{p[0]} | (uint32_t{p[1]} << 8);
      p += 2;
    } else {
      id = get_u32(p);
      p += 4;
    }
    if (id >= limit)
      fail<IoError>("tokens: {}: id {} at offset {} (id index, from 0) is not below the vocabulary size {}", path_, id,
                    start + i, limit);
    out[i] = id;
  }
}

std::vector<std::string> glob_shards(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (paths.empty()) fail<IoError>("tokens: no shard matches {}", pattern);
  std::sort(paths.begin(), paths.end());
  return paths;
}

TokenWindows::TokenWindows(const std::vector<std::string>& paths, WindowOptions o) : o_(o) {
  if (o_.context == 0) fail<ValueError>("tokens: context must be positive");
  if (o_.stride == 0) o_.stride = o_.context;
  starts_.push_back(0);
  for (const auto& p : paths) {
    auto s = std::make_unique<TokenShard>(p);
    const uint64_t n = s->size();
    const uint64_t w = n >= o_.context + 1 ? (n - o_.context - 1) / o_.stride + 1 : 0;
    tokens_ += n;
    starts_.push_back(starts_.back() + w);
    shards_.push_back(std::move(s));
  }
}

void TokenWindows::window(uint64_t i, std::span<uint32_t> out) const {
  if (i >= size()) fail<IndexError>("tokens: window {} of {}", i, size());
  if (out.size() != o_.context + 1) fail<ValueError>("tokens: a window is {} ids, not {}", o_.context + 1, out.size());
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), i);
  const size_t s = static_cast<size_t>(it - starts_.begin()) - 1;
  shards_[s]->read((i - starts_[s]) * o_.stride, out, o_.limit);
}

}  // namespace braid::text
