#include "braid/comm/transport/stream.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "braid/base/deadline.h"
#include "braid/base/error.h"
#include "braid/base/log.h"

namespace braid::comm {

namespace {

// Sends at most this large are tried inline: send() copies what the channel
// takes at once in the caller (no hand-off to the sender thread) and queues
// the rest; larger ones always go to the sender thread, so send() never
// spends long on a copy.
constexpr size_t kInlineSend = 1 << 20;
// How long the destructor waits for queued sends to leave, and then for the
// peer to hang up too (a peer still busy computing just gets our end of stream).
constexpr auto kFlushGrace = std::chrono::seconds(5);
constexpr auto kHangupGrace = std::chrono::seconds(1);
// A thread waiting for a transfer with a peer reads that peer's channel
// itself for this long before it sleeps and leaves reading to the background
// reader: a wake-up costs more than a short message takes to arrive.
constexpr auto kPollFor = std::chrono::microseconds(100);
// The background reader stays off a channel that was polled this recently, so
// the peer's writes do not wake it while callers read for themselves.
constexpr auto kStandAside = std::chrono::milliseconds(5);
// How long the background reader blocks in one wait_readable() call.
constexpr auto kReaderNap = std::chrono::milliseconds(1000);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t now_ns() { return Clock::now().time_since_epoch() / std::chrono::nanoseconds(1); }

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

ConstBytes header_bytes(const Header& h) { return {reinterpret_cast<const std::byte*>(&h), sizeof h}; }

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
};

// The message being read from a channel, possibly over many partial reads by
// different threads (whoever holds the reader role).
struct Incoming {
  Header header;
  size_t header_got = 0;
  bool in_body = false;
  std::span<std::byte> body;  // where the payload goes
  size_t body_got = 0;
  // The payload's owner: a posted receive, or a message nobody asked for yet.
  std::optional<PostedRecv> target;
  std::shared_ptr<Unexpected> unexpected;
  std::unique_ptr<std::byte[]> discard;  // payload of a size mismatch, read and dropped
};

}  // namespace

struct StreamTransport::Peer : std::enable_shared_from_this<StreamTransport::Peer> {
  int me = 0, rank = 0;
  std::unique_ptr<Channel> ch;

  std::mutex send_mu;
  std::condition_variable send_cv;
  std::deque<PendingSend> queue;
  bool writing = false;
  bool stopping = false;

  std::mutex recv_mu;
  std::condition_variable closed_cv;
  std::unordered_map<uint64_t, std::deque<PostedRecv>> posted;
  std::unordered_map<uint64_t, std::deque<std::shared_ptr<Unexpected>>> unexpected;
  std::atomic<bool> reader_done{false};  // set under recv_mu

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

  void deliver(PostedRecv& r, const Unexpected& u, uint64_t tag) {
    if (u.pull.remote) {
      take_pull(r, u.pull);
      return;
    }
    if (u.size != r.buf.size()) {
      r.work.complete(size_mismatch(me, rank, tag, u.size, r.buf.size()));
      return;
    }
    if (u.size) std::memcpy(r.buf.data(), u.data.get(), u.size);
    r.work.complete();
  }

  // Copies a pulled payload out of the sender's buffer, then lets the sender go.
  void take_pull(PostedRecv& r, const Header& h) {
    std::exception_ptr err;
    if (h.size != r.buf.size()) {
      err = size_mismatch(me, rank, h.tag, h.size, r.buf.size());
    } else {
      try {
        ch->pull(r.buf, h.remote);
      } catch (const std::exception& e) {
        err = set_error(e.what());
      }
    }
    if (!get_error()) post({0, 0, 0, h.ack}, {}, Work());
    r.work.complete(err);
  }

  void acked(uint64_t id) {
    Work w;
    {
      std::lock_guard l(ack_mu);
      auto it = awaiting_ack.find(id);
      if (it == awaiting_ack.end()) return;
      w = it->second;
      awaiting_ack.erase(it);
    }
    w.complete();
  }

  void fail_awaiting_acks(std::exception_ptr err) {
    std::unordered_map<uint64_t, Work> failed;
    {
      std::lock_guard l(ack_mu);
      failed.swap(awaiting_ack);
    }
    for (auto& [id, w] : failed) w.complete(err);
  }

