// The reader role of a StreamTransport peer (stream.h): reading whatever
// has arrived into posted receives or unexpected buffers, the background
// reader, and the waiting thread that reads for itself.
#include <cstring>

#include "braid/base/copy_bytes.h"
#include "braid/comm/history.h"
#include "braid/comm/transport/stream_peer.h"

namespace braid::comm {

using namespace stream_detail;

void StreamTransport::Peer::deliver(PostedRecv& r, const Unexpected& u, uint64_t tag) {
  if (u.pull.remote) {
    take_pull(r, u.pull);
    return;
  }
  if (u.size != r.buf.size()) {
    r.work.complete(size_mismatch(me, rank, tag, u.size, r.buf.size()));
    return;
  }
  if (u.size) copy_bytes(r.buf.data(), u.data.get(), u.size);
  r.work.complete();
}

// Copies a pulled payload out of the sender's buffer, then lets the sender go.
void StreamTransport::Peer::take_pull(PostedRecv& r, const Header& h) {
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

// Reads whatever has arrived, completing the messages it finishes. Returns
// false once the channel is finished (closed or broken).
bool StreamTransport::Peer::drain() {
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
        size_t n = ch->try_read(body_window());
        if (n == Channel::kClosed) {
          fail<PeerError>("rank {} hung up after {} of {} bytes", rank, in.body_got, in.header.size);
        }
        if (n == 0) return true;
        in.body_got += n;
        if (in.body_got == in.header.size) finish_body();
      }
    }
  } catch (const std::exception& e) {
    finish(set_error(e.what()));
    return false;
  }
}

// A header is complete: decide where its payload goes.
void StreamTransport::Peer::start_body() {
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
  in.target = pop_oldest(posted, h.tag);
  if (in.target) {
    l.unlock();
    // Straight into the user's buffer; one of another size is read and dropped.
    in.discarding = in.target->buf.size() != h.size;
    if (!in.discarding) in.body = in.target->buf;
  } else {
    const uint64_t cost = charge_early(h, h.size);
    auto u = std::make_shared<Unexpected>();
    u->size = h.size;
    u->charged = cost;
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

void StreamTransport::Peer::start_pull(const Header& h) {
  in.header_got = 0;
  std::unique_lock l(recv_mu);
  if (auto r = pop_oldest(posted, h.tag)) {
    l.unlock();
    take_pull(*r, h);
    return;
  }
  const uint64_t cost = charge_early(h, 0);  // the payload stays with the sender
  auto u = std::make_shared<Unexpected>();
  u->size = h.size;
  u->pull = h;
  u->complete = true;
  u->charged = cost;
  unexpected[h.tag].push_back(std::move(u));
}

uint64_t StreamTransport::Peer::charge_early(const Header& h, uint64_t payload) {
  if (payload > max_message) {
    fail<PeerError>("{} frame from rank {} (tag {}): length {} exceeds the {} limit on a message that arrives "
                    "before its receive (parallel.max_message_mib)", name, rank, h.tag, human_bytes(h.size),
                    human_bytes(max_message));
  }
  const uint64_t cost = payload + kEarlyEntryCost;  // no overflow: payload <= max_message
  if (cost > max_message || early_bytes > max_message - cost) {
    fail<PeerError>("{} frame from rank {} (tag {}): {} more would pass the {} limit, with {} from rank {} already "
                    "waiting for their receives (parallel.max_message_mib)", name, rank, h.tag,
                    human_bytes(h.size), human_bytes(max_message), human_bytes(early_bytes), rank);
  }
  early_bytes += cost;
  return cost;
}

std::span<std::byte> StreamTransport::Peer::body_window() {
  if (!in.discarding) return in.body.subspan(in.body_got);
  if (!in.scratch) in.scratch = std::make_unique_for_overwrite<std::byte[]>(kDiscardChunk);
  return {in.scratch.get(), static_cast<size_t>(std::min<uint64_t>(kDiscardChunk, in.header.size - in.body_got))};
}

void StreamTransport::Peer::finish_body() {
  in.in_body = false;
  in.header_got = 0;
  const uint64_t tag = in.header.tag;
  if (in.target) {
    PostedRecv r = std::move(*in.target);
    in.target.reset();
    if (in.discarding) {
      in.discarding = false;
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
void StreamTransport::Peer::finish(std::exception_ptr err) {
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
bool StreamTransport::Peer::stand_aside() {
  auto aside = [&] {
    return sleepers.load() == 0 &&
           (pollers.load() > 0 || now_ns() - last_poll.load() < std::chrono::nanoseconds(kStandAside).count());
  };
  std::unique_lock l(park_mu);
  if (!aside() || reader_done) return false;
  park_cv.wait_for(l, kStandAside, [&] { return sleepers.load() > 0 || reader_done; });
  return true;
}

void StreamTransport::Peer::run_reader() {
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

void StreamTransport::Peer::poll_while_waiting(const Work& work) {
  work.help_with([self = weak_from_this()](const Work& w, Deadline d) {
    if (auto p = self.lock()) p->poll_then_wait(w, d);
  });
}

// Waits for `work` (a transfer with this peer), reading the channel in this
// thread while that is likely to pay off. The helper of receive Works.
void StreamTransport::Peer::poll_then_wait(const Work& work, Deadline deadline) {
  if (!work.done()) {
    pollers.fetch_add(1);
    const auto until = Clock::now() + StreamTransport::kPollFor;
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

Work StreamTransport::Peer::recv(uint64_t tag, std::span<std::byte> buf) {
  PostedRecv r{buf, Work([me = me, from = rank, tag, n = buf.size()] {
                  return fmt::format("rank {} recv from rank {} (tag {}, {} bytes)", me, from, tag, n);
                })};
  poll_while_waiting(r.work);
  std::unique_lock l(recv_mu);
  if (auto found = pop_oldest(unexpected, tag)) {
    auto u = *found;
    early_bytes -= u->charged;  // claimed: its bytes are this receive's now
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

}  // namespace braid::comm
