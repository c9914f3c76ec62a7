#include "braid/comm/transport/striped_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "braid/base/deadline.h"
#include "braid/base/error.h"

namespace braid::comm {

namespace {

// Drops the first n bytes of the pair a, b.
void drop(ConstBytes& a, ConstBytes& b, size_t n) {
  const size_t from_a = std::min(n, a.size());
  a = a.subspan(from_a);
  b = b.subspan(n - from_a);
}

}  // namespace

StripedChannel::StripedChannel(std::vector<std::unique_ptr<TcpChannel>> subs, size_t slice_bytes)
    : subs_(std::move(subs)), slice_(slice_bytes), write_left_(slice_bytes), read_left_(slice_bytes),
      wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  BRAID_CHECK(!subs_.empty(), "a striped channel needs at least one sub-channel");
  BRAID_CHECK(slice_ > 0, "slice of {} bytes", slice_);
  for (auto& s : subs_) BRAID_CHECK(s != nullptr, "null sub-channel");
  if (!wake_) fail<IoError>("eventfd: {}", std::strerror(errno));
}

template <class Op>
auto StripedChannel::on_sub(size_t sub, Op&& op) {
  try {
    return op(*subs_[sub]);
  } catch (...) {
    // The peer may be waiting on another sub-channel: make it see the break.
    shutdown();
    throw;
  }
}

size_t StripedChannel::try_write(ConstBytes a, ConstBytes b) {
  size_t total = 0;
  while (!a.empty() || !b.empty()) {
    // The part of a, b that belongs to the current slice.
    ConstBytes pa = a.first(std::min(a.size(), write_left_));
    ConstBytes pb = b.first(std::min(b.size(), write_left_ - pa.size()));
    const size_t n = on_sub(write_sub_, [&](Channel& c) { return c.try_write(pa, pb); });
    total += n;
    drop(a, b, n);
    write_left_ -= n;
    if (write_left_ == 0) {
      write_sub_ = (write_sub_ + 1) % subs_.size();
      write_left_ = slice_;
    }
    // A full sub-channel: the rest must wait for it (the order is fixed).
    if (n < pa.size() + pb.size()) break;
  }
  return total;
}

void StripedChannel::write(ConstBytes a, ConstBytes b) {
  while (!a.empty() || !b.empty()) {
    ConstBytes pa = a.first(std::min(a.size(), write_left_));
    ConstBytes pb = b.first(std::min(b.size(), write_left_ - pa.size()));
    on_sub(write_sub_, [&](Channel& c) { c.write(pa, pb); });
    const size_t n = pa.size() + pb.size();
    drop(a, b, n);
    write_left_ -= n;
    if (write_left_ == 0) {
      write_sub_ = (write_sub_ + 1) % subs_.size();
      write_left_ = slice_;
    }
  }
}

void StripedChannel::next_read_sub() {
  read_left_ = slice_;
  read_sub_.store((read_sub_.load(std::memory_order_relaxed) + 1) % subs_.size());
  // Pairs with wait_readable: either it sees the new sub-channel, or we see
  // it waiting and kick it (both sides seq_cst).
  if (waiters_.load() > 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
  }
}

size_t StripedChannel::try_read(std::span<std::byte> out) {
  size_t got = 0;
  while (got < out.size()) {
    const size_t sub = read_sub_.load(std::memory_order_relaxed);
    auto want = out.subspan(got, std::min(out.size() - got, read_left_));
    const size_t n = on_sub(sub, [&](Channel& c) { return c.try_read(want); });
    // The writer closes every sub-channel after its last byte, so an end on
    // the sub-channel that carries the next byte is the end of the stream.
    if (n == kClosed) return got > 0 ? got : kClosed;
    if (n == 0) break;
    got += n;
    read_left_ -= n;
    if (read_left_ == 0) next_read_sub();
  }
  return got;
}

bool StripedChannel::wait_readable(std::chrono::milliseconds timeout) {
  const Deadline d = Deadline::after(timeout);
  waiters_.fetch_add(1);
  struct Leave {
    std::atomic<int>& n;
    ~Leave() { n.fetch_sub(1); }
  } leave{waiters_};
  while (true) {
    pollfd p[2] = {{subs_[read_sub_.load()]->fd(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(d.remaining());
    const int n = ::poll(p, 2, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (n < 0 && errno != EINTR) fail<PeerError>("poll: {}", std::strerror(errno));
    // POLLHUP/POLLERR count as readable: try_read then reports them.
    if (n > 0 && p[0].revents) return true;
    if (n > 0 && p[1].revents) {  // the reader moved on: wait on its new sub-channel
      uint64_t kicks;
      [[maybe_unused]] ssize_t r = ::read(wake_.get(), &kicks, sizeof kicks);
      continue;
    }
    if (d.expired()) return false;
  }
}

void StripedChannel::close_write() {
  for (auto& s : subs_) s->close_write();
}

void StripedChannel::shutdown() {
  for (auto& s : subs_) s->shutdown();
}

}  // namespace braid::comm
