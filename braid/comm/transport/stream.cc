#include "braid/comm/transport/stream.h"

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

// Sends at most this large are tried inline from send() (bytes); larger ones
// always go through the sender thread so send() never blocks on a copy.
constexpr size_t kInlineSend = 64 << 10;
// How long the destructor waits for queued sends to leave, and then for the
// peer to hang up too (a peer still busy computing just gets our end of stream).
constexpr auto kFlushGrace = std::chrono::seconds(5);
constexpr auto kHangupGrace = std::chrono::seconds(1);

struct Header {
  uint64_t tag;
  uint64_t size;
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
  bool complete = false;
  std::optional<PostedRecv> waiter;  // a recv that claimed it while it was still arriving
};

}  // namespace

struct StreamTransport::Peer {
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
  bool reader_done = false;
  // What the reader thread is filling right now, failed if the channel breaks.
  std::optional<PostedRecv> reading;
  std::shared_ptr<Unexpected> inflight;

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
    if (u.size != r.buf.size()) {
      r.work.complete(size_mismatch(me, rank, tag, u.size, r.buf.size()));
      return;
    }
    if (u.size) std::memcpy(r.buf.data(), u.data.get(), u.size);
    r.work.complete();
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
    }
  }

  void run_reader() {
    try {
      while (true) {
        Header h;
        if (!ch->read({reinterpret_cast<std::byte*>(&h), sizeof h})) break;  // peer closed
        std::unique_lock l(recv_mu);
        auto& pq = posted[h.tag];
        if (!pq.empty()) {
          PostedRecv r = std::move(pq.front());
          pq.pop_front();
          reading = r;
          l.unlock();
          if (r.buf.size() == h.size) {
            ch->read(r.buf);  // straight into the user's buffer
            r.work.complete();
          } else {
            auto scratch = std::make_unique_for_overwrite<std::byte[]>(h.size);
            ch->read({scratch.get(), h.size});
            r.work.complete(size_mismatch(me, rank, h.tag, h.size, r.buf.size()));
          }
          l.lock();
          reading.reset();
          continue;
        }
        auto u = std::make_shared<Unexpected>();
        u->size = h.size;
        u->data = std::make_unique_for_overwrite<std::byte[]>(h.size);
        unexpected[h.tag].push_back(u);
        inflight = u;
        l.unlock();
        ch->read({u->data.get(), u->size});
        l.lock();
        inflight.reset();
        u->complete = true;
        auto waiter = std::move(u->waiter);
        l.unlock();
        if (waiter) deliver(*waiter, *u, h.tag);
      }
      set_error("the peer closed the connection");
    } catch (const std::exception& e) {
      set_error(e.what());
    }
    // Fail what can no longer arrive.
    auto err = get_error();
    std::vector<Work> failed;
    {
      std::lock_guard l(recv_mu);
      for (auto& [tag, q] : posted)
        for (auto& r : q) failed.push_back(r.work);
      posted.clear();
      if (reading) failed.push_back(reading->work);
      if (inflight && inflight->waiter) failed.push_back(inflight->waiter->work);
      reader_done = true;
    }
    closed_cv.notify_all();
    for (auto& w : failed) w.complete(err);
  }

  Work send(uint64_t tag, ConstBytes data) {
    if (auto err = get_error()) return Work::completed(err);
    PendingSend s{{tag, data.size()}, data, 0, Work(fmt::format("rank {} send to rank {} (tag {}, {} bytes)", me, rank, tag, data.size()))};
    std::unique_lock l(send_mu);
    if (stopping) return Work::completed(set_error("transport is closing"));
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
        return Work::completed(err);
      }
      if (n == sizeof(Header) + data.size()) {
        l.unlock();
        send_cv.notify_all();
        return Work::completed();
      }
      s.done = n;
      queue.push_front(s);  // sends posted meanwhile queue behind the remainder
    } else {
      queue.push_back(s);
    }
    l.unlock();
    send_cv.notify_all();
    return s.work;
  }

  Work recv(uint64_t tag, std::span<std::byte> buf) {
    PostedRecv r{buf, Work(fmt::format("rank {} recv from rank {} (tag {}, {} bytes)", me, rank, tag, buf.size()))};
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
      closed_cv.wait_until(l, by, [&] { return reader_done; });
    }
    ch->shutdown();
    if (sender.joinable()) sender.join();
    if (reader.joinable()) reader.join();
  }
};

StreamTransport::StreamTransport(std::string name, int rank, int size,
                                 std::vector<std::unique_ptr<Channel>> channels)
    : name_(std::move(name)), rank_(rank), size_(size) {
  BRAID_CHECK_EQ(channels.size(), static_cast<size_t>(size));
  peers_.resize(size);
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    BRAID_CHECK(channels[p] != nullptr, "no channel to rank {}", p);
    auto peer = std::make_unique<Peer>();
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
