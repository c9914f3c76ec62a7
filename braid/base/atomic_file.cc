#include "braid/base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "braid/base/digest.h"
#include "braid/base/error.h"

namespace braid {

namespace {
std::string errno_text() { return std::strerror(errno); }
}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  std::byte nonce[6];
  random_bytes(nonce);
  temp_ = fmt::format("{}.tmp.{}.{}", path_, ::getpid(), to_hex(nonce));
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail<IoError>("cannot create {} (to write {}): {}", temp_, path_, errno_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) fail<IoError>("write to {} after commit", path_);
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail<IoError>("writing {}: {}", temp_, errno_text());
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void AtomicFile::write(std::string_view text) { write(as_bytes(text)); }

void AtomicFile::commit() {
  if (fd_ < 0) fail<IoError>("{} committed twice", path_);
  if (::fsync(fd_) != 0) fail<IoError>("fsync {}: {}", temp_, errno_text());
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail<IoError>("close {}: {}", temp_, errno_text());
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    fail<IoError>("rename {} -> {}: {}", temp_, path_, errno_text());
  }
  committed_ = true;
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  if (dir.empty()) dir = std::filesystem::current_path();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail<IoError>("open folder {} to fsync the rename of {}: {}", dir.string(), path_, errno_text());
  rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) fail<IoError>("fsync folder {}: {}", dir.string(), errno_text());
}

void write_file_atomic(const std::string& path, std::span<const std::byte> bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

void write_file_atomic(const std::string& path, std::string_view text) { write_file_atomic(path, as_bytes(text)); }

}  // namespace braid
