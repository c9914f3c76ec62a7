// Store server + client: the operations, deadlines, token and frame bounds.
#include <gtest/gtest.h>

#include <asio.hpp>
#include <thread>

#include "braid/base/error.h"
#include "braid/comm/store/protocol.h"
#include "braid/comm/store/rendezvous.h"
#include "braid/comm/store/server.h"
#include "braid/comm/store/store.h"

namespace braid::comm {
namespace {

using namespace std::chrono_literals;

struct StoreFixture : ::testing::Test {
  StoreServer server{{.token = "secret"}};
  StoreOptions opts(std::string token = "secret") {
    return {.port = server.port(), .token = std::move(token), .connect_timeout = 2000ms,
            .timeout = 2000ms, .who = "rank 0"};
  }
};

TEST_F(StoreFixture, SetGetAddDelete) {
  Store s(opts());
  s.set("a", "1");
  EXPECT_EQ(s.get("a"), "1");
  EXPECT_EQ(s.try_get("missing", s.deadline()), std::nullopt);
  EXPECT_EQ(s.add("n", 5), 5);
  EXPECT_EQ(s.add("n", -2), 3);
  EXPECT_TRUE(s.remove("a"));
  EXPECT_FALSE(s.remove("a"));
  EXPECT_EQ(s.try_get("a", s.deadline()), std::nullopt);
  std::string big(1 << 20, 'x');  // values up to max_frame travel intact
  s.set("big", big);
  EXPECT_EQ(s.get("big"), big);
}

TEST_F(StoreFixture, CompareSet) {
  Store s(opts());
  EXPECT_EQ(s.compare_set("k", "", "first", s.deadline()), "first");   // missing matches ""
  EXPECT_EQ(s.compare_set("k", "wrong", "x", s.deadline()), "first");  // no swap
  EXPECT_EQ(s.compare_set("k", "first", "second", s.deadline()), "second");
}

TEST_F(StoreFixture, AddIsAtomicAcrossClients) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      Store s(opts());
      for (int i = 0; i < 100; ++i) s.add("count", 1);
    });
  }
  for (auto& t : threads) t.join();
  Store s(opts());
  EXPECT_EQ(s.get("count"), "400");
}

TEST_F(StoreFixture, GetWaitsForAnotherClient) {
  Store reader(opts());
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    Store w(opts());
    w.set("late", "here");
  });
  EXPECT_EQ(reader.get("late", Deadline::after(2s)), "here");
  writer.join();
}

TEST_F(StoreFixture, WaitTimesOutNamingMissingKeys) {
  Store s(opts());
  s.set("present", "1");
  auto t0 = Clock::now();
  try {
    s.wait({"present", "absent/3"}, Deadline::after(200ms));
    FAIL() << "no timeout";
  } catch (const TimeoutError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("absent/3"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("present"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  }
  EXPECT_LT(seconds_since(t0), 1.5);
  s.set("after", "ok");  // the connection still works after a timed-out wait
  EXPECT_EQ(s.get("after"), "ok");
}

TEST_F(StoreFixture, WrongTokenRejectedOthersServed) {
  Store good(opts());
  EXPECT_THROW(Store bad(opts("not-the-token")), PeerError);
  EXPECT_GE(server.rejected(), 1);
  good.set("still", "works");
  EXPECT_EQ(good.get("still"), "works");
}

TEST_F(StoreFixture, OversizedFrameRejectedOthersServed) {
  Store good(opts());
  // A raw, authenticated client that announces a 1 GiB frame.
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  sock.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server.port())});
  std::array<std::byte, store::kNonceBytes> nonce;
  asio::read(sock, asio::buffer(nonce));
  auto mac = store::auth_mac("secret", "braid-store", nonce);
  asio::write(sock, asio::buffer(mac));
  std::array<uint8_t, 1> ok{};
  asio::read(sock, asio::buffer(ok));
  ASSERT_EQ(ok[0], store::kAuthOk);
  auto prefix = store::length_prefix(1u << 30);
  asio::write(sock, asio::buffer(prefix));
  // The server answers with an error frame naming the limit, then closes.
  std::array<std::byte, 4> hdr;
  asio::read(sock, asio::buffer(hdr));
  std::string body(store::read_length(hdr), '\0');
  asio::read(sock, asio::buffer(body));
  auto resp = store::decode(body);
  EXPECT_EQ(resp.head, static_cast<uint8_t>(store::Status::kError));
  ASSERT_EQ(resp.fields.size(), 1u);
  EXPECT_NE(resp.fields[0].find("exceeds"), std::string::npos);
  asio::error_code ec;
  char c;
  sock.read_some(asio::buffer(&c, 1), ec);
  EXPECT_TRUE(ec);  // closed
  EXPECT_GE(server.rejected(), 1);
  good.set("k", "v");
  EXPECT_EQ(good.get("k"), "v");
}

TEST(StoreConnect, UnreachableServerTimesOut) {
  auto t0 = Clock::now();
  StoreOptions o{.port = 1, .token = "t", .connect_timeout = 300ms, .who = "rank 5"};
  try {
    Store s(o);
    FAIL() << "connected to port 1";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 5"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 2.0);
}

// A rank that never publishes (it never started, or the store refused its
// token): the others' timeout names it as a rank, not as a store key.
TEST_F(StoreFixture, ExchangeTimeoutNamesTheRanksThatNeverCame) {
  Store s0(opts()), s1(opts());
  std::thread one([&] {
    try {
      exchange(s1, "job/tcp", 1, 4, "host1", Deadline::after(300ms));
    } catch (const TimeoutError&) {
    }
  });
  try {
    exchange(s0, "job/tcp", 0, 4, "host0", Deadline::after(300ms));
    FAIL() << "exchange completed without ranks 2 and 3";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0: ranks [2, 3] never published 'job/tcp'"), std::string::npos)
        << e.what();
  }
  one.join();
}

TEST_F(StoreFixture, ExchangeAndAgreeConfig) {
  const int n = 3;
  std::vector<std::vector<std::string>> got(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Store s(opts());
      got[r] = exchange(s, "addr", r, n, fmt::format("host{}", r), s.deadline());
      agree_config(s, "ok", r, n, "same", s.deadline());
      try {
        agree_config(s, "bad", r, n, r == 2 ? "digest-b" : "digest-a", s.deadline());
      } catch (const ConfigError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(got[r], (std::vector<std::string>{"host0", "host1", "host2"}));
    EXPECT_NE(errors[r].find("ranks [2] disagree"), std::string::npos) << errors[r];
  }
}

TEST_F(StoreFixture, HeartbeatDetectsSilentRank) {
  Store s(opts());
  auto alive = std::make_unique<Heartbeat>(s, "job", 0, 20ms);
  HeartbeatMonitor monitor("job", 2, 150ms);  // rank 1 never beats
  std::this_thread::sleep_for(60ms);
  monitor.dead_ranks(s, s.deadline());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(monitor.dead_ranks(s, s.deadline()), std::vector<int>{1});
  alive.reset();  // rank 0 stops beating
  monitor.dead_ranks(s, s.deadline());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(monitor.dead_ranks(s, s.deadline()), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace braid::comm
