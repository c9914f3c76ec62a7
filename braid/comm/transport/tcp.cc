#include "braid/comm/transport/tcp.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <sys/socket.h>

#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/comm/store/protocol.h"
#include "braid/comm/store/rendezvous.h"
#include "braid/comm/transport/socket_util.h"
#include "braid/comm/transport/stream.h"
#include "braid/comm/transport/striped_channel.h"
#include "braid/comm/transport/tcp_channel.h"

namespace braid::comm {

namespace {

std::array<std::byte, 4> u32_bytes(int v) { return store::length_prefix(static_cast<uint32_t>(v)); }

// Proof that the connecting rank knows the token, bound to this connection
// (the acceptor's fresh nonce) and to the slot it claims (rank, stream index),
// so a recorded hello can neither be replayed nor moved to another stream.
Sha256 hello_mac(const std::string& token, std::span<const std::byte> nonce, int rank, int index) {
  auto rb = u32_bytes(rank), ib = u32_bytes(index);
  std::vector<std::byte> msg(nonce.begin(), nonce.end());
  msg.insert(msg.end(), rb.begin(), rb.end());
  msg.insert(msg.end(), ib.begin(), ib.end());
  return store::auth_mac(token, "braid-tcp", msg);
}

// hello = u32 rank | u32 stream index | HMAC (32 bytes)
constexpr size_t kHelloBytes = 4 + 4 + 32;

// What each rank publishes: "host:port/streams".
std::string advert(const std::string& host, int port, int streams) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}/{}", host, port, streams)
                                             : fmt::format("{}:{}/{}", host, port, streams);
}

// Splits the adverts into addresses; every rank must open as many streams
// per peer as we do, or the set-up would only time out.
std::vector<std::string> check_adverts(const std::vector<std::string>& adverts, const TcpOptions& o) {
  std::vector<std::string> addrs;
  std::vector<std::string> streams;
  bool differ = false;
  for (const auto& a : adverts) {
    auto slash = a.rfind('/');
    BRAID_CHECK(slash != std::string::npos, "tcp advert '{}'", a);
    addrs.push_back(a.substr(0, slash));
    streams.push_back(a.substr(slash + 1));
    differ |= streams.back() != std::to_string(o.streams);
  }
  if (differ) {
    std::vector<std::string> each;
    for (size_t r = 0; r < streams.size(); ++r) each.push_back(fmt::format("rank {}: {}", r, streams[r]));
    fail<ConfigError>("rank {}: tcp: the ranks disagree on the streams per peer ({}); set the same "
                      "BRAID_TCP_STREAMS on every rank", o.rank, fmt::join(each, ", "));
  }
  return addrs;
}

// How long one connection may take to answer the nonce with its hello. Each
// connection is handshaken in its own thread, so a silent one (a port
// scanner, a stale client) costs only itself: before, the acceptor took one
// connection at a time with 10 s each, and two idle connections to rank 0's
// port held a 2-rank set-up from 0.9 s to 15.4 s.
constexpr auto kHandshakeDeadline = std::chrono::seconds(3);

// Accepts o.streams connections from each rank above ours, handshaking each
// in its own thread. A connection that fails the handshake (bad MAC, rank or
// stream index, a slot already taken, silence past kHandshakeDeadline) is
// logged and dropped; accepting goes on. Result: [peer][index].
std::vector<std::vector<net::Fd>> accept_higher(int listen_fd, const TcpOptions& o, Deadline d) {
  struct Shared {
    std::mutex mu;
    std::vector<std::vector<net::Fd>> fds;
    std::vector<std::vector<bool>> claimed;  // a handshake for the slot is answering "ok"
    int missing = 0;
    std::set<int> handshaking;  // raw fds of connections still in their handshake
  } sh;
  sh.fds.resize(o.size);
  sh.claimed.resize(o.size);
  for (int p = 0; p < o.size; ++p) sh.fds[p].resize(o.streams), sh.claimed[p].resize(o.streams);
  sh.missing = (o.size - 1 - o.rank) * o.streams;
  const std::string who = fmt::format("rank {}: tcp accept", o.rank);

  auto handshake = [&sh, &o, &who, d](net::Fd fd) {
    // Off the list before `fd` closes, so no other connection reusing its number gets shut down.
    struct Done {
      Shared& sh;
      int raw;
      ~Done() {
        std::lock_guard l(sh.mu);
        sh.handshaking.erase(raw);
      }
    } done{sh, fd.get()};
    int peer = -1, index = -1;
    bool claimed = false;
    try {
      std::array<std::byte, store::kNonceBytes> nonce;
      random_bytes(nonce);
      const Deadline hd = d.min(Deadline::after(kHandshakeDeadline));
      net::write_exact(fd.get(), nonce, hd, who);
      std::array<std::byte, kHelloBytes> hello;
      net::read_exact(fd.get(), hello, hd, who);
      peer = static_cast<int>(store::read_length(std::span<const std::byte, 4>(hello.data(), 4)));
      index = static_cast<int>(store::read_length(std::span<const std::byte, 4>(hello.data() + 4, 4)));
      Sha256 mac;
      std::memcpy(mac.data(), hello.data() + 8, 32);
      bool ok = peer > o.rank && peer < o.size && index >= 0 && index < o.streams &&
                equal_digests(mac, hello_mac(o.token, nonce, peer, index));
      if (ok) {
        std::lock_guard l(sh.mu);
        ok = claimed = !sh.claimed[peer][index];
        if (ok) sh.claimed[peer][index] = true;
      }
      std::array<std::byte, 1> reply{std::byte{ok ? store::kAuthOk : store::kAuthRejected}};
      net::write_exact(fd.get(), reply, hd, who);
      if (!ok) {
        logging::warn("rank {}: tcp: rejected a connection claiming rank {} stream {} (bad token, rank, stream "
                      "or duplicate)", o.rank, peer, index);
        return;
      }
      std::lock_guard l(sh.mu);
      sh.handshaking.erase(fd.get());  // kept: the set-up's now
      sh.fds[peer][index] = std::move(fd);
      --sh.missing;
    } catch (const Error& e) {
      logging::warn("rank {}: tcp: dropped a connection during the handshake: {}", o.rank, e.what());
      if (claimed) {
        std::lock_guard l(sh.mu);
        sh.claimed[peer][index] = false;
      }
    }
  };

  std::vector<std::thread> threads;
  // However this ends, handshakes still under way are cut short (their reads
  // fail at once) and their threads joined.
  struct Join {
    Shared& sh;
    std::vector<std::thread>& threads;
    ~Join() {
      {
        std::lock_guard l(sh.mu);
        for (int fd : sh.handshaking) ::shutdown(fd, SHUT_RDWR);
      }
      for (auto& t : threads) t.join();
    }
  } join{sh, threads};
  while (true) {
    {
      std::lock_guard l(sh.mu);
      if (sh.missing == 0) break;
    }
    if (d.expired()) {
      std::vector<int> absent;
      std::lock_guard l(sh.mu);
      for (int p = o.rank + 1; p < o.size; ++p)
        if (std::ranges::any_of(sh.fds[p], [](const net::Fd& f) { return !f; })) absent.push_back(p);
      fail<TimeoutError>("rank {}: tcp set-up: ranks [{}] never connected (all {} streams) within the deadline",
                         o.rank, fmt::join(absent, ", "), o.streams);
    }
    net::Fd fd;
    try {
      // Short waits: a finished handshake ends the loop without a connection to wake it.
      fd = net::accept_until(listen_fd, d.min(Deadline::after(std::chrono::milliseconds(20))), who);
    } catch (const TimeoutError&) {
      continue;
    }
    std::lock_guard l(sh.mu);
    sh.handshaking.insert(fd.get());
    threads.emplace_back(handshake, std::move(fd));
  }
  std::lock_guard l(sh.mu);
  return std::move(sh.fds);
}

