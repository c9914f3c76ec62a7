// Hostile bytes on the wire (docs/reliability.md, "Hostile bytes"): a stream
// transport whose peer writes raw frames into a socketpair, and the store's
// request rules fed malformed requests. Each case was a way a peer's bytes
// could make braid allocate what they asked or run into undefined behaviour;
// the fuzz harnesses (fuzz/transport_frames.cc, fuzz/store_protocol.cc) look
// for more.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "braid/comm/store/protocol.h"
#include "braid/comm/store/requests.h"
#include "braid/comm/transport/stream.h"
#include "braid/comm/transport/stream_peer.h"
#include "braid/comm/transport/tcp_channel.h"
#include "tests/testing/error_message.h"

namespace braid::comm {
namespace {

using namespace std::chrono_literals;
using stream_detail::Header;

// Rank 0's tcp-like transport to rank 1, where rank 1 is this test writing
// bytes into the other end of a socketpair.
struct RawPeer {
  std::unique_ptr<StreamTransport> t;
  net::Fd raw;

  explicit RawPeer(size_t max_message) {
    int sv[2];
    BRAID_CHECK_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    raw = net::Fd(sv[1]);
    std::vector<std::unique_ptr<Channel>> channels(2);
    channels[1] = std::make_unique<TcpChannel>(net::Fd(sv[0]));
    t = std::make_unique<StreamTransport>("tcp", 0, 2, std::move(channels), max_message);
  }
  ~RawPeer() {
    ::shutdown(raw.get(), SHUT_RDWR);  // lets the transport's close finish at once
    t.reset();
  }
  // Writes a frame; gives up on what the transport stops reading (it
  // stops once it refused a frame), so the test never blocks on it.
  void send(uint64_t tag, uint64_t size, std::span<const std::byte> payload = {}) {
    const Header h{tag, size};
    write_all(std::as_bytes(std::span(&h, 1)));
    write_all(payload);
  }
  void write_all(std::span<const std::byte> b) {
    while (!b.empty()) {
      pollfd p{raw.get(), POLLOUT, 0};
      if (::poll(&p, 1, 500) != 1) return;
      const ssize_t n = ::send(raw.get(), b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n <= 0) return;
      b = b.subspan(static_cast<size_t>(n));
    }
  }
};

std::string recv_error(Transport& t, uint64_t tag, size_t n) {
  std::vector<std::byte> buf(n);
  return test::message_of<PeerError>([&] { t.recv(1, tag, buf).wait(Deadline::after(10s)); });
}

// Before the bound, an 8 GiB header with no receive posted made the reader
// allocate 8 GiB for a message that never comes.
TEST(HostileFrames, OversizedEarlyFrameFailsTheConnectionNamingPeerAndLimit) {
  RawPeer p(size_t{1} << 20);
  p.send(7, uint64_t{8} << 30);
  const std::string why = recv_error(*p.t, 9, 4);
  EXPECT_NE(why.find("tcp frame from rank 1 (tag 7): length 8192 MiB exceeds the 1 MiB limit"), std::string::npos) << why;
  EXPECT_NE(why.find("parallel.max_message_mib"), std::string::npos) << why;
}

TEST(HostileFrames, EarlyFramesAddingUpPastTheLimitFail) {
  RawPeer p(size_t{1} << 20);
  const std::vector<std::byte> chunk(400 << 10);
  for (uint64_t tag = 1; tag <= 3; ++tag) p.send(tag, chunk.size(), chunk);  // 1.2 MiB in all, no receive posted
  const std::string why = recv_error(*p.t, 99, 4);
  EXPECT_NE(why.find("would pass the 1 MiB limit"), std::string::npos) << why;
}

TEST(HostileFrames, EarlyFramesWithinTheLimitAreDeliveredAndReleased) {
  RawPeer p(size_t{1} << 20);
  const std::vector<std::byte> chunk(300 << 10, std::byte{5});
  // Three rounds of 900 KiB early: each round's receives release the bytes.
  for (int round = 0; round < 3; ++round) {
    for (uint64_t tag = 1; tag <= 3; ++tag) p.send(tag, chunk.size(), chunk);
    for (uint64_t tag = 1; tag <= 3; ++tag) {
      std::vector<std::byte> buf(chunk.size());
      p.t->recv(1, tag, buf).wait(Deadline::after(10s));
      EXPECT_EQ(buf, chunk);
    }
  }
}

// A frame larger than its posted receive used to be read into a buffer of the
// header's size; now it is read through a fixed scratch buffer and dropped,
// and the stream goes on.
TEST(HostileFrames, MismatchedFrameIsDroppedAndTheStreamGoesOn) {
  RawPeer p(size_t{1} << 20);
  std::vector<std::byte> small(4), next(3);
  Work w = p.t->recv(1, 5, small);
  const std::vector<std::byte> big(3 << 20, std::byte{1});  // past the limit: not buffered, only discarded
  p.send(5, big.size(), big);
  const std::vector<std::byte> abc{std::byte{'a'}, std::byte{'b'}, std::byte{'c'}};
  p.send(6, abc.size(), abc);
  const std::string why = test::message_of<PeerError>([&] { w.wait(Deadline::after(10s)); });
  EXPECT_NE(why.find("has 3145728 bytes, the receive expects 4"), std::string::npos) << why;
  p.t->recv(1, 6, next).wait(Deadline::after(10s));
  EXPECT_EQ(next, abc);
}

store::Decoded request(store::Op op, std::vector<std::string> fields) {
  return store::decode(store::encode(static_cast<uint8_t>(op), fields));
}

// kAdd summed two int64s unchecked: signed overflow, undefined behaviour.
TEST(HostileStoreRequests, AddThatOverflowsIsAnErrorAndLeavesTheCounter) {
  store::KeyValues kv;
  store::apply(kv, request(store::Op::kSet, {"c", "9223372036854775807"}));
  const store::Outcome out = store::apply(kv, request(store::Op::kAdd, {"c", "1"}));
  EXPECT_EQ(out.status, store::Status::kError);
  EXPECT_NE(out.fields.at(0).find("overflows"), std::string::npos) << out.fields.at(0);
  EXPECT_EQ(kv.map.at("c"), "9223372036854775807");
}

// An authenticated client could grow the map without limit.
TEST(HostileStoreRequests, WritesPastTheBoundAreRefusedAndTheCountStaysExact) {
  store::KeyValues kv;
  kv.max_bytes = 100;
  EXPECT_EQ(store::apply(kv, request(store::Op::kSet, {"a", std::string(60, 'x')})).status, store::Status::kOk);
  const store::Outcome full = store::apply(kv, request(store::Op::kSet, {"b", std::string(60, 'x')}));
  EXPECT_EQ(full.status, store::Status::kError);
  EXPECT_NE(full.fields.at(0).find("store full"), std::string::npos);
  EXPECT_FALSE(kv.map.contains("b"));
  EXPECT_EQ(store::apply(kv, request(store::Op::kSet, {"a", "short"})).status, store::Status::kOk);  // overwrite shrinks
  EXPECT_EQ(kv.bytes, 6u);
  store::apply(kv, request(store::Op::kDelete, {"a"}));
  EXPECT_EQ(kv.bytes, 0u);
}

// A 2^62 ms wait overflowed the server timer's nanoseconds.
TEST(HostileStoreRequests, EndlessWaitIsClampedToNever) {
  store::KeyValues kv;
  const store::Outcome out = store::apply(kv, request(store::Op::kWait, {"4611686018427387904", "k"}));
  ASSERT_EQ(out.kind, store::Outcome::Kind::wait);
  EXPECT_EQ(out.wait_ms, store::kMaxWaitMs);
}

// Empty fields cost 4 bytes on the wire and a std::string each decoded.
TEST(HostileStoreRequests, FrameOfTooManyFieldsIsRefused) {
  std::string payload(1, static_cast<char>(store::Op::kWait));
  payload.append(4 * (store::kMaxFields + 1), '\0');
  const std::string why = test::message_of<PeerError>([&] { store::decode(payload); });
  EXPECT_NE(why.find("more than 65536 fields"), std::string::npos) << why;
}

}  // namespace
}  // namespace braid::comm
