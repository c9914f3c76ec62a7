// The fault-injecting wrapper over a real transport (shm, ranks as threads).
#include <gtest/gtest.h>

#include "braid/base/error.h"
#include "braid/comm/store/server.h"
#include "braid/comm/transport/faulty.h"
#include "braid/comm/transport/registry.h"
#include "tests/comm/thread_ranks.h"

namespace braid::comm {
namespace {

using namespace std::chrono_literals;

struct FaultyFixture : ::testing::Test {
  StoreServer server{{.token = "tok"}};
  testing::Group group(int n, FaultPlan plan_for_rank0) {
    return testing::make_thread_group(n, [&](int r) -> std::unique_ptr<Transport> {
      Store store({.port = server.port(), .token = "tok"});
      auto inner = make_transport("shm", &store, {.rank = r, .size = n, .prefix = "f",
                                                  .shm_ring_bytes = 1 << 16});
      return std::make_unique<FaultyTransport>(std::move(inner), r == 0 ? plan_for_rank0 : FaultPlan{});
    });
  }
};

TEST_F(FaultyFixture, DelayedSendsArriveLateInOrder) {
  auto g = group(2, {.send_delay = 60ms});
  EXPECT_EQ(g[0]->name(), "faulty+shm");
  std::vector<std::byte> a(100, std::byte{1}), b(100, std::byte{2}), x(100), y(100);
  auto t0 = Clock::now();
  auto s1 = g[0]->send(1, 5, a);
  auto s2 = g[0]->send(1, 5, b);
  EXPECT_FALSE(s1.done());
  g[1]->recv(0, 5, x).wait(Deadline::after(5s));
  g[1]->recv(0, 5, y).wait(Deadline::after(5s));
  EXPECT_GE(seconds_since(t0), 0.055);
  EXPECT_EQ(x, a);
  EXPECT_EQ(y, b);
  s1.wait(Deadline::after(5s));
  s2.wait(Deadline::after(5s));
}

TEST_F(FaultyFixture, BandwidthLimitQueuesSendsPerLink) {
  // 1 MB/s: ten 50 kB sends to rank 1 take 0.5 s end to end; one to rank 2,
  // posted after them, has its own link and arrives after ~50 ms. Only lower
  // bounds and an ordering are asserted, with wide margins (loaded machines).
  auto g = group(3, {.link_bytes_per_s = 1e6});
  const size_t n = 50'000;
  std::vector<std::vector<std::byte>> out(10, std::vector<std::byte>(n, std::byte{3})), in(10, std::vector<std::byte>(n));
  std::vector<std::byte> side(n, std::byte{4}), side_in(n);
  auto t0 = Clock::now();
  std::vector<Work> sends, recvs;
  for (int i = 0; i < 10; ++i) sends.push_back(g[0]->send(1, 9, out[i]));
  sends.push_back(g[0]->send(2, 9, side));
  for (int i = 0; i < 10; ++i) recvs.push_back(g[1]->recv(0, 9, in[i]));
  g[2]->recv(0, 9, side_in).wait(Deadline::after(5s));
  EXPECT_GE(seconds_since(t0), 0.045);
  EXPECT_FALSE(recvs.back().done()) << "the link to rank 2 waited for the link to rank 1";
  recvs.front().wait(Deadline::after(5s));
  recvs.back().wait(Deadline::after(5s));
  EXPECT_GE(seconds_since(t0), 0.495);
  EXPECT_EQ(in.back(), out.back());
  EXPECT_EQ(side_in, side);
  for (auto& s : sends) s.wait(Deadline::after(5s));
}

TEST_F(FaultyFixture, CutPeerFailsAtOnceOthersUnaffected) {
  auto g = group(3, {.cut = {2}});
  std::vector<std::byte> buf(8), in(8);
  try {
    g[0]->send(2, 1, buf).wait(Deadline::after(1s));
    FAIL();
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g[0]->recv(2, 1, buf).wait(Deadline::after(1s)), PeerError);
  auto s = g[0]->send(1, 1, buf);
  g[1]->recv(0, 1, in).wait(Deadline::after(5s));
  s.wait(Deadline::after(5s));
}

TEST_F(FaultyFixture, DroppedMessageIsOnlyATimeoutForTheReceiver) {
  // Buffers outlive the group: a posted receive may be filled until it closes.
  std::vector<std::byte> buf(8, std::byte{7}), in(8);
  auto g = group(2, {.drop_to = {1}});
  g[0]->send(1, 1, buf).wait(Deadline::after(1s));  // the sender sees success
  auto r = g[1]->recv(0, 1, in);
  EXPECT_THROW(r.wait(Deadline::after(100ms)), TimeoutError);
  // Healing the partition: the next message lands in the receive that is
  // still posted.
  auto* f = dynamic_cast<FaultyTransport*>(g[0].get());
  f->set_plan({});
  EXPECT_EQ(f->plan().drop_to.size(), 0u);
  g[0]->send(1, 1, buf).wait(Deadline::after(1s));
  r.wait(Deadline::after(5s));
  EXPECT_EQ(in, buf);
}

}  // namespace
}  // namespace braid::comm