net::Fd connect_lower(int peer, int index, const std::string& addr, const TcpOptions& o, Deadline d) {
  auto [host, port] = net::split_host_port(addr);
  std::string who = fmt::format("rank {}: tcp connect to rank {} at {} (stream {})", o.rank, peer, addr, index);
  net::Fd fd = net::connect_to(host, port, d, who);
  std::array<std::byte, store::kNonceBytes> nonce;
  net::read_exact(fd.get(), nonce, d, who);
  auto rb = u32_bytes(o.rank), ib = u32_bytes(index);
  Sha256 mac = hello_mac(o.token, nonce, o.rank, index);
  std::array<std::byte, kHelloBytes> hello;
  std::memcpy(hello.data(), rb.data(), 4);
  std::memcpy(hello.data() + 4, ib.data(), 4);
  std::memcpy(hello.data() + 8, mac.data(), 32);
  net::write_exact(fd.get(), hello, d, who);
  std::array<std::byte, 1> reply;
  net::read_exact(fd.get(), reply, d, who);
  if (reply[0] != std::byte{store::kAuthOk})
    fail<PeerError>("{}: the peer rejected our token (check BRAID_TOKEN)", who);
  return fd;
}

// One stream: the plain socket channel, so the default costs nothing extra.
std::unique_ptr<Channel> peer_channel(std::vector<net::Fd> fds) {
  if (fds.size() == 1) return std::make_unique<TcpChannel>(std::move(fds[0]));
  std::vector<std::unique_ptr<TcpChannel>> subs;
  for (auto& fd : fds) subs.push_back(std::make_unique<TcpChannel>(std::move(fd)));
  return std::make_unique<StripedChannel>(std::move(subs));
}

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(Store& store, const TcpOptions& o) {
  BRAID_CHECK(o.rank >= 0 && o.rank < o.size, "rank {} of {}", o.rank, o.size);
  if (o.token.empty()) fail<ConfigError>("tcp transport: empty token (set BRAID_TOKEN)");
  if (o.streams < 1 || o.streams > kMaxTcpStreams)
    fail<ConfigError>("tcp transport: {} streams per peer (allowed: 1..{})", o.streams, kMaxTcpStreams);
  Deadline d = Deadline::after(o.connect_timeout);
  int port = 0;
  net::Fd listener = net::listen_on(o.host, 0, &port);
  auto addrs = check_adverts(exchange(store, o.prefix + "/tcp", o.rank, o.size, advert(o.host, port, o.streams), d), o);

  auto accepted = std::async(std::launch::async, [&] { return accept_higher(listener.get(), o, d); });
  std::vector<std::vector<net::Fd>> lower(o.rank);
  std::exception_ptr connect_error;
  try {
    for (int p = 0; p < o.rank; ++p)
      for (int i = 0; i < o.streams; ++i) lower[p].push_back(connect_lower(p, i, addrs[p], o, d));
  } catch (...) {
    connect_error = std::current_exception();
  }
  auto higher = accepted.get();  // rethrows the accept side's error
  if (connect_error) std::rethrow_exception(connect_error);
  std::vector<std::unique_ptr<Channel>> channels(o.size);
  for (int p = 0; p < o.rank; ++p) channels[p] = peer_channel(std::move(lower[p]));
  for (int p = o.rank + 1; p < o.size; ++p) channels[p] = peer_channel(std::move(higher[p]));
  return std::make_unique<StreamTransport>("tcp", o.rank, o.size, std::move(channels), o.max_message);
}

}  // namespace braid::comm
