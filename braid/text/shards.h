// Token shards: the ids `braid tokenize encode` writes, read through mmap so a
// corpus larger than memory trains with resident memory independent of its size.
//
// File layout (little-endian), 32-byte header then the ids:
//   0  8 bytes  magic "BRAIDTOK"
//   8  u32      version (1)
//   12 u32      bytes per id: 2 (u16, when the vocabulary has at most 65536 ids) or 4 (u32)
//   16 u64      number of ids
//   24 u32      vocabulary size: every id is below it
//   28 u32      reserved, 0
//   32 ids      number of ids x bytes per id; the file ends there
// Documents follow each other, separated by the end-of-text id when the
// encoder was given one; a shard holds whole documents unless one document is
// larger than a shard.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace braid::text {

inline constexpr char kShardMagic[8] = {'B', 'R', 'A', 'I', 'D', 'T', 'O', 'K'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderBytes = 32;

struct ShardWriterOptions {
  std::string prefix;                   // shards are PREFIX-00000.tok, PREFIX-00001.tok, ...
  uint32_t vocab_size = 0;              // ids must be below it; picks u16 or u32
  uint64_t ids_per_shard = 1ull << 28;  // a new shard starts at the first document past this
};

// Writes shards; each appears complete under its name (temporary file, then rename).
class ShardWriter {
 public:
  explicit ShardWriter(ShardWriterOptions o);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends one document's ids. ValueError naming the id and its position when
  // one is not below vocab_size.
  void add(std::span<const uint32_t> ids);
  // Closes the last shard; the paths written, in order.
  std::vector<std::string> finish();

 private:
  void open_shard();
  void close_shard();
  ShardWriterOptions o_;
  int bytes_per_id_;
  int fd_ = -1;
  std::string temp_, path_;
  uint64_t count_ = 0;
  std::vector<std::string> written_;
  std::vector<unsigned char> buffer_;
};

// How a shard's pages will be read, told to the kernel (madvise).
enum class ShardAccess {
  Random,      // windows in shuffled order: no readahead, so memory holds the windows read, not
               // the 64 KiB-2 MiB around each (measured: 2000 windows of a 4 GiB shard mapped
               // 135 MB with readahead)
  Sequential,  // front to back (decode, conversions): read ahead
};

// One shard, memory-mapped read-only. IoError naming the file and what is
// wrong for a missing, foreign (magic, version, id width) or truncated file.
class TokenShard {
 public:
  explicit TokenShard(std::string path, ShardAccess access = ShardAccess::Random);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return count_; }
  uint32_t vocab_size() const { return vocab_size_; }
  int bytes_per_id() const { return bytes_per_id_; }

  // Ids [start, start + out.size()) into out. IndexError past the end; IoError
  // naming the shard and the id's offset when an id is not below `limit`
  // (0: the header's vocabulary size).
  void read(uint64_t start, std::span<uint32_t> out, uint32_t limit = 0) const;

 private:
  std::string path_;
  const unsigned char* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint64_t count_ = 0;
  uint32_t vocab_size_ = 0;
  int bytes_per_id_ = 0;
};

// The shard files a glob pattern names, sorted. IoError when none match.
std::vector<std::string> glob_shards(const std::string& pattern);

struct WindowOptions {
  uint64_t context = 256;  // a window is context + 1 ids: inputs and next-token targets
  uint64_t stride = 0;     // between window starts; 0: context (tiled)
  uint32_t limit = 0;      // ids must be below it (a model's vocabulary); 0: each shard's own
};

// Windows of context + 1 ids over shards, never crossing a shard's end.
// Reading a window touches only its pages.
class TokenWindows {
 public:
  TokenWindows(const std::vector<std::string>& paths, WindowOptions o);

  uint64_t size() const { return starts_.empty() ? 0 : starts_.back(); }
  uint64_t tokens() const { return tokens_; }
  const std::vector<std::unique_ptr<TokenShard>>& shards() const { return shards_; }
  // Window i (0 <= i < size()) into out (context + 1 ids).
  void window(uint64_t i, std::span<uint32_t> out) const;

 private:
  WindowOptions o_;
  std::vector<std::unique_ptr<TokenShard>> shards_;
  std::vector<uint64_t> starts_;  // starts_[s + 1] - starts_[s]: windows in shard s
  uint64_t tokens_ = 0;
};

}  // namespace braid::text
