#include "braid/parallel/gossip/latest_exchange.h"

#include <algorithm>
#include <utility>

#include "braid/parallel/flat_replica.h"

namespace braid::parallel::gossip {

namespace {

// Above the synchronous exchange's per-step tags (< 2^38); p2p tags are < 2^39.
constexpr uint64_t kHeaderTag = uint64_t{1} << 38;
constexpr uint64_t kValuesTag = kHeaderTag + 1;

}  // namespace

LatestExchange::LatestExchange(comm::Communicator comm, std::vector<int> in, std::vector<int> out, int64_t entries,
                               DType dtype, Duration timeout)
    : comm_(std::move(comm)), entries_(entries), dtype_(dtype), timeout_(timeout) {
  for (int from : in) {
    Slot s;
    s.from = from;
    s.header = std::make_shared<std::vector<int64_t>>(2);
    s.values = Tensor::empty({entries}, dtype);
    slots_.push_back(std::move(s));
  }
  for (Slot& s : slots_) post(s);
  for (int to : out) outboxes_.push_back({.to = to, .values = Tensor::empty({entries}, dtype), .flights = {}});
}

std::string LatestExchange::context(const std::string& what) const {
  return fmt::format("rank {} of {} on the data axis: asynchronous gossip's {} in step {}", comm_.rank(), comm_.size(),
                     what, step_ + 1);
}

// A posted receive or send holds a pointer into a slot's or an outbox's
// buffers, and the transport's threads may still fill or read it after this
// object is gone: an error unwinding the job (a dead neighbour) while a live
// neighbour's message is arriving freed the buffer under the transport's
// reader (heap corruption, seen in the kill test). Each pending work now owns
// its buffers until it finishes; a finished one releases them at once.
LatestExchange::~LatestExchange() {
  for (Slot& s : slots_) {
    s.header_work.on_done([keep = s.header](std::exception_ptr) {});
    s.values_work.on_done([keep = s.values](std::exception_ptr) {});
  }
  for (Outbox& o : outboxes_) {
    for (Flight& f : o.flights) {
      for (comm::Work& w : f.works) w.on_done([header = f.header, values = o.values](std::exception_ptr) {});
    }
  }
}

void LatestExchange::post(Slot& s) {
  const auto n = static_cast<size_t>(entries_);
  s.header_work = comm_.recv(*s.header, s.from, {.tag = kHeaderTag});
  s.values_work = comm_.recv({s.values.raw_data(), n, dtype_}, s.from, {.tag = kValuesTag});
}

void LatestExchange::take(Slot& s) {
  const auto explain = [&] { return context(fmt::format("receive of rank {}'s weights", s.from)); };
  wait_explained(s.header_work, Deadline::after(timeout_), explain);  // done: rethrows a failure with context
  wait_explained(s.values_work, Deadline::after(timeout_), explain);
  if (!s.latest.defined()) s.latest = Tensor::empty({entries_}, dtype_);
  std::swap(s.values, s.latest);
  s.step = (*s.header)[0];
  s.fresh = true;
  s.ended = (*s.header)[1] != 0;
  if (!s.ended) post(s);
}

void LatestExchange::poll(int64_t step) {
  step_ = step;
  for (Slot& s : slots_) {
    while (!s.ended && s.header_work.done() && s.values_work.done()) take(s);
  }
}

int LatestExchange::offer(const std::function<void(const Tensor&)>& pack, int64_t step) {
  if (closed_) fail<ValueError>("gossip: offer() after close()");
  step_ = step;
  int sent = 0;
  for (Outbox& o : outboxes_) {
    if (!idle(o)) {
      ++skipped_;
      continue;
    }
    pack(o.values);
    send(o, step, false);
    ++sent;
  }
  return sent;
}

void LatestExchange::send(Outbox& o, int64_t step, bool last) {
  Flight f{.header = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{step, last ? 1 : 0}), .works = {}};
  f.works.push_back(comm_.send(*f.header, o.to, {.tag = kHeaderTag}));
  f.works.push_back(comm_.send({o.values.raw_data(), static_cast<size_t>(entries_), dtype_}, o.to, {.tag = kValuesTag}));
  o.flights.push_back(std::move(f));
}

void LatestExchange::wait_flight(const Outbox& o, const Flight& f, const char* what) const {
  for (const comm::Work& w : f.works) {
    wait_explained(w, Deadline::after(timeout_), [&] { return context(fmt::format("{} to rank {}", what, o.to)); });
  }
}

bool LatestExchange::idle(Outbox& o) {
  std::erase_if(o.flights, [&](const Flight& f) {
    if (!std::all_of(f.works.begin(), f.works.end(), [](const comm::Work& w) { return w.done(); })) return false;
    wait_flight(o, f, "send of its weights");  // done: rethrows a failure with context
    return true;
  });
  return o.flights.empty();
}

void LatestExchange::wait_sends(const char* what) {
  for (Outbox& o : outboxes_) {
    for (const Flight& f : o.flights) wait_flight(o, f, what);
    o.flights.clear();
  }
}

void LatestExchange::close(int64_t step) {
  if (closed_) return;
  closed_ = true;
  step_ = step;
  // The last message goes out at once, behind any still in flight (with the
  // buffer as it is, which those still read): a neighbour blocked on it must
  // not wait for this rank to wait for its own earlier sends.
  for (Outbox& o : outboxes_) send(o, step, true);
  // Take every neighbour's messages as they come, not one neighbour at a
  // time: each has one receive posted per neighbour, so a neighbour's sends
  // to this rank progress only as this rank takes them.
  const Deadline deadline = Deadline::after(timeout_);
  while (true) {
    poll(step);
    const auto open = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.ended; });
    if (open == slots_.end()) break;
    if (deadline.expired()) {
      fail<TimeoutError>("{} waited {}", context(fmt::format("receive of rank {}'s weights at the end (its last message)",
                                                             open->from)),
                         format_duration(timeout_));
    }
    try {
      open->header_work.wait(deadline.min(Deadline::after(std::chrono::milliseconds(1))));
    } catch (const TimeoutError&) {
      // poll again
    } catch (const PeerError&) {
      take(*open);  // rethrows it with context
    }
  }
  wait_sends("send of its weights");
}

}  // namespace braid::parallel::gossip
