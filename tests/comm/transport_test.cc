// tcp and shm transports with ranks as threads in one process (real sockets
// and real shared memory), through the registry. "tcp3" is tcp with 3
// streams per peer (striped_channel.h).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "braid/base/error.h"
#include "braid/comm/store/server.h"
#include "braid/comm/transport/registry.h"
#include "braid/comm/transport/tcp.h"
#include "tests/comm/p2p_check.h"
#include "tests/comm/thread_ranks.h"

namespace braid::comm {
namespace {

using namespace std::chrono_literals;

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  StoreServer server{{.token = "tok"}};
  // "tcp3" -> the registry name "tcp"; 3 tcp streams.
  std::string transport_name() const { return GetParam() == "tcp3" ? "tcp" : GetParam(); }
  testing::Group make_group(int n, std::string prefix) {
    const int streams = GetParam() == "tcp3" ? 3 : 1;
    return testing::make_thread_group(n, [&](int r) {
      Store store({.port = server.port(), .token = "tok", .who = fmt::format("rank {}", r)});
      return make_transport(transport_name(), &store,
                            {.rank = r, .size = n, .token = "tok", .prefix = prefix, .tcp_streams = streams,
                             .shm_ring_bytes = 1 << 16, .connect_timeout = 10000ms});
    });
  }
};

TEST_P(TransportTest, ConformanceTwoToFourRanks) {
  for (int n : {2, 3, 4}) {
    auto group = make_group(n, fmt::format("c{}", n));
    EXPECT_EQ(group[0]->name(), transport_name());
    testing::run_on_ranks(group, [](Transport& t) { testing::run_p2p_checks(t, Deadline::after(30s)); });
  }
}

TEST_P(TransportTest, LargeMessageBothWays) {
  // 8 MiB each way at once: larger than a ring, receives posted late.
  auto g = make_group(2, "big");
  std::vector<std::vector<std::byte>> out(2, std::vector<std::byte>(8 << 20)), in = out;
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < out[r].size(); ++i) out[r][i] = std::byte(i * 7 + r);
  testing::run_on_ranks(g, [&](Transport& t) {
    int r = t.rank();
    auto s = t.send(1 - r, 1, out[r]);
    std::this_thread::sleep_for(20ms);
    t.recv(1 - r, 1, in[r]).wait(Deadline::after(20s));
    s.wait(Deadline::after(20s));
  });
  EXPECT_EQ(in[0], out[1]);
  EXPECT_EQ(in[1], out[0]);
}

TEST_P(TransportTest, ManyThreadsWaitOnOnePeerAtOnce) {
  // Four threads of rank 1 wait on receives from rank 0 at the same time, so
  // they and the background reader contend for the channel; sizes include 0
  // and one large enough to be pulled over shm (cross-memory attach),
  // and half of each tag's messages arrive before their receive is posted.
  constexpr int kTags = 4, kPerTag = 200;
  const size_t sizes[] = {0, 1, 1000, 300000};  // 300000: pulled on shm
  auto fill = [](int tag, int i, size_t n) {
    std::vector<std::byte> v(n);
    for (size_t k = 0; k < n; ++k) v[k] = std::byte((tag * 31 + i * 7 + k) & 0xff);
    return v;
  };
  auto g = make_group(2, "many");
  std::vector<std::vector<std::byte>> out;
  for (int i = 0; i < kPerTag; ++i)
    for (int tag = 0; tag < kTags; ++tag) out.push_back(fill(tag, i, sizes[(tag + i) % 4]));
  std::vector<Work> sends;
  std::thread sender([&] {
    for (int i = 0; i < kPerTag; ++i)
      for (int tag = 0; tag < kTags; ++tag) sends.push_back(g[0]->send(1, tag, out[i * kTags + tag]));
    for (auto& w : sends) w.wait(Deadline::after(30s));
  });
  std::atomic<int> bad{0};
  std::vector<std::thread> receivers;
  for (int tag = 0; tag < kTags; ++tag) {
    receivers.emplace_back([&, tag] {
      for (int i = 0; i < kPerTag; ++i) {
        if (i == kPerTag / 2) std::this_thread::sleep_for(20ms);  // let messages pile up
        std::vector<std::byte> in(sizes[(tag + i) % 4]);
        g[1]->recv(0, tag, in).wait(Deadline::after(30s));
        if (in != fill(tag, i, in.size())) ++bad;
      }
    });
  }
  sender.join();
  for (auto& t : receivers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_P(TransportTest, SizeMismatchIsPeerError) {
  auto g = make_group(2, "m");
  std::vector<std::byte> a(10), b(11);
  auto s = g[0]->send(1, 3, a);
  auto r = g[1]->recv(0, 3, b);
  s.wait(Deadline::after(5s));
  EXPECT_THROW(r.wait(Deadline::after(5s)), PeerError);
  // The pair keeps working after the mismatch.
  std::vector<std::byte> c(5), e(5);
  auto s2 = g[0]->send(1, 4, c);
  g[1]->recv(0, 4, e).wait(Deadline::after(5s));
  s2.wait(Deadline::after(5s));
}

TEST_P(TransportTest, SendToSelfOrOutOfRangeIsValueError) {
  auto g = make_group(2, "v");
  std::vector<std::byte> a(4);
  EXPECT_THROW(g[0]->send(0, 1, a), ValueError);
  EXPECT_THROW(g[0]->recv(2, 1, a), ValueError);
}

TEST_P(TransportTest, ClosedPeerFailsPendingRecvNamingRank) {
  auto g = make_group(2, "d");
  std::vector<std::byte> buf(16);
  auto r = g[0]->recv(1, 9, buf);
  g[1].reset();  // rank 1 goes away
  try {
    r.wait(Deadline::after(10s));
    FAIL() << "recv completed";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g[0]->send(1, 9, buf).wait(Deadline::after(5s)), PeerError);
}

TEST_P(TransportTest, RecvWithNoSenderTimesOut) {
  auto g = make_group(2, "t");
  std::vector<std::byte> buf(16);
  auto t0 = Clock::now();
  EXPECT_THROW(g[0]->recv(1, 77, buf).wait(Deadline::after(100ms)), TimeoutError);
  EXPECT_LT(seconds_since(t0), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest, ::testing::Values("tcp", "tcp3", "shm"),
                         [](const auto& info) { return info.param; });

TEST(Registry, UnknownNameListsKnownOnes) {
  try {
    make_transport("carrier-pigeon", nullptr, {});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tcp"), std::string::npos) << e.what();
  }
}

TEST(Tcp, WrongTokenPeerIsRejected) {
  for (int streams : {1, 3}) {
    SCOPED_TRACE(fmt::format("{} streams", streams));
    StoreServer server({.token = "tok"});
    std::exception_ptr err0, err1;
    auto run = [&](int rank, std::string token, std::exception_ptr& err) {
      try {
        Store s({.port = server.port(), .token = "tok"});
        make_tcp_transport(s, {.rank = rank, .size = 2, .token = token, .prefix = "w",
                               .connect_timeout = 1500ms, .streams = streams});
      } catch (...) {
        err = std::current_exception();
      }
    };
    std::thread t0(run, 0, "tok", std::ref(err0));
    std::thread t1(run, 1, "forged", std::ref(err1));
    t0.join();
    t1.join();
    EXPECT_THROW(std::rethrow_exception(err0), TimeoutError);  // rank 1 never got in
    EXPECT_THROW(std::rethrow_exception(err1), PeerError);     // and was told why
  }
}

}  // namespace
}  // namespace braid::comm
