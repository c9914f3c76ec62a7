#include "braid/comm/algorithms/group.h"

#include "braid/base/trace.h"

namespace braid::comm {

std::span<std::byte> Scratch::get(size_t bytes) {
  if (buf_.size() < bytes) {
    buf_.clear();
    buf_.shrink_to_fit();
    buf_.resize(bytes);
  }
  return {buf_.data(), bytes};
}

Group::Group(Transport& transport, std::span<const int> members, int me, uint64_t tag_base,
             Deadline deadline, Scratch& scratch, Work collective)
    : transport_(transport), members_(members), me_(me), tag_base_(tag_base), deadline_(deadline),
      scratch_(scratch), collective_(std::move(collective)) {}

Work Group::send(int peer, std::span<const std::byte> data, uint16_t lane) {
  return transport_.send(members_[peer], tag_base_ | lane, data);
}

Work Group::recv(int peer, std::span<std::byte> data, uint16_t lane) {
  return transport_.recv(members_[peer], tag_base_ | lane, data);
}

namespace {

// Waits shorter than this are not worth a row in the timeline (a ring step
// over shared memory takes a few microseconds).
constexpr auto kTracedWait = std::chrono::microseconds(100);

// Records a wait on `peer` that lasted long enough to matter.
struct WaitSpan {
  trace::Recorder* recorder = trace::active();
  Clock::time_point start = recorder ? Clock::now() : Clock::time_point{};
  int peer;
  ~WaitSpan() {
    if (!recorder) return;
    const auto end = Clock::now();
    if (end - start < kTracedWait) return;
    trace::Args args;
    args.set("peer", peer);
    recorder->complete("wait", "wait on peer", start, end, args);
  }
};

}  // namespace

void Group::wait(const Work& work, int peer) {
  WaitSpan traced{.peer = peer};
  // Waits that can be aborted wake every kPoll to look at the flag: a healthy
  // transfer finishes long before, so the fast path is one wait as before.
  constexpr Duration kPoll = std::chrono::milliseconds(50);
  while (true) {
    if (abort_ && abort_->load(std::memory_order_acquire)) {
      const auto [failed, how] = describe_abort_();
      throw PeerAborted(fmt::format("{}: rank {} reported that it failed: {}", collective_.what(), failed, how),
                        failed);
    }
    try {
      work.wait(abort_ ? deadline_.min(Deadline::after(kPoll)) : deadline_);
      return;
    } catch (const TimeoutError&) {
      if (abort_ && !work.done() && !deadline_.expired()) continue;  // only the poll's slice ended
      if (work.done() && !work.error()) return;                      // finished just as the slice ended
      throw PeerTimeout(fmt::format("{}: no progress from rank {} ({})", collective_.what(), peer, work.what()),
                        peer);
    }
  }
}

void Group::sendrecv(int to, std::span<const std::byte> out, int from, std::span<std::byte> in,
                     uint16_t lane) {
  Work r = recv(from, in, lane);
  Work s = send(to, out, lane);
  wait(r, from);
  wait(s, to);
}

int floor_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace braid::comm
