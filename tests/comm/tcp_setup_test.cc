// tcp set-up with several streams per peer: the hello binds the stream index
// (a MAC for one index does not open another), out-of-range and duplicate
// indexes are turned away while the acceptor keeps going, and ranks that
// disagree on the stream count are told so instead of timing out.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <thread>

#include "braid/base/error.h"
#include "braid/comm/store/protocol.h"
#include "braid/comm/store/rendezvous.h"
#include "braid/comm/store/server.h"
#include "braid/comm/transport/socket_util.h"
#include "braid/comm/transport/tcp.h"

namespace braid::comm {
namespace {

using namespace std::chrono_literals;

// Plays rank 1 by hand: one connection to `addr` claiming stream `index`,
// with the MAC computed for `mac_index`. Returns true if it was accepted;
// an accepted socket goes to `keep`.
bool hello(const std::string& addr, int index, int mac_index, const std::string& token,
           std::vector<net::Fd>& keep) {
  auto [host, port] = net::split_host_port(addr);
  const Deadline d = Deadline::after(10s);
  net::Fd fd = net::connect_to(host, port, d, "test");
  std::array<std::byte, store::kNonceBytes> nonce;
  net::read_exact(fd.get(), nonce, d, "test");
  auto rank = store::length_prefix(1), idx = store::length_prefix(static_cast<uint32_t>(index));
  auto mac_idx = store::length_prefix(static_cast<uint32_t>(mac_index));
  std::vector<std::byte> msg(nonce.begin(), nonce.end());
  msg.insert(msg.end(), rank.begin(), rank.end());
  msg.insert(msg.end(), mac_idx.begin(), mac_idx.end());
  Sha256 mac = store::auth_mac(token, "braid-tcp", msg);
  std::array<std::byte, 40> h;
  std::memcpy(h.data(), rank.data(), 4);
  std::memcpy(h.data() + 4, idx.data(), 4);
  std::memcpy(h.data() + 8, mac.data(), 32);
  net::write_exact(fd.get(), h, d, "test");
  std::array<std::byte, 1> reply;
  net::read_exact(fd.get(), reply, d, "test");
  const bool ok = reply[0] == std::byte{store::kAuthOk};
  if (ok) keep.push_back(std::move(fd));
  return ok;
}

TEST(TcpSetup, StreamIndexIsAuthenticatedAndChecked) {
  StoreServer server({.token = "tok"});
  auto rank0 = std::async(std::launch::async, [&] {
    Store s({.port = server.port(), .token = "tok"});
    return make_tcp_transport(s, {.rank = 0, .size = 2, .token = "tok", .prefix = "h",
                                  .connect_timeout = 20000ms, .streams = 3});
  });
  Store s({.port = server.port(), .token = "tok"});
  auto adverts = exchange(s, "h/tcp", 1, 2, "127.0.0.1:1/3", Deadline::after(10s));
  const std::string addr0 = adverts[0].substr(0, adverts[0].rfind('/'));
  std::vector<net::Fd> keep;
  EXPECT_FALSE(hello(addr0, 3, 3, "tok", keep));     // index out of range
  EXPECT_FALSE(hello(addr0, 0, 0, "forged", keep));  // wrong token
  EXPECT_FALSE(hello(addr0, 1, 2, "tok", keep));     // a MAC for index 2 does not open index 1
  EXPECT_TRUE(hello(addr0, 0, 0, "tok", keep));
  EXPECT_FALSE(hello(addr0, 0, 0, "tok", keep));     // index 0 is taken
  EXPECT_TRUE(hello(addr0, 2, 2, "tok", keep));
  EXPECT_TRUE(hello(addr0, 1, 1, "tok", keep));
  keep.clear();  // hang up: rank 0 sees a closed peer, not a hang
  auto t = rank0.get();  // the set-up completed with the three good streams
  EXPECT_EQ(t->name(), "tcp");
}

TEST(TcpSetup, RanksThatDisagreeOnStreamsGetAConfigError) {
  StoreServer server({.token = "tok"});
  auto run = [&](int rank, int streams) {
    Store s({.port = server.port(), .token = "tok"});
    make_tcp_transport(s, {.rank = rank, .size = 2, .token = "tok", .prefix = "m",
                           .connect_timeout = 10000ms, .streams = streams});
  };
  auto r1 = std::async(std::launch::async, run, 1, 2);
  try {
    run(0, 1);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("BRAID_TCP_STREAMS"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1: 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(r1.get(), ConfigError);
}

// Connections that never say hello (a port scanner, a stale client) must not
// hold up the ranks' own: the acceptor handshakes each connection by itself.
// Before, it took one at a time with 10 s each, and this set-up took 20 s.
TEST(TcpSetup, SilentConnectionsDoNotDelayTheRanks) {
  StoreServer server({.token = "tok"});
  auto rank = [&](int r) {
    Store s({.port = server.port(), .token = "tok"});
    return make_tcp_transport(s, {.rank = r, .size = 2, .token = "tok", .prefix = "q", .connect_timeout = 30000ms});
  };
  auto rank0 = std::async(std::launch::async, rank, 0);
  Store s({.port = server.port(), .token = "tok"});
  s.wait({"q/tcp/0"}, Deadline::after(10s));
  const std::string advert = s.get("q/tcp/0", Deadline::after(10s));
  auto [host, port] = net::split_host_port(advert.substr(0, advert.rfind('/')));
  std::vector<net::Fd> silent;
  for (int i = 0; i < 2; ++i) silent.push_back(net::connect_to(host, port, Deadline::after(10s), "silent"));
  std::this_thread::sleep_for(50ms);  // rank 0 has accepted them by now
  const auto t0 = Clock::now();
  auto t1 = rank(1);
  auto t0_transport = rank0.get();
  const double took = seconds_since(t0);
  EXPECT_LT(took, 2.0) << "set-up took " << took << " s with two silent connections open";
  EXPECT_EQ(t1->name(), "tcp");
  EXPECT_EQ(t0_transport->name(), "tcp");
}

TEST(TcpSetup, StreamsOutOfRangeIsConfigError) {
  StoreServer server({.token = "tok"});
  Store s({.port = server.port(), .token = "tok"});
  for (int streams : {0, kMaxTcpStreams + 1})
    EXPECT_THROW(make_tcp_transport(s, {.rank = 0, .size = 1, .token = "tok", .streams = streams}), ConfigError);
}

}  // namespace
}  // namespace braid::comm
