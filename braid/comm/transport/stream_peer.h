// StreamTransport internals shared by stream.cc (sending, closing, the
// transport) and stream_read.cc (the reader role, waiting, receiving): the
// wire header, the per-peer state and its tuning constants.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "braid/base/deadline.h"
#include "braid/base/error.h"
#include "braid/comm/transport/stream.h"

namespace braid::comm::stream_detail {

// Sends at most this large are tried inline: send() copies what the channel
// takes at once in the caller (no hand-off to the sender thread) and queues
// the rest; larger ones always go to the sender thread, so send() never
// spends long on a copy.
constexpr size_t kInlineSend = 1 << 20;
// How long the destructor waits for queued sends to leave, and then for the
// peer to hang up too (a peer still busy computing just gets our end of stream).
constexpr auto kFlushGrace = std::chrono::seconds(5);
constexpr auto kHangupGrace = std::chrono::seconds(1);
// A peer whose queued sends (or awaited pull acks) make no progress for this
// long while the destructor flushes is taken for dead (stopped, hung, its
// link down): its connection is aborted and it is not waited for. Before, a
// SIGSTOPped peer held every rank that had sends queued to it for the whole
// kFlushGrace after its own timeout had already failed the job.
constexpr auto kStallGrace = std::chrono::milliseconds(500);
// The sender thread writes a message in slices this large (bytes), each one
// progress that closing sees: 4 MiB per kStallGrace is 8 MB/s, slower than
// any link a job runs on.
constexpr size_t kWriteSlice = size_t{4} << 20;
// The background reader stays off a channel that was polled this recently, so
// the peer's writes do not wake it while callers read for themselves.
constexpr auto kStandAside = std::chrono::milliseconds(5);
// How long the background reader blocks in one wait_readable() call.
constexpr auto kReaderNap = std::chrono::milliseconds(1000);
// A payload that does not fit its posted receive is read through a scratch
// buffer this large and dropped, so its header never sizes an allocation.
constexpr size_t kDiscardChunk = size_t{64} << 10;
// What an early message costs besides its payload (its queue entry and
// bookkeeping, bytes), charged against the peer's bound so that a stream of
// empty or pulled messages under fresh tags is bounded too.
constexpr uint64_t kEarlyEntryCost = 128;

inline int64_t now_ns() { return Clock::now().time_since_epoch() / std::chrono::nanoseconds(1); }

// Removes and returns the oldest entry queued under `tag` in `queues`, if
// any, and drops the tag's queue once it is empty: tags carry sequence
// numbers, so otherwise the map grows with every collective.
template <class Queues>
std::optional<typename Queues::mapped_type::value_type> pop_oldest(Queues& queues, uint64_t tag) {
  auto it = queues.find(tag);
  if (it == queues.end() || it->second.empty()) return std::nullopt;
  auto oldest = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues.erase(it);
  return oldest;
}

// remote == 0, ack == 0: `size` payload bytes follow.
// remote != 0: a pull; the payload is at `remote` in the sender, which waits
//              for an ack carrying `ack` before it reuses the buffer.
// remote == 0, ack != 0: the ack of the sender's pull `ack`.
struct Header {
  uint64_t tag;
  uint64_t size;
  uint64_t remote = 0;
  uint64_t ack = 0;
};

inline ConstBytes header_bytes(const Header& h) { return {reinterpret_cast<const std::byte*>(&h), sizeof h}; }

struct PendingSend {
  Header header;
  ConstBytes data;
  size_t done = 0;  // bytes of header + data already written
  Work work;
};

struct PostedRecv {
  std::span<std::byte> buf;
  Work work;
};

// A message that arrived before its receive was posted.
struct Unexpected {
  std::unique_ptr<std::byte[]> data;
  size_t size = 0;
  Header pull{};  // pull.remote != 0: nothing was copied, the payload is still with the sender
  bool complete = false;
  std::optional<PostedRecv> waiter;  // a recv that claimed it while it was still arriving
  uint64_t charged = 0;              // its share of the peer's early_bytes
};

// The message being read from a channel, possibly over many partial reads by
// different threads (whoever holds the reader role).
struct Incoming {
  Header header;
  size_t header_got = 0;
  bool in_body = false;
  std::span<std::byte> body;  // where the payload goes (unused while discarding)
  uint64_t body_got = 0;
  // The payload's owner: a posted receive, or a message nobody asked for yet.
  std::optional<PostedRecv> target;
  std::shared_ptr<Unexpected> unexpected;
  // The payload does not fit the posted receive: it is read into `scratch`
  // (kDiscardChunk bytes, allocated on first use) and dropped.
  bool discarding = false;
  std::unique_ptr<std::byte[]> scratch;
};

}  // namespace braid::comm::stream_detail

namespace braid::comm {

struct StreamTransport::Peer : std::enable_shared_from_this<StreamTransport::Peer> {
  using Header = stream_detail::Header;
  using PendingSend = stream_detail::PendingSend;
  using PostedRecv = stream_detail::PostedRecv;
  using Unexpected = stream_detail::Unexpected;
  using Incoming = stream_detail::Incoming;

