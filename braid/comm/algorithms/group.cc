#include "braid/comm/algorithms/group.h"

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

void Group::wait(const Work& work, int peer) {
  try {
    work.wait(deadline_);
  } catch (const TimeoutError&) {
    throw PeerTimeout(fmt::format("{}: no progress from rank {} ({})", collective_.what(), peer, work.what()),
                      peer);
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
