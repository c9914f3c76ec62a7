#include "braid/comm/transport/tcp_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "braid/base/error.h"

namespace braid::comm {

TcpChannel::TcpChannel(net::Fd fd) : fd_(std::move(fd)) { net::tune_for_throughput(fd_.get()); }

size_t TcpChannel::try_write(ConstBytes a, ConstBytes b) {
  iovec iov[2] = {{const_cast<std::byte*>(a.data()), a.size()},
                  {const_cast<std::byte*>(b.data()), b.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  while (true) {
    ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno != EINTR) fail<PeerError>("send: {}", std::strerror(errno));
  }
}

void TcpChannel::write(ConstBytes a, ConstBytes b) {
  iovec iov[2] = {{const_cast<std::byte*>(a.data()), a.size()},
                  {const_cast<std::byte*>(b.data()), b.size()}};
  int first = 0;
  while (first < 2) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = 2 - first;
    ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail<PeerError>("send: {}", std::strerror(errno));
    }
    size_t left = static_cast<size_t>(n);
    for (int i = first; i < 2 && left > 0; ++i) {
      size_t take = std::min(left, iov[i].iov_len);
      iov[i].iov_base = static_cast<std::byte*>(iov[i].iov_base) + take;
      iov[i].iov_len -= take;
      left -= take;
    }
  }
}

size_t TcpChannel::try_read(std::span<std::byte> out) {
  while (true) {
    ssize_t n = ::recv(fd_.get(), out.data(), out.size(), MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return out.empty() ? 0 : kClosed;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno != EINTR) fail<PeerError>("recv: {}", std::strerror(errno));
  }
}

bool TcpChannel::wait_readable(std::chrono::milliseconds timeout) {
  pollfd p{fd_.get(), POLLIN, 0};
  int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (n < 0 && errno != EINTR) fail<PeerError>("poll: {}", std::strerror(errno));
  // POLLHUP/POLLERR count as readable: try_read then reports them.
  return n > 0;
}

void TcpChannel::close_write() { ::shutdown(fd_.get(), SHUT_WR); }
void TcpChannel::shutdown() { ::shutdown(fd_.get(), SHUT_RDWR); }

}  // namespace braid::comm