  void run_sender() {
    try {
      while (true) {
        PendingSend s;
        {
          std::unique_lock l(send_mu);
          send_cv.wait(l, [&] { return (!queue.empty() && !writing) || (stopping && queue.empty()); });
          if (queue.empty()) return;
          writing = true;
          s = queue.front();
        }
        ConstBytes h = header_bytes(s.header);
        if (s.done < h.size()) {
          ch->write(h.subspan(s.done), s.data);
        } else {
          ch->write({}, s.data.subspan(s.done - h.size()));
        }
        {
          std::lock_guard l(send_mu);
          queue.pop_front();
          writing = false;
        }
        send_cv.notify_all();
        s.work.complete();
      }
    } catch (const std::exception& e) {
      auto err = set_error(e.what());
      std::deque<PendingSend> failed;
      {
        std::lock_guard l(send_mu);
        failed.swap(queue);
        writing = false;
        stopping = true;
      }
      send_cv.notify_all();
      for (auto& s : failed) s.work.complete(err);
      fail_awaiting_acks(err);
    }
  }

  // --- reading (callers hold `role`) ---

  // Reads whatever has arrived, completing the messages it finishes. Returns
  // false once the channel is finished (closed or broken).
  bool drain() {
    if (reader_done) return false;
    try {
      while (true) {
        if (!in.in_body) {
          auto h = std::span(reinterpret_cast<std::byte*>(&in.header), sizeof(Header)).subspan(in.header_got);
          size_t n = ch->try_read(h);
          if (n == Channel::kClosed) {
            if (in.header_got != 0) fail<PeerError>("rank {} hung up inside a message header", rank);
            finish(set_error("the peer closed the connection"));
            return false;
          }
          if (n == 0) return true;
          in.header_got += n;
          if (in.header_got == sizeof(Header)) start_body();
        } else {
          size_t n = ch->try_read(in.body.subspan(in.body_got));
          if (n == Channel::kClosed) {
            fail<PeerError>("rank {} hung up after {} of {} bytes", rank, in.body_got, in.body.size());
          }
          if (n == 0) return true;
          in.body_got += n;
          if (in.body_got == in.body.size()) finish_body();
        }
      }
    } catch (const std::exception& e) {
      finish(set_error(e.what()));
      return false;
    }
  }

  // A header is complete: decide where its payload goes.
  void start_body() {
    const Header& h = in.header;
    if (h.remote == 0 && h.ack != 0) {  // the ack of one of our pulls
      in.header_got = 0;
      acked(h.ack);
      return;
    }
    if (h.remote != 0) {  // a pull: no payload in the channel
      start_pull(h);
      return;
    }
    std::unique_lock l(recv_mu);
    auto it = posted.find(h.tag);
    if (it != posted.end() && !it->second.empty()) {
      in.target = std::move(it->second.front());
      it->second.pop_front();
      l.unlock();
      if (in.target->buf.size() == h.size) {
        in.body = in.target->buf;  // straight into the user's buffer
      } else {
        in.discard = std::make_unique_for_overwrite<std::byte[]>(h.size);
        in.body = {in.discard.get(), h.size};
      }
    } else {
      auto u = std::make_shared<Unexpected>();
      u->size = h.size;
      u->data = std::make_unique_for_overwrite<std::byte[]>(h.size);
      unexpected[h.tag].push_back(u);
      l.unlock();
      in.unexpected = u;
      in.body = {u->data.get(), h.size};
    }
    in.in_body = true;
    in.body_got = 0;
    if (h.size == 0) finish_body();
  }

  void start_pull(const Header& h) {
    in.header_got = 0;
    std::unique_lock l(recv_mu);
    auto it = posted.find(h.tag);
    if (it != posted.end() && !it->second.empty()) {
      PostedRecv r = std::move(it->second.front());
      it->second.pop_front();
      l.unlock();
      take_pull(r, h);
      return;
    }
    auto u = std::make_shared<Unexpected>();
    u->size = h.size;
    u->pull = h;
    u->complete = true;
    unexpected[h.tag].push_back(std::move(u));
  }

  void finish_body() {
    in.in_body = false;
    in.header_got = 0;
    const uint64_t tag = in.header.tag;
    if (in.target) {
      PostedRecv r = std::move(*in.target);
      in.target.reset();
      if (in.discard) {
        in.discard.reset();
        r.work.complete(size_mismatch(me, rank, tag, in.header.size, r.buf.size()));
      } else {
        r.work.complete();
      }
      return;
    }
    auto u = std::move(in.unexpected);
    std::optional<PostedRecv> waiter;
    {
      std::lock_guard l(recv_mu);
      u->complete = true;
      waiter = std::move(u->waiter);
    }
    if (waiter) deliver(*waiter, *u, tag);
  }

