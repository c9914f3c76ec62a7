#include "braid/comm/transport/tcp.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <future>

#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/comm/store/protocol.h"
#include "braid/comm/store/rendezvous.h"
#include "braid/comm/transport/socket_util.h"
#include "braid/comm/transport/stream.h"

namespace braid::comm {

namespace {

class TcpChannel final : public Channel {
 public:
  explicit TcpChannel(net::Fd fd) : fd_(std::move(fd)) { net::tune_for_throughput(fd_.get()); }

  size_t try_write(ConstBytes a, ConstBytes b) override {
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

  void write(ConstBytes a, ConstBytes b) override {
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

  size_t try_read(std::span<std::byte> out) override {
    while (true) {
      ssize_t n = ::recv(fd_.get(), out.data(), out.size(), MSG_DONTWAIT);
      if (n > 0) return static_cast<size_t>(n);
      if (n == 0) return out.empty() ? 0 : kClosed;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      if (errno != EINTR) fail<PeerError>("recv: {}", std::strerror(errno));
    }
  }

  bool wait_readable(std::chrono::milliseconds timeout) override {
    pollfd p{fd_.get(), POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n < 0 && errno != EINTR) fail<PeerError>("poll: {}", std::strerror(errno));
    // POLLHUP/POLLERR count as readable: try_read then reports them.
    return n > 0;
  }

  void close_write() override { ::shutdown(fd_.get(), SHUT_WR); }
  void shutdown() override { ::shutdown(fd_.get(), SHUT_RDWR); }

 private:
  net::Fd fd_;
};

std::array<std::byte, 4> rank_bytes(int r) { return store::length_prefix(static_cast<uint32_t>(r)); }

Sha256 hello_mac(const std::string& token, std::span<const std::byte> nonce, int rank) {
  auto rb = rank_bytes(rank);
  std::vector<std::byte> msg(nonce.begin(), nonce.end());
  msg.insert(msg.end(), rb.begin(), rb.end());
  return store::auth_mac(token, "braid-tcp", msg);
}

// Accepts connections from ranks above ours until all have arrived. A
// connection that fails the handshake is logged and dropped; accepting goes on.
std::vector<net::Fd> accept_higher(int listen_fd, const TcpOptions& o, Deadline d) {
  std::vector<net::Fd> fds(o.size);
  int missing = o.size - 1 - o.rank;
  std::string who = fmt::format("rank {}: tcp accept", o.rank);
  while (missing > 0) {
    net::Fd fd;
    try {
      fd = net::accept_until(listen_fd, d, who);
    } catch (const TimeoutError&) {
      std::vector<int> absent;
      for (int p = o.rank + 1; p < o.size; ++p)
        if (!fds[p]) absent.push_back(p);
      fail<TimeoutError>("rank {}: tcp set-up: ranks [{}] never connected within the deadline",
                         o.rank, fmt::join(absent, ", "));
    }
    try {
      std::array<std::byte, store::kNonceBytes> nonce;
      random_bytes(nonce);
      // The handshake itself gets a short deadline so a silent client cannot
      // hold up the others.
      Deadline hd = d.min(Deadline::after(std::chrono::seconds(10)));
      net::write_exact(fd.get(), nonce, hd, who);
      std::array<std::byte, 4 + 32> hello;
      net::read_exact(fd.get(), hello, hd, who);
      int peer = static_cast<int>(store::read_length(std::span<const std::byte, 4>(hello.data(), 4)));
      Sha256 mac;
      std::memcpy(mac.data(), hello.data() + 4, 32);
      bool ok = peer > o.rank && peer < o.size && !fds[peer] &&
                equal_digests(mac, hello_mac(o.token, nonce, peer));
      std::array<std::byte, 1> reply{std::byte{ok ? store::kAuthOk : store::kAuthRejected}};
      net::write_exact(fd.get(), reply, hd, who);
      if (!ok) {
        log::warn("rank {}: tcp: rejected a connection claiming rank {} (bad token, rank or duplicate)",
                  o.rank, peer);
        continue;
      }
      fds[peer] = std::move(fd);
      --missing;
    } catch (const Error& e) {
      log::warn("rank {}: tcp: dropped a connection during the handshake: {}", o.rank, e.what());
    }
  }
  return fds;
}

net::Fd connect_lower(int peer, const std::string& addr, const TcpOptions& o, Deadline d) {
  auto [host, port] = net::split_host_port(addr);
  std::string who = fmt::format("rank {}: tcp connect to rank {} at {}", o.rank, peer, addr);
  net::Fd fd = net::connect_to(host, port, d, who);
  std::array<std::byte, store::kNonceBytes> nonce;
  net::read_exact(fd.get(), nonce, d, who);
  auto rb = rank_bytes(o.rank);
  Sha256 mac = hello_mac(o.token, nonce, o.rank);
  std::array<std::byte, 36> hello;
  std::memcpy(hello.data(), rb.data(), 4);
  std::memcpy(hello.data() + 4, mac.data(), 32);
  net::write_exact(fd.get(), hello, d, who);
  std::array<std::byte, 1> reply;
  net::read_exact(fd.get(), reply, d, who);
  if (reply[0] != std::byte{store::kAuthOk})
    fail<PeerError>("{}: the peer rejected our token (check BRAID_TOKEN)", who);
  return fd;
}

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(Store& store, const TcpOptions& o) {
  BRAID_CHECK(o.rank >= 0 && o.rank < o.size, "rank {} of {}", o.rank, o.size);
  if (o.token.empty()) fail<ConfigError>("tcp transport: empty token (set BRAID_TOKEN)");
  Deadline d = Deadline::after(o.connect_timeout);
  int port = 0;
  net::Fd listener = net::listen_on(o.host, 0, &port);
  std::string mine = o.host.find(':') != std::string::npos ? fmt::format("[{}]:{}", o.host, port)
                                                           : fmt::format("{}:{}", o.host, port);
  auto addrs = exchange(store, o.prefix + "/tcp", o.rank, o.size, mine, d);

  auto accepted = std::async(std::launch::async, [&] { return accept_higher(listener.get(), o, d); });
  std::vector<std::unique_ptr<Channel>> channels(o.size);
  std::exception_ptr connect_error;
  try {
    for (int p = 0; p < o.rank; ++p)
      channels[p] = std::make_unique<TcpChannel>(connect_lower(p, addrs[p], o, d));
  } catch (...) {
    connect_error = std::current_exception();
  }
  auto higher = accepted.get();  // rethrows the accept side's error
  if (connect_error) std::rethrow_exception(connect_error);
  for (int p = o.rank + 1; p < o.size; ++p)
    channels[p] = std::make_unique<TcpChannel>(std::move(higher[p]));
  return std::make_unique<StreamTransport>("tcp", o.rank, o.size, std::move(channels));
}

}  // namespace braid::comm
