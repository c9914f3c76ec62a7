// StreamTransport: the Transport over one Channel per peer (channel.h).
//
// Wire format per message: u64 tag | u64 size | size bytes (host order; both
// ends are one build on one architecture). Per peer, a sender thread drains a
// queue of posted sends (small sends go out inline from send() when the
// channel takes them at once). Reading is a role: its holder reads whatever
// has arrived, each header and then the payload straight into the matching
// posted receive; a message with no receive posted yet goes to an
// "unexpected" buffer that a later recv() takes (one extra copy). A thread
// waiting for a receive (Work::wait) takes the role and reads for itself for a
// short while (no thread hand-off on the latency path, as MPI progresses in
// the caller); otherwise a background reader per peer holds it, and stands
// aside while callers poll.
// FIFO per (peer, tag) holds because one role holder at a time decides the
// match at header time.
//
// A broken channel fails every pending and later operation with that peer
// with a PeerError naming both ranks; operations with other peers go on.
//
// The peer's bytes are not trusted to size allocations: an early message is
// buffered only while the peer's early bytes stay within `max_message`
// (transport.h, kDefaultMaxMessage); a message that does not fit its posted
// receive is read through a fixed scratch buffer and dropped.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "braid/comm/transport/channel.h"
#include "braid/comm/transport/transport.h"

namespace braid::comm {

class StreamTransport : public Transport {
 public:
  // channels[peer] for every peer != rank (channels[rank] is null).
  StreamTransport(std::string name, int rank, int size,
                  std::vector<std::unique_ptr<Channel>> channels,
                  size_t max_message = kDefaultMaxMessage);
  // Flushes queued sends (up to a few seconds), closes, joins the threads.
  ~StreamTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  Work send(int peer, uint64_t tag, std::span<const std::byte> data) override;
  Work recv(int peer, uint64_t tag, std::span<std::byte> data) override;

  // A thread waiting for a transfer with a peer reads that peer's channel
  // itself for this long before it sleeps and leaves reading to the background
  // reader: a wake-up costs more than a short message takes to arrive.
  // (braid sim models waiting receivers with it.)
  static constexpr std::chrono::microseconds kPollFor{100};

  struct Peer;

 private:
  Peer& peer(int p, const char* op);
  std::string name_;
  int rank_, size_;
  std::vector<std::shared_ptr<Peer>> peers_;  // shared with the helpers of posted Works
};

}  // namespace braid::comm
