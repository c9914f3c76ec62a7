// Fuzzes what a stream transport (tcp, shm) reads from a peer after the
// handshake: frame headers (tag, size, pull address, ack) and payloads,
// matched against receives posted before, between and after the bytes arrive.
//
// Input: u8 receives to post first | per receive: u8 tag, u16 size |
//        u8 read size | the peer's bytes.
// The peer's bytes are read in pieces of the read size; between pieces a
// receive of the next tag in turn is posted, so messages meet posted receives,
// arrive early, or meet a receive of another size. Checked besides the
// contract (fuzz.h): the early bytes the transport holds for the peer never
// pass its max_message.
#include <deque>
#include <memory>
#include <vector>

#include "braid/comm/transport/stream_peer.h"
#include "fuzz/fuzz.h"

namespace {

using braid::comm::Channel;
using braid::comm::ConstBytes;

// The peer's side of the channel: replays the input in pieces, with an empty
// read after each piece, then reports that the peer closed. Writes (acks) are
// dropped; pulls copy a pattern, as a shm peer's memory would supply bytes.
class ReplayChannel final : public Channel {
 public:
  ReplayChannel(std::span<const std::byte> bytes, size_t piece) : left_(bytes), piece_(piece) {}

  size_t try_write(ConstBytes a, ConstBytes b) override { return a.size() + b.size(); }
  void write(ConstBytes, ConstBytes) override {}
  size_t try_read(std::span<std::byte> out) override {
    if (left_.empty()) return kClosed;
    if (pause_) {
      pause_ = false;
      return 0;
    }
    const size_t n = std::min({out.size(), left_.size(), piece_});
    if (n) std::memcpy(out.data(), left_.data(), n);
    left_ = left_.subspan(n);
    pause_ = true;
    return n;
  }
  bool wait_readable(std::chrono::milliseconds) override { return true; }
  size_t pull_min() const override { return 1; }
  void pull(std::span<std::byte> dst, uint64_t remote) override {
    if (!dst.empty()) std::memset(dst.data(), static_cast<int>(remote & 0xff), dst.size());
  }
  void close_write() override {}
  void shutdown() override {}
  bool paused() const { return !left_.empty(); }

 private:
  std::span<const std::byte> left_;
  size_t piece_;
  bool pause_ = false;
};

constexpr uint64_t kMaxMessage = uint64_t{1} << 20;  // small, so the bound is easy to reach

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::fuzz::Input in(data, size);
  struct Posted {
    uint64_t tag;
    std::vector<std::byte> buf;
  };
  std::deque<Posted> receives;  // stable addresses: the transport writes into them
  std::vector<braid::comm::Work> works;
  const int first = in.take<uint8_t>() % 8;
  for (int i = 0; i < first; ++i) {
    const uint64_t tag = in.take<uint8_t>() % 4;
    const size_t n = in.take<uint16_t>() % 4096;
    receives.push_back({tag, std::vector<std::byte>(n)});
  }
  const size_t piece = 1 + in.take<uint8_t>();

  auto channel = std::make_unique<ReplayChannel>(in.rest(), piece);
  ReplayChannel* replay = channel.get();
  auto peer = std::make_shared<braid::comm::StreamTransport::Peer>();
  peer->name = "fuzz";
  peer->me = 0;
  peer->rank = 1;
  peer->max_message = kMaxMessage;
  peer->ch = std::move(channel);

  auto post = [&](Posted& r) { works.push_back(peer->recv(r.tag, r.buf)); };
  for (auto& r : receives) post(r);
  uint64_t next_tag = 0;
  while (true) {
    bool open;
    {
      std::lock_guard role(peer->role);
      open = peer->drain();
    }
    {
      std::lock_guard l(peer->recv_mu);
      if (peer->early_bytes > kMaxMessage) __builtin_trap();  // the bound did not hold
    }
    if (!open || !replay->paused()) break;
    receives.push_back({next_tag++ % 4, std::vector<std::byte>(64)});
    post(receives.back());
  }
  // Late receives claim whatever arrived early.
  for (uint64_t tag = 0; tag < 4; ++tag) {
    receives.push_back({tag, std::vector<std::byte>(64)});
    post(receives.back());
  }
  for (const auto& w : works) (void)w.done();
  peer->finish(peer->set_error("fuzz input ended"));
  return 0;
}