  // The channel is finished: fail what can no longer arrive.
  void finish(std::exception_ptr err) {
    std::vector<Work> failed;
    {
      std::lock_guard l(recv_mu);
      if (reader_done) return;
      for (auto& [tag, q] : posted)
        for (auto& r : q) failed.push_back(r.work);
      posted.clear();
      if (in.target) failed.push_back(in.target->work);
      if (in.unexpected && in.unexpected->waiter) failed.push_back(in.unexpected->waiter->work);
      in.target.reset();
      reader_done = true;
    }
    closed_cv.notify_all();
    park_cv.notify_all();
    for (auto& w : failed) w.complete(err);
    fail_awaiting_acks(err);
  }

  // While threads poll this peer they read for themselves; the background
  // reader parks so the peer's writes do not wake it for nothing. It comes
  // back when polling stops for kStandAside or a poller gives up and sleeps.
  bool stand_aside() {
    auto aside = [&] {
      return sleepers.load() == 0 &&
             (pollers.load() > 0 || now_ns() - last_poll.load() < std::chrono::nanoseconds(kStandAside).count());
    };
    std::unique_lock l(park_mu);
    if (!aside() || reader_done) return false;
    park_cv.wait_for(l, kStandAside, [&] { return sleepers.load() > 0 || reader_done; });
    return true;
  }

  void run_reader() {
    while (!reader_done) {
      if (stand_aside()) continue;
      try {
        if (!ch->wait_readable(kReaderNap)) continue;
      } catch (const std::exception& e) {
        std::lock_guard r(role);
        finish(set_error(e.what()));
        break;
      }
      std::unique_lock r(role, std::try_to_lock);
      if (!r) {
        if (sleepers.load() == 0) continue;  // a poller is reading; stand aside next round
        r.lock();
      }
      drain();
    }
  }

  // Waits for `work` (a transfer with this peer), reading the channel in this
  // thread while that is likely to pay off. The helper of receive Works.
  void poll_then_wait(const Work& work, Deadline deadline) {
    if (!work.done()) {
      pollers.fetch_add(1);
      const auto until = Clock::now() + kPollFor;
      for (unsigned i = 1; !work.done(); ++i) {
        if (role.try_lock()) {
          drain();
          role.unlock();
          if (work.done()) break;
        }
        if (i % 64 == 0) {
          if (Clock::now() >= until) break;
          std::this_thread::yield();
        } else {
          cpu_relax();
        }
      }
      last_poll.store(now_ns());
      if (!work.done()) {
        {
          std::lock_guard l(park_mu);
          sleepers.fetch_add(1);
        }
        pollers.fetch_sub(1);
        park_cv.notify_all();
        struct Leave {
          std::atomic<int>& n;
          ~Leave() { n.fetch_sub(1); }
        } leave{sleepers};
        work.sleep_until_done(deadline);
        return;
      }
      pollers.fetch_sub(1);
    }
  }

  Work send(uint64_t tag, ConstBytes data) {
    Work work(fmt::format("rank {} send to rank {} (tag {}, {} bytes)", me, rank, tag, data.size()));
    if (ch->pull_min() == 0 || data.size() < ch->pull_min()) return post({tag, data.size()}, data, work);
    // Only a header goes out; the work completes when the peer has pulled
    // the payload and acked, which we read like any message.
    uint64_t id;
    {
      std::lock_guard l(ack_mu);
      id = next_pull++;
      awaiting_ack.emplace(id, work);
    }
    work.help_with([self = weak_from_this()](const Work& w, Deadline d) {
      if (auto p = self.lock()) p->poll_then_wait(w, d);
    });
    Work header = post({tag, data.size(), reinterpret_cast<uintptr_t>(data.data()), id}, {}, Work());
    if (header.done() && header.error()) {
      {
        std::lock_guard l(ack_mu);
        awaiting_ack.erase(id);
      }
      work.complete(header.error());
    }
    return work;
  }

  // Writes header + data (inline when the channel takes it at once, else
  // through the sender thread); `work` completes once it is written.
  Work post(Header header, ConstBytes data, Work work) {
    auto failed = [&](std::exception_ptr err) {
      work.complete(err);
      return work;
    };
    if (auto err = get_error()) return failed(err);
    PendingSend s{header, data, 0, work};
    std::unique_lock l(send_mu);
    if (stopping) {
      l.unlock();
      return failed(set_error("transport is closing"));
    }
    if (queue.empty() && !writing && data.size() <= kInlineSend) {
      writing = true;
      l.unlock();
      size_t n = 0;
      std::exception_ptr err;
      try {
        n = ch->try_write(header_bytes(s.header), data);
      } catch (const std::exception& e) {
        err = set_error(e.what());
      }
      l.lock();
      writing = false;
      if (err) {
        l.unlock();
        send_cv.notify_all();
        return failed(err);
      }
      if (n == sizeof(Header) + data.size()) {
        // Wake the sender thread only if a send queued behind ours (or the
        // closer waits for us): an idle wake-up per message costs more than
        // the message.
        const bool wake = !queue.empty() || stopping;
        l.unlock();
        if (wake) send_cv.notify_all();
        work.complete();
        return work;
      }
      s.done = n;
      queue.push_front(s);  // sends posted meanwhile queue behind the remainder
    } else {
      queue.push_back(s);
    }
    l.unlock();
    send_cv.notify_all();
    return work;
  }

