// Closing a StreamTransport: sends still queued to a peer that takes no data
// (SIGSTOPped, hung) must not hold the closing rank, which is where a failed
// rank's error waits to be printed; sends to a peer that reads still arrive.
// Before, the destructor flushed to a stopped peer for 5 s and then waited
// 1 s for it to hang up: a gossip rank printed its 3 s timeout 9.3 s after
// its neighbour was stopped (fault matrix, gossip_stop).
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <numeric>
#include <thread>

#include "braid/base/deadline.h"
#include "braid/base/error.h"
#include "braid/comm/transport/stream.h"
#include "braid/comm/transport/tcp_channel.h"

namespace braid::comm {
namespace {

using namespace std::chrono_literals;

// Rank `me` of 2 over one end of a socketpair.
std::unique_ptr<StreamTransport> over(int me, int fd) {
  std::vector<std::unique_ptr<Channel>> ch(2);
  ch[1 - me] = std::make_unique<TcpChannel>(net::Fd(fd));
  return std::make_unique<StreamTransport>("tcp", me, 2, std::move(ch));
}

std::pair<int, int> socket_pair() {
  int sv[2];
  BRAID_CHECK_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  return {sv[0], sv[1]};
}

TEST(StreamClose, APeerThatTakesNoDataIsCutOffNotWaitedFor) {
  auto [a, b] = socket_pair();
  net::Fd silent(b);  // the stopped peer: connected, never reads, never hangs up
  auto t = over(0, a);
  std::vector<std::byte> big(size_t{32} << 20);  // far past the socket's buffer
  Work w = t->send(1, 7, big);
  EXPECT_THROW(w.wait(Deadline::after(200ms)), TimeoutError);  // stuck: the peer reads nothing
  const auto t0 = Clock::now();
  t.reset();
  const double took = seconds_since(t0);
  EXPECT_LT(took, 1.5) << "closing waited " << took << " s for a peer that took no data";
  EXPECT_THROW(w.wait(Deadline::after(1s)), PeerError);  // the queued send failed, it did not vanish
}

TEST(StreamClose, QueuedSendsStillReachAPeerThatReads) {
  auto [a, b] = socket_pair();
  auto receiver = over(1, b);
  std::vector<float> sent(size_t{16} << 20), got(sent.size());  // 64 MiB: many kStallGrace-free slices
  std::iota(sent.begin(), sent.end(), 0.0f);
  Work r = receiver->recv(0, 7, std::as_writable_bytes(std::span(got)));
  {
    auto sender = over(0, a);
    sender->send(1, 7, std::as_bytes(std::span(sent)));
  }  // closes at once, with the send queued
  r.wait(Deadline::after(10s));
  EXPECT_EQ(got, sent);
}

}  // namespace
}  // namespace braid::comm
