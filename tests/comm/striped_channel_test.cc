// StripedChannel over socketpairs: one ordered stream over K sub-channels,
// with slices small enough that messages straddle many of them, a writer and
// a reader thread at once, and small socket buffers so writes are partial.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>
#include <tuple>

#include "braid/base/deadline.h"
#include "braid/base/error.h"
#include "braid/comm/transport/striped_channel.h"
#include "tests/testing/first_error.h"

namespace braid::comm {
namespace {

using namespace std::chrono_literals;

struct Pair {
  std::unique_ptr<StripedChannel> a, b;
  std::vector<net::Fd> a_fds;  // dups of a's sub-channel sockets, to break one
};

// K socketpairs; a and b see the sub-channels in the same order.
Pair make_pair(int k, size_t slice, int sockbuf = 4096) {
  Pair p;
  std::vector<std::unique_ptr<TcpChannel>> as, bs;
  for (int i = 0; i < k; ++i) {
    int sv[2];
    BRAID_CHECK_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    for (int fd : sv) {
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof sockbuf);
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof sockbuf);
    }
    p.a_fds.emplace_back(::dup(sv[0]));
    as.push_back(std::make_unique<TcpChannel>(net::Fd(sv[0])));
    bs.push_back(std::make_unique<TcpChannel>(net::Fd(sv[1])));
  }
  p.a = std::make_unique<StripedChannel>(std::move(as), slice);
  p.b = std::make_unique<StripedChannel>(std::move(bs), slice);
  return p;
}

std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& x : v) x = std::byte(rng() & 0xff);
  return v;
}

// Reads until kClosed; fails past the deadline.
std::vector<std::byte> read_all(Channel& c, size_t max_read, uint32_t seed, Deadline d) {
  std::mt19937 rng(seed);
  std::vector<std::byte> got, buf(max_read);
  while (true) {
    const size_t want = 1 + rng() % max_read;
    const size_t n = c.try_read(std::span(buf).first(want));
    if (n == Channel::kClosed) return got;
    if (n == 0) {
      if (d.expired()) fail<TimeoutError>("read_all: stalled after {} bytes", got.size());
      c.wait_readable(100ms);
      continue;
    }
    EXPECT_LE(n, want);
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(n));
  }
}

class Striped : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(Striped, RandomMessagesArriveInOrderThenClosed) {
  const auto [k, slice] = GetParam();
  // Message sizes around the slice edges, and some that span many slices.
  const size_t total = slice < 64 ? (size_t{512} << 10) : (size_t{8} << 20);
  const auto stream = pattern(total, 7);
  std::mt19937 rng(11);
  std::vector<size_t> sizes;
  for (size_t sent = 0; sent < total;) {
    const size_t pick[] = {0, 1, slice - 1, slice, slice + 1, 3 * slice + 2, rng() % (20 * slice + 1),
                           rng() % (size_t{200} << 10)};
    const size_t n = std::min(total - sent, pick[rng() % 8]);
    sizes.push_back(n);
    sent += n;
  }
  auto p = make_pair(k, slice);
  const Deadline d = Deadline::after(60s);
  std::vector<std::byte> got;
  test::run_threads_first_error(
      2,
      [&](int who) {
        if (who == 1) {
          got = read_all(*p.b, 3 * slice + 5, 13, d);
          return;
        }
        std::mt19937 wr(17);
        size_t at = 0;
        for (size_t n : sizes) {
          // Split each message in two parts at a random point, as a header
          // and its payload are.
          const size_t cut = n ? wr() % (n + 1) : 0;
          ConstBytes a(stream.data() + at, cut), b(stream.data() + at + cut, n - cut);
          if (wr() % 2) {
            const size_t done = p.a->try_write(a, b);
            ASSERT_LE(done, n);
            // The rest goes blocking (the stream transport's sender thread).
            const size_t from_a = std::min(done, a.size());
            p.a->write(a.subspan(from_a), b.subspan(done - from_a));
          } else {
            p.a->write(a, b);
          }
          at += n;
        }
        p.a->close_write();
      },
      [&] {
        p.a->shutdown();
        p.b->shutdown();
      });
  ASSERT_EQ(got.size(), stream.size());
  EXPECT_TRUE(got == stream) << "the stream arrived out of order or corrupted";
  // And it stays closed.
  std::byte one[1];
  EXPECT_EQ(p.b->try_read(one), Channel::kClosed);
}