  Work recv(uint64_t tag, std::span<std::byte> buf) {
    PostedRecv r{buf, Work(fmt::format("rank {} recv from rank {} (tag {}, {} bytes)", me, rank, tag, buf.size()))};
    r.work.help_with([self = weak_from_this()](const Work& w, Deadline d) {
      if (auto p = self.lock()) p->poll_then_wait(w, d);
    });
    std::unique_lock l(recv_mu);
    auto it = unexpected.find(tag);
    if (it != unexpected.end() && !it->second.empty()) {
      auto u = it->second.front();
      it->second.pop_front();
      if (!u->complete) {
        u->waiter = r;
        return r.work;
      }
      l.unlock();
      deliver(r, *u, tag);
      return r.work;
    }
    if (reader_done) return Work::completed(get_error());
    posted[tag].push_back(r);
    return r.work;
  }

  // Phase 1 of closing: flush queued sends (until `by`), then hang up our write side.
  void close_write_side(Clock::time_point by) {
    {
      std::unique_lock l(send_mu);
      stopping = true;
      send_cv.notify_all();
      // Let queued sends reach the peer before we hang up.
      send_cv.wait_until(l, by, [&] { return queue.empty() && !writing; });
    }
    // Peers may still be pulling from our buffers: wait for their acks.
    while (Clock::now() < by && !get_error()) {
      {
        std::lock_guard l(ack_mu);
        if (awaiting_ack.empty()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    try {
      ch->close_write();
    } catch (const std::exception&) {
    }
  }

  // Phase 2: wait (until `by`) for the peer to hang up too, then stop the threads.
  void finish_close(Clock::time_point by) {
    {
      // Wait for the peer to close its side too, so nothing it sent is cut off.
      std::unique_lock l(recv_mu);
      closed_cv.wait_until(l, by, [&] { return reader_done.load(); });
    }
    ch->shutdown();
    park_cv.notify_all();
    if (sender.joinable()) sender.join();
    if (reader.joinable()) reader.join();
  }
};

void Channel::pull(std::span<std::byte>, uint64_t) {
  fail<PeerError>("this channel cannot pull payloads from the peer's memory");
}

StreamTransport::StreamTransport(std::string name, int rank, int size,
                                 std::vector<std::unique_ptr<Channel>> channels)
    : name_(std::move(name)), rank_(rank), size_(size) {
  BRAID_CHECK_EQ(channels.size(), static_cast<size_t>(size));
  peers_.resize(size);
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    BRAID_CHECK(channels[p] != nullptr, "no channel to rank {}", p);
    auto peer = std::make_shared<Peer>();
    peer->me = rank;
    peer->rank = p;
    peer->ch = std::move(channels[p]);
    peers_[p] = std::move(peer);
  }
  for (auto& p : peers_) {
    if (!p) continue;
    p->sender = std::thread([q = p.get()] { q->run_sender(); });
    p->reader = std::thread([q = p.get()] { q->run_reader(); });
  }
}

// The graces are shared by all peers, not per peer: a rank that finishes while
// many peers are still busy leaves after one grace, not one per peer.
StreamTransport::~StreamTransport() {
  const auto flushed_by = Clock::now() + kFlushGrace;
  for (auto& p : peers_)
    if (p) p->close_write_side(flushed_by);
  const auto hung_up_by = Clock::now() + kHangupGrace;
  for (auto& p : peers_)
    if (p) p->finish_close(hung_up_by);
}

StreamTransport::Peer& StreamTransport::peer(int p, const char* op) {
  if (p < 0 || p >= size_ || p == rank_) {
    fail<ValueError>("rank {}: {} to rank {} (world size {}, {} does not send to itself)", rank_, op,
                     p, size_, name_);
  }
  return *peers_[p];
}

Work StreamTransport::send(int p, uint64_t tag, std::span<const std::byte> data) {
  return peer(p, "send").send(tag, data);
}

Work StreamTransport::recv(int p, uint64_t tag, std::span<std::byte> data) {
  return peer(p, "recv").recv(tag, data);
}



}  // namespace braid::comm
