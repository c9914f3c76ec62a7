#include "braid/comm/transport/socket_util.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "braid/base/error.h"

namespace braid::comm::net {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

struct AddrInfo {
  addrinfo* head = nullptr;
  ~AddrInfo() {
    if (head) freeaddrinfo(head);
  }
};

void resolve(const std::string& host, int port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints,
                       &out.head);
  if (rc != 0) fail<ConfigError>("cannot resolve '{}': {}", host, gai_strerror(rc));
}

// Waits until fd is ready for `events`; false at the deadline.
bool wait_fd(int fd, short events, Deadline d) {
  while (true) {
    int ms = d.is_never() ? 1000
                          : static_cast<int>(std::min<int64_t>(
                                1000, std::chrono::duration_cast<std::chrono::milliseconds>(
                                          d.remaining()).count() + 1));
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) fail<IoError>("poll: {}", std::strerror(errno));
    if (d.expired()) return false;
  }
}

}  // namespace

Fd listen_on(const std::string& host, int port, int* bound_port) {
  AddrInfo ai;
  resolve(host, port, true, ai);
  Fd fd(::socket(ai.head->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail<IoError>("socket: {}", std::strerror(errno));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), ai.head->ai_addr, ai.head->ai_addrlen) != 0)
    fail<IoError>("cannot bind {}:{}: {}", host, port, std::strerror(errno));
  if (::listen(fd.get(), 128) != 0) fail<IoError>("listen: {}", std::strerror(errno));
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  *bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

Fd connect_to(const std::string& host, int port, Deadline d, const std::string& who) {
  auto t0 = Clock::now();
  std::string last = "no attempt";
  while (true) {
    AddrInfo ai;
    resolve(host, port, false, ai);
    Fd fd(::socket(ai.head->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) fail<IoError>("socket: {}", std::strerror(errno));
    int rc = ::connect(fd.get(), ai.head->ai_addr, ai.head->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (wait_fd(fd.get(), POLLOUT, d)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      int flags = ::fcntl(fd.get(), F_GETFL);
      ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
      return fd;
    }
    last = std::strerror(errno);
    if (d.expired()) {
      fail<TimeoutError>("{}: could not connect to {}:{} within {} (last error: {})", who, host,
                         port, format_duration(Clock::now() - t0), last);
    }
    std::this_thread::sleep_for(std::min<Duration>(d.remaining(), std::chrono::milliseconds(50)));
  }
}

Fd accept_until(int listen_fd, Deadline d, const std::string& who) {
  auto t0 = Clock::now();
  while (true) {
    if (!wait_fd(listen_fd, POLLIN, d)) {
      fail<TimeoutError>("{}: no connection arrived within {}", who,
                         format_duration(Clock::now() - t0));
    }
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return Fd(fd);
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
      fail<IoError>("{}: accept: {}", who, std::strerror(errno));
  }
}

void read_exact(int fd, std::span<std::byte> out, Deadline d, const std::string& what) {
  size_t got = 0;
  while (got < out.size()) {
    if (!wait_fd(fd, POLLIN, d)) fail<TimeoutError>("{}: timed out", what);
    ssize_t n = ::recv(fd, out.data() + got, out.size() - got, MSG_DONTWAIT);
    if (n == 0) fail<PeerError>("{}: connection closed", what);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail<PeerError>("{}: {}", what, std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
}

void write_exact(int fd, std::span<const std::byte> in, Deadline d, const std::string& what) {
  size_t put = 0;
  while (put < in.size()) {
    if (!wait_fd(fd, POLLOUT, d)) fail<TimeoutError>("{}: timed out", what);
    ssize_t n = ::send(fd, in.data() + put, in.size() - put, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail<PeerError>("{}: {}", what, std::strerror(errno));
    }
    put += static_cast<size_t>(n);
  }
}

std::pair<std::string, int> split_host_port(const std::string& addr) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) fail<ConfigError>("address '{}' has no port", addr);
  std::string host = addr.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, std::stoi(addr.substr(colon + 1))};
}

void tune_for_throughput(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace braid::comm::net
