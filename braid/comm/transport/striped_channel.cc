#include "braid/comm/transport/striped_channel.h"

#include <algorithm>

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

StripedChannel::StripedChannel(std::vector<std::unique_ptr<Channel>> subs, size_t slice_bytes)
    : subs_(std::move(subs)), slice_(slice_bytes) {
  BRAID_CHECK(!subs_.empty(), "a striped channel needs at least one sub-channel");
  BRAID_CHECK(slice_ > 0, "slice of {} bytes", slice_);
  for (auto& s : subs_) BRAID_CHECK(s != nullptr, "null sub-channel");
  write_at_.left = read_at_.left = slice_;
}

void StripedChannel::advance(Cursor& c, size_t n) const {
  c.left -= n;
  if (c.left == 0) {
    c.sub = (c.sub + 1) % subs_.size();
    c.left = slice_;
  }
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
    ConstBytes pa = a.first(std::min(a.size(), write_at_.left));
    ConstBytes pb = b.first(std::min(b.size(), write_at_.left - pa.size()));
    const size_t n = on_sub(write_at_.sub, [&](Channel& c) { return c.try_write(pa, pb); });
    total += n;
    advance(write_at_, n);
    drop(a, b, n);
    // A full sub-channel: the rest must wait for it (the order is fixed).
    if (n < pa.size() + pb.size()) break;
  }
  return total;
}

void StripedChannel::write(ConstBytes a, ConstBytes b) {
  while (!a.empty() || !b.empty()) {
    ConstBytes pa = a.first(std::min(a.size(), write_at_.left));
    ConstBytes pb = b.first(std::min(b.size(), write_at_.left - pa.size()));
    on_sub(write_at_.sub, [&](Channel& c) { c.write(pa, pb); });
    const size_t n = pa.size() + pb.size();
    advance(write_at_, n);
    drop(a, b, n);
  }
}

size_t StripedChannel::try_read(std::span<std::byte> out) {
  size_t got = 0;
  while (got < out.size()) {
    auto want = out.subspan(got, std::min(out.size() - got, read_at_.left));
    const size_t n = on_sub(read_at_.sub, [&](Channel& c) { return c.try_read(want); });
    // The writer closes every sub-channel after its last byte, so an end on
    // the sub-channel that carries the next byte is the end of the stream.
    if (n == kClosed) return got > 0 ? got : kClosed;
    if (n == 0) break;
    got += n;
    advance(read_at_, n);
  }
  return got;
}

bool StripedChannel::wait_readable(std::chrono::milliseconds timeout) {
  return on_sub(read_at_.sub, [&](Channel& c) { return c.wait_readable(timeout); });
}

void StripedChannel::close_write() {
  for (auto& s : subs_) s->close_write();
}

void StripedChannel::shutdown() {
  for (auto& s : subs_) s->shutdown();
}

}  // namespace braid::comm
