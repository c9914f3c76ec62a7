#include "braid/comm/transport/tcp.h"

#include <cstring>
#include <future>

#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/comm/store/protocol.h"
#include "braid/comm/store/rendezvous.h"
#include "braid/comm/transport/socket_util.h"
#include "braid/comm/transport/stream.h"
#include "braid/comm/transport/tcp_channel.h"

namespace braid::comm {

namespace {

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
      channels[p] = make_tcp_channel(connect_lower(p, addrs[p], o, d));
  } catch (...) {
    connect_error = std::current_exception();
  }
  auto higher = accepted.get();  // rethrows the accept side's error
  if (connect_error) std::rethrow_exception(connect_error);
  for (int p = o.rank + 1; p < o.size; ++p)
    channels[p] = make_tcp_channel(std::move(higher[p]));
  return std::make_unique<StreamTransport>("tcp", o.rank, o.size, std::move(channels));
}

}  // namespace braid::comm
