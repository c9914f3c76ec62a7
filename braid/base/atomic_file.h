// Crash-safe file replacement: a reader of `path` sees either the old file or
// the complete new one, never a mix, even if the process or machine dies
// mid-write. The bytes go to a temporary file in the same folder, which is
// fsync'ed, renamed over `path` (atomic on POSIX file systems), and then the
// folder is fsync'ed so the rename itself is durable.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace braid {

class AtomicFile {
 public:
  // Creates "<path>.tmp.<pid>.<random>" next to `path`; IoError if impossible.
  explicit AtomicFile(std::string path);
  // Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const std::byte> bytes);
  void write(std::string_view text);
  // fsync, rename over the target, fsync the folder. IoError on any failure
  // (the old file, if any, is then untouched).
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// The whole write-fsync-rename sequence for bytes already in memory.
void write_file_atomic(const std::string& path, std::span<const std::byte> bytes);
void write_file_atomic(const std::string& path, std::string_view text);

}  // namespace braid
