#include "braid/comm/transport/stream.h"

#include <algorithm>
#include <cstring>

#include "braid/base/log.h"
#include "braid/base/thread_name.h"
#include "braid/comm/transport/stream_peer.h"

namespace braid::comm {

using namespace stream_detail;

void StreamTransport::Peer::acked(uint64_t id) {
  Work w;
  {
    std::lock_guard l(ack_mu);
    auto it = awaiting_ack.find(id);
    if (it == awaiting_ack.end()) return;
    w = it->second;
    awaiting_ack.erase(it);
  }
  progress.fetch_add(1, std::memory_order_relaxed);
  w.complete();
}

void StreamTransport::Peer::fail_awaiting_acks(std::exception_ptr err) {
  std::unordered_map<uint64_t, Work> failed;
  {
    std::lock_guard l(ack_mu);
    failed.swap(awaiting_ack);
  }
  for (auto& [id, w] : failed) w.complete(err);
}

void StreamTransport::Peer::run_sender() {
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
      // In slices, so that closing sees a large send to a live peer move.
      const ConstBytes h = header_bytes(s.header);
      for (const size_t total = h.size() + s.data.size(); s.done < total;) {
        const size_t n = std::min(kWriteSlice, total - s.done);
        const ConstBytes a = s.done < h.size() ? h.subspan(s.done, std::min(n, h.size() - s.done)) : ConstBytes{};
        const ConstBytes b = s.data.subspan(s.done < h.size() ? 0 : s.done - h.size(), n - a.size());
        ch->write(a, b);
        s.done += n;
        progress.fetch_add(1, std::memory_order_relaxed);
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

Work StreamTransport::Peer::send(uint64_t tag, ConstBytes data) {
  Work work([me = me, to = rank, tag, n = data.size()] {
    return fmt::format("rank {} send to rank {} (tag {}, {} bytes)", me, to, tag, n);
  });
  if (ch->pull_min() == 0 || data.size() < ch->pull_min()) return post({tag, data.size()}, data, work);
  // Only a header goes out; the work completes when the peer has pulled
  // the payload and acked, which we read like any message.
  uint64_t id;
  {
    std::lock_guard l(ack_mu);
    id = next_pull++;
    awaiting_ack.emplace(id, work);
  }
  poll_while_waiting(work);
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
Work StreamTransport::Peer::post(Header header, ConstBytes data, Work work) {
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

void StreamTransport::Peer::begin_close() {
  {
    std::lock_guard l(send_mu);
    stopping = true;
  }
  send_cv.notify_all();
}

bool StreamTransport::Peer::flushed() {
  if (get_error()) return true;  // nothing more will leave
  {
    std::lock_guard l(send_mu);
    if (!queue.empty() || writing) return false;
  }
  // Peers may still be pulling from our buffers: their acks count as sent.
  std::lock_guard l(ack_mu);
  return awaiting_ack.empty();
}

void StreamTransport::Peer::close_write_side() {
  try {
    ch->close_write();
  } catch (const std::exception&) {
  }
}

// Unblocks the sender (its write throws) and the reader; what is still queued
// is dropped, as the peer will not read it.
void StreamTransport::Peer::abort() {
  aborted = true;
  ch->shutdown();
  set_error("the transport was closed while the peer took no data");
}

// Phase 2: wait (until `by`) for the peer to hang up too, then stop the threads.
void StreamTransport::Peer::finish_close(Clock::time_point by) {
  if (!aborted) {
    // Wait for the peer to close its side too, so nothing it sent is cut off.
    std::unique_lock l(recv_mu);
    closed_cv.wait_until(l, by, [&] { return reader_done.load(); });
  }
  ch->shutdown();
  park_cv.notify_all();
  if (sender.joinable()) sender.join();
  if (reader.joinable()) reader.join();
}
void Channel::pull(std::span<std::byte>, uint64_t) {
  fail<PeerError>("this channel cannot pull payloads from the peer's memory");
}

StreamTransport::StreamTransport(std::string name, int rank, int size,
                                 std::vector<std::unique_ptr<Channel>> channels, size_t max_message)
    : name_(std::move(name)), rank_(rank), size_(size) {
  BRAID_CHECK_EQ(channels.size(), static_cast<size_t>(size));
  BRAID_CHECK_GT(max_message, stream_detail::kEarlyEntryCost);
  peers_.resize(size);
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    BRAID_CHECK(channels[p] != nullptr, "no channel to rank {}", p);
    auto peer = std::make_shared<Peer>();
    peer->name = name_;
    peer->max_message = max_message;
    peer->me = rank;
    peer->rank = p;
    peer->ch = std::move(channels[p]);
    peers_[p] = std::move(peer);
  }
  for (auto& p : peers_) {
    if (!p) continue;
    p->sender = std::thread([q = p.get(), n = fmt::format("{}-send:{}", name_, p->rank)] {
      name_this_thread(n);
      q->run_sender();
    });
    p->reader = std::thread([q = p.get(), n = fmt::format("{}-read:{}", name_, p->rank)] {
      name_this_thread(n);
      q->run_reader();
    });
  }
}

// The graces are shared by all peers, not per peer: a rank that finishes while
// many peers are still busy leaves after one grace, not one per peer. A peer
// that takes no data for kStallGrace is cut off at once: after a timeout this
// destructor runs while the error unwinds, and the error is printed only once
// it returns (measured: a pipeline stage printed its 5 s timeout 11 s after
// its peer was SIGSTOPped, 6 s of it flushing to the stopped peer).
StreamTransport::~StreamTransport() {
  struct Closing {
    Peer* peer;
    uint64_t seen;
    Clock::time_point moved;
    bool done = false;
  };
  std::vector<Closing> open;
  const auto start = Clock::now();
  for (auto& p : peers_) {
    if (!p) continue;
    p->begin_close();
    open.push_back({p.get(), p->progress.load(), start});
  }
  const auto flushed_by = start + kFlushGrace;
  for (size_t left = open.size(); left > 0;) {
    const auto now = Clock::now();
    for (Closing& c : open) {
      if (c.done) continue;
      if (c.peer->flushed()) {
        c.peer->close_write_side();
      } else if (const uint64_t n = c.peer->progress.load(); n != c.seen) {
        c.seen = n, c.moved = now;
        continue;
      } else if (now < flushed_by && now - c.moved < kStallGrace) {
        continue;
      } else {
        logging::debug("{} rank {}: rank {} took no data for {} while closing; cutting the connection", name_,
                       rank_, c.peer->rank, format_duration(now - c.moved));
        c.peer->abort();
      }
      c.done = true;
      --left;
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
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