INSTANTIATE_TEST_SUITE_P(KAndSlice, Striped,
                         ::testing::Values(std::tuple{3, size_t{7}}, std::tuple{3, size_t{4096}},
                                           std::tuple{1, size_t{7}}, std::tuple{2, size_t{256} << 10}),
                         [](const auto& info) {
                           return fmt::format("k{}_slice{}", std::get<0>(info.param), std::get<1>(info.param));
                         });

TEST(StripedChannel, TryWriteStopsAtAFullSubChannel) {
  // Nobody reads: try_write fills sub-channels in order until one is full,
  // returns what it wrote, and never blocks.
  auto p = make_pair(3, 1000);
  std::vector<std::byte> big(size_t{1} << 20);
  const size_t n = p.a->try_write({}, big);
  EXPECT_GT(n, 0u);
  EXPECT_LT(n, big.size());
  // What was written arrives, in order, before anything written later.
  std::vector<std::byte> in(n);
  size_t got = 0;
  const Deadline d = Deadline::after(10s);
  while (got < n && !d.expired()) {
    const size_t r = p.b->try_read(std::span(in).subspan(got));
    ASSERT_NE(r, Channel::kClosed);
    if (r == 0) p.b->wait_readable(100ms);
    got += r;
  }
  EXPECT_EQ(got, n);
}

TEST(StripedChannel, ShutdownWakesAWaitingReader) {
  auto p = make_pair(3, 7);
  std::thread closer([&] {
    std::this_thread::sleep_for(50ms);
    p.b->shutdown();
  });
  const auto t0 = Clock::now();
  EXPECT_TRUE(p.b->wait_readable(10000ms));
  EXPECT_LT(seconds_since(t0), 5.0);
  std::byte one[1];
  EXPECT_EQ(p.b->try_read(one), Channel::kClosed);
  closer.join();
}

TEST(StripedChannel, AWaiterFollowsTheReaderToTheNextSubChannel) {
  // StreamTransport's background reader waits while callers read: here W
  // waits, R reads slice 0 (the next byte is then on sub-channel 1), and the
  // peer writes slice 1. W must see it at once, not sleep on sub-channel 0
  // until its timeout.
  auto p = make_pair(3, 7);
  std::atomic<int> phase{1};
  std::atomic<double> seen_after{-1};
  Clock::time_point written;
  std::thread w([&] {
    const Deadline d = Deadline::after(5s);
    while (!d.expired()) {
      if (p.b->wait_readable(5000ms) && phase.load() == 2) {
        seen_after = seconds_since(written);
        return;
      }
    }
  });
  std::this_thread::sleep_for(50ms);  // W waits on sub-channel 0
  std::thread r([&] {
    std::byte buf[7];
    size_t got = 0;
    const Deadline d = Deadline::after(5s);
    while (got < 7 && !d.expired()) got += p.b->try_read(std::span(buf).subspan(got));  // spins, as a poller
  });
  std::vector<std::byte> slice(7);
  p.a->write({}, slice);
  r.join();
  std::this_thread::sleep_for(50ms);
  written = Clock::now();
  phase = 2;
  p.a->write({}, slice);
  w.join();
  EXPECT_GE(seen_after.load(), 0.0) << "the waiter never saw slice 1";
  EXPECT_LT(seen_after.load(), 1.0);
}

TEST(StripedChannel, ABrokenSubChannelBreaksTheWholeStream) {
  // a's sub-channel 1 dies. a's reader waits on sub-channel 0, where the
  // peer sends nothing; the write that meets the dead sub-channel must wake
  // it, and the peer's writes on the live sub-channels must fail too.
  auto p = make_pair(3, 7);
  ::shutdown(p.a_fds[1].get(), SHUT_WR);
  std::thread reader([&] {
    const auto t0 = Clock::now();
    EXPECT_TRUE(p.a->wait_readable(10000ms));
    EXPECT_LT(seconds_since(t0), 5.0);
    std::byte one[1];
    EXPECT_EQ(p.a->try_read(one), Channel::kClosed);
  });
  std::this_thread::sleep_for(20ms);
  std::vector<std::byte> msg(10);  // slice 0 on sub-channel 0, then sub-channel 1
  EXPECT_THROW(p.a->write({}, msg), PeerError);
  reader.join();
  EXPECT_THROW(p.b->write({}, msg), PeerError);
}

}  // namespace
}  // namespace braid::comm
