// Small POSIX socket helpers with deadlines, for connection set-up (tcp.cc).
// The data path does not use these: it blocks in the Channel's own threads.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "braid/base/deadline.h"

namespace braid::comm::net {

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Listens on host:port (port 0 = any free one); returns the socket and the port.
Fd listen_on(const std::string& host, int port, int* bound_port);
// Connects, retrying refused connections until the deadline.
Fd connect_to(const std::string& host, int port, Deadline d, const std::string& who);
// Accepts one connection, or throws TimeoutError at the deadline.
Fd accept_until(int listen_fd, Deadline d, const std::string& who);
// Reads/writes exactly the buffer or throws (PeerError, TimeoutError).
void read_exact(int fd, std::span<std::byte> out, Deadline d, const std::string& what);
void write_exact(int fd, std::span<const std::byte> in, Deadline d, const std::string& what);
// "host:port" -> parts; the host may be a bracketed IPv6 address.
std::pair<std::string, int> split_host_port(const std::string& addr);
// TCP_NODELAY and large buffers for the data path.
void tune_for_throughput(int fd);

}  // namespace braid::comm::net
