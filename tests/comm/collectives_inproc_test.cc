// The inproc transport: FIFO matching per (src, dst, tag), rendezvous
// semantics, size mismatch, shutdown; and the shared point-to-point checks.
#include <gtest/gtest.h>

#include <numeric>

#include "braid/base/error.h"
#include "braid/comm/transport/inproc.h"
#include "tests/comm/p2p_check.h"
#include "tests/comm/thread_ranks.h"

namespace braid::comm::testing {
using namespace std::chrono_literals;
namespace {

std::span<std::byte> bytes(std::vector<int>& v) { return std::as_writable_bytes(std::span(v)); }

TEST(Inproc, MatchesInPostingOrderPerTag) {
  auto world = InprocWorld::create(2);
  auto t = world->transports();
  std::vector<int> a{1, 2}, b{3, 4}, c{5, 6};
  Work s1 = t[0]->send(1, 7, bytes(a));
  Work s2 = t[0]->send(1, 7, bytes(b));
  Work s3 = t[0]->send(1, 8, bytes(c));
  EXPECT_FALSE(s1.done());  // rendezvous: nothing is buffered
  std::vector<int> x(2), y(2), z(2);
  Work r3 = t[1]->recv(0, 8, bytes(z));  // another tag may be taken first
  Work r1 = t[1]->recv(0, 7, bytes(x));
  Work r2 = t[1]->recv(0, 7, bytes(y));
  wait_all({s1, s2, s3, r1, r2, r3}, Deadline::after(5s));
  EXPECT_EQ(x, a);
  EXPECT_EQ(y, b);
  EXPECT_EQ(z, c);
}

TEST(Inproc, ReceiveSizeMismatchIsPeerError) {
  auto world = InprocWorld::create(2);
  auto t = world->transports();
  std::vector<int> a{1, 2, 3}, x(2);
  Work r = t[1]->recv(0, 1, bytes(x));
  Work s = t[0]->send(1, 1, bytes(a));
  EXPECT_THROW(r.wait(Deadline::after(5s)), PeerError);
  try {
    s.wait(Deadline::after(5s));
    FAIL() << "the send must fail too";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("12 bytes"), std::string::npos) << e.what();
  }
}

TEST(Inproc, UnmatchedReceiveTimesOutAndShutdownReleasesIt) {
  auto world = InprocWorld::create(3);
  auto t = world->transports();
  std::vector<int> x(4);
  Work r = t[2]->recv(1, 3, bytes(x));
  EXPECT_THROW(r.wait(Deadline::after(20ms)), TimeoutError);
  world->shutdown("test over");
  EXPECT_THROW(r.wait(Deadline::after(1s)), PeerError);
  EXPECT_THROW(t[0]->send(1, 0, {}).wait(Deadline::after(1s)), PeerError);
}

TEST(Inproc, RejectsBadPeers) {
  auto world = InprocWorld::create(2);
  auto t = world->transports();
  EXPECT_THROW(t[0]->send(0, 0, {}), ValueError);
  EXPECT_THROW(t[0]->recv(2, 0, {}), ValueError);
  EXPECT_THROW(world->transport(2), IndexError);
  EXPECT_THROW(InprocWorld::create(0), ValueError);
}

TEST(Inproc, PassesThePointToPointChecks) {
  for (int p : {2, 3, 5}) {
    auto world = InprocWorld::create(p);
    auto group = world->transports();
    on_threads(p, [&](int r) { run_p2p_checks(*group[r], Deadline::after(30s)); });
  }
}

}  // namespace
}  // namespace braid::comm::testing
