#include "braid/comm/transport/stream.h"

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

// Phase 1 of closing: flush queued sends (until `by`), then hang up our write side.
void StreamTransport::Peer::close_write_side(Clock::time_point by) {
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
void StreamTransport::Peer::finish_close(Clock::time_point by) {
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