  std::string name;  // the transport's ("tcp", "shm"), for messages
  int me = 0, rank = 0;
  std::unique_ptr<Channel> ch;
  // Bound on `early_bytes` (transport.h, kDefaultMaxMessage).
  uint64_t max_message = kDefaultMaxMessage;

  std::mutex send_mu;
  std::condition_variable send_cv;
  std::deque<PendingSend> queue;
  bool writing = false;
  bool stopping = false;
  // Sends written and pull acks received so far: what closing watches for progress.
  std::atomic<uint64_t> progress{0};
  bool aborted = false;  // closing gave up on the peer (set by the closing thread only)

  std::mutex recv_mu;
  std::condition_variable closed_cv;
  std::unordered_map<uint64_t, std::deque<PostedRecv>> posted;
  std::unordered_map<uint64_t, std::deque<std::shared_ptr<Unexpected>>> unexpected;
  std::atomic<bool> reader_done{false};  // set under recv_mu
  // Bytes charged for early messages that no receive has claimed yet (under
  // recv_mu): payloads plus kEarlyEntryCost each.
  uint64_t early_bytes = 0;

  // The reader role: whoever holds it reads the channel into `in`. The
  // background reader takes it when nobody else reads; threads waiting for a
  // transfer with this peer take it to read for themselves (wait()).
  std::mutex role;
  Incoming in;
  std::atomic<int> pollers{0};     // threads polling the channel now
  std::atomic<int> sleepers{0};    // threads that stopped polling and sleep on a Work
  std::atomic<int64_t> last_poll{0};  // now_ns() when a poller last stopped
  std::mutex park_mu;
  std::condition_variable park_cv;
  // Pulled sends waiting for the peer's ack (their buffers are still in use).
  std::mutex ack_mu;
  std::unordered_map<uint64_t, Work> awaiting_ack;
  uint64_t next_pull = 1;

  std::mutex err_mu;
  std::exception_ptr error;  // set once the channel broke; later ops fail with it

  std::thread sender, reader;

  std::exception_ptr get_error() {
    std::lock_guard l(err_mu);
    return error;
  }
  std::exception_ptr set_error(const std::string& why) {
    std::lock_guard l(err_mu);
    if (!error) {
      error = std::make_exception_ptr(
          PeerError(fmt::format("rank {}: connection to rank {} lost: {}", me, rank, why)));
    }
    return error;
  }

  static std::exception_ptr size_mismatch(int me, int from, uint64_t tag, size_t got, size_t want) {
    return std::make_exception_ptr(PeerError(fmt::format(
        "rank {}: message from rank {} with tag {} has {} bytes, the receive expects {}", me, from,
        tag, got, want)));
  }

  void deliver(PostedRecv& r, const Unexpected& u, uint64_t tag);

  // Copies a pulled payload out of the sender's buffer, then lets the sender go.
  void take_pull(PostedRecv& r, const Header& h);

  void acked(uint64_t id);

  void fail_awaiting_acks(std::exception_ptr err);

  void run_sender();

  // --- reading (callers hold `role`) ---

  // Reads whatever has arrived, completing the messages it finishes. Returns
  // false once the channel is finished (closed or broken).
  bool drain();

  // A header is complete: decide where its payload goes.
  void start_body();

  void start_pull(const Header& h);

  // An early message with `payload` bytes to buffer is about to be kept:
  // PeerError when it would take the peer past max_message, else adds and
  // returns its cost. Caller holds recv_mu.
  uint64_t charge_early(const Header& h, uint64_t payload);
  // Where the next payload bytes go: the body, or scratch while discarding.
  std::span<std::byte> body_window();

  void finish_body();

  // The channel is finished: fail what can no longer arrive.
  void finish(std::exception_ptr err);

  // While threads poll this peer they read for themselves; the background
  // reader parks so the peer's writes do not wake it for nothing. It comes
  // back when polling stops for kStandAside or a poller gives up and sleeps.
  bool stand_aside();

  void run_reader();

  // Waits for `work` (a transfer with this peer), reading the channel in this
  // thread while that is likely to pay off. The helper of receive Works.
  void poll_then_wait(const Work& work, Deadline deadline);
  // Makes waiting for `work` read this peer's channel (poll_then_wait).
  void poll_while_waiting(const Work& work);

  Work send(uint64_t tag, ConstBytes data);

  // Writes header + data (inline when the channel takes it at once, else
  // through the sender thread); `work` completes once it is written.
  Work post(Header header, ConstBytes data, Work work);

  Work recv(uint64_t tag, std::span<std::byte> buf);

  // Closing, phase 1 (StreamTransport's destructor drives all peers at once):
  // no new sends; flushed() once queued sends are written and pulls acked.
  void begin_close();
  bool flushed();
  // Then hang up our write side (flushed), or cut the connection (stalled).
  void close_write_side();
  void abort();

  // Phase 2: wait (until `by`) for the peer to hang up too, then stop the
  // threads. An aborted peer is not waited for.
  void finish_close(Clock::time_point by);
};

}  // namespace braid::comm
