#include "braid/parallel/hybrid/inbox.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "braid/parallel/flat_replica.h"

namespace braid::parallel::hybrid {

Late parse_late(const std::string& name) {
  if (name == "drop") return Late::drop;
  if (name == "stale") return Late::stale;
  fail<ConfigError>("hybrid.late = '{}' (known: drop, stale)", name);
}

CatchUp parse_catch_up(const std::string& name) {
  if (name == "skip") return CatchUp::skip;
  if (name == "compute") return CatchUp::compute;
  fail<ConfigError>("hybrid.catch_up = '{}' (known: skip, compute)", name);
}

Via parse_via(const std::string& name) {
  if (name == "coordinator") return Via::coordinator;
  if (name == "allreduce") return Via::allreduce;
  fail<ConfigError>("hybrid.via = '{}' (known: coordinator, allreduce)", name);
}

std::vector<int64_t> StepRecord::encode() const {
  std::vector<int64_t> w{step, arrived, late, stale, dropped, skipped, max_staleness, lag, std::bit_cast<int64_t>(weight)};
  for (uint64_t m : included) w.push_back(static_cast<int64_t>(m));
  return w;
}

StepRecord StepRecord::decode(const std::vector<int64_t>& w, int ranks) {
  if (w.size() != kWords + static_cast<size_t>(ranks)) {
    fail<PeerError>("hybrid: a step record of {} words for {} ranks", w.size(), ranks);
  }
  StepRecord r{.step = w[0], .arrived = w[1], .late = w[2], .stale = w[3], .dropped = w[4], .skipped = w[5],
               .max_staleness = w[6], .lag = w[7], .weight = std::bit_cast<double>(w[8]), .included = {}};
  for (int i = 0; i < ranks; ++i) r.included.push_back(static_cast<uint64_t>(w[kWords + static_cast<size_t>(i)]));
  return r;
}

void check_options(const InboxOptions& o) {
  if (o.wait.count() < 0) fail<ConfigError>("hybrid.timeout_ms must be >= 0, got {}", format_duration(o.wait));
  if (!(o.stale_weight > 0 && o.stale_weight <= 1)) {
    fail<ConfigError>("hybrid.stale_weight must be in (0, 1], got {}", o.stale_weight);
  }
  // The record keeps one bit per staleness in a 64-bit word.
  if (o.max_staleness < 0 || o.max_staleness > 62) {
    fail<ConfigError>("hybrid.max_staleness must be in [0, 62], got {}", o.max_staleness);
  }
  if (o.max_lag < 1) fail<ConfigError>("hybrid.max_lag must be >= 1, got {}", o.max_lag);
}

Inbox::Inbox(comm::Communicator comm, InboxOptions options, int64_t entries, DType dtype)
    : comm_(std::move(comm)), o_(options), entries_(entries), dtype_(dtype),
      queue_(static_cast<size_t>(comm_.size())) {
  check_options(o_);
}

std::string Inbox::context(int rank, int64_t step, std::string_view what) const {
  return fmt::format("rank {} of {} on the data axis: timeout-hybrid's coordinator {} rank {}'s gradient of step {}",
                     comm_.rank(), comm_.size(), what, rank, step + 1);
}

void Inbox::check(const Incoming& in, int rank) const {
  for (const comm::Work* w : {&in.header_work, in.values_work ? &*in.values_work : nullptr}) {
    if (!w || !w->done() || !w->error()) continue;
    try {
      std::rethrow_exception(w->error());
    } catch (const std::exception& e) {
      fail<PeerError>("{}: {}", context(rank, in.step, "receiving"), e.what());
    }
  }
  if (in.header_work.done() && (*in.header)[0] != in.step) {
    fail<PeerError>("{}: its header names step {}", context(rank, in.step, "receiving"), (*in.header)[0] + 1);
  }
}

bool Inbox::arrived(Incoming& in, int rank) {
  if (!in.header_work.done()) return false;
  check(in, rank);
  if (skipped(in)) return true;
  if (!in.values_work) {
    in.grad = Tensor::empty({entries_}, dtype_);
    in.values_work = comm_.recv({in.grad.raw_data(), static_cast<size_t>(entries_), dtype_}, rank,
                                {.tag = values_tag(in.step)});
  }
  return in.values_work->done();
}

void Inbox::wait_for(Incoming& in, int rank, Deadline deadline, std::string_view what) {
  const auto explain = [&] { return context(rank, in.step, what); };
  wait_explained(in.header_work, deadline, explain);
  if (!arrived(in, rank)) wait_explained(*in.values_work, deadline, explain);  // arrived() checked the header
}

void Inbox::start_at(int64_t step) {
  for (const auto& q : queue_) BRAID_CHECK(q.empty(), "hybrid: start_at({}) with receives posted", step);
  posted_ = step - 1;
}

void Inbox::post_through(int64_t step) {
  for (; posted_ < step; ++posted_) {
    const int64_t s = posted_ + 1;
    for (int r = 1; r < comm_.size(); ++r) {
      auto header = std::make_shared<std::vector<int64_t>>(2);
      comm::Work work = comm_.recv(*header, r, {.tag = grad_tag(s)});
      queue_[static_cast<size_t>(r)].push_back(
          {.step = s, .header = header, .header_work = work, .grad = {}, .values_work = {}, .state = State::pending});
    }
  }
}

void Inbox::add(const Incoming& in, double weight, std::vector<double>& sum) const {
  visit_flat_dtype(dtype_, [&](auto v) {
    using T = decltype(v);
    const T* g = in.grad.data<T>();
    for (int64_t i = 0; i < entries_; ++i) sum[static_cast<size_t>(i)] += weight * static_cast<double>(g[i]);
  });
}

StepRecord Inbox::collect(int64_t step, Deadline deadline, std::vector<double>& sum) {
  post_through(step);
  const int ranks = comm_.size();
  StepRecord rec{.step = step, .arrived = 1, .weight = 1.0, .included = std::vector<uint64_t>(static_cast<size_t>(ranks), 0)};
  rec.included[0] = 1;  // the coordinator's own, always
  const bool all = o_.wait.count() == 0;
  for (int r = 1; r < ranks; ++r) {
    auto& q = queue_[static_cast<size_t>(r)];
    // The values' receives of every header in, so that no worker's send
    // waits on one (some transports complete a send only once it is matched).
    for (Incoming& in : q) arrived(in, r);
    // The lag bound: this worker's gradient of step - max_lag must be in.
    for (Incoming& in : q) {
      if (in.step > step - o_.max_lag) break;
      if (arrived(in, r)) continue;
      wait_for(in, r, Deadline::after(o_.timeout),
               fmt::format("at step {} (max_lag {}) waiting for", step + 1, o_.max_lag));
    }
    // This step's gradient, until the deadline ("wait for all": the timeout),
    // unless the worker still owes an earlier step's word.
    const auto at = std::find_if(q.begin(), q.end(), [&](const Incoming& in) { return in.step == step; });
    BRAID_CHECK(at != q.end(), "no receive posted for rank {}'s gradient of step {}", r, step + 1);
    Incoming& now = *at;
    const bool behind = std::any_of(q.begin(), at, [](const Incoming& in) { return !in.header_work.done(); });
    bool on_time = arrived(now, r);
    if (!on_time && (all || !behind)) {
      try {
        wait_for(now, r, all ? Deadline::after(o_.timeout) : deadline, "waiting for");
        on_time = true;
      } catch (const TimeoutError&) {
        if (all) throw;
      }
    }
    on_time = on_time && !skipped(now);  // (a worker skips only closed steps)
    int64_t owed = 0;
    for (Incoming& in : q) owed += in.step <= step && !arrived(in, r);
    rec.lag = std::max(rec.lag, owed);
    if (on_time) {
      add(now, 1.0, sum);
      rec.weight += 1.0, ++rec.arrived;
      rec.included[static_cast<size_t>(r)] |= 1;
      now.state = State::dropped;  // taken: removed below
    } else {
      ++rec.late;
      now.state = o_.late == Late::drop ? State::dropped : State::late;
      rec.dropped += o_.late == Late::drop;
    }
    // Earlier late gradients: applied if in and young enough; given up once
    // they could only be applied older than max_staleness, or once their
    // header says they were never computed. Skips are counted when seen.
    for (Incoming& in : q) {
      if (in.state != State::late) continue;
      const int64_t s = step - in.step;
      if (s > 0 && arrived(in, r) && !skipped(in)) {
        const double w = std::pow(o_.stale_weight, static_cast<double>(s));
        add(in, w, sum);
        rec.weight += w, ++rec.stale;
        rec.max_staleness = std::max(rec.max_staleness, s);
        rec.included[static_cast<size_t>(r)] |= uint64_t{1} << s;
        in.state = State::dropped;  // taken
      } else if (s >= o_.max_staleness || skipped(in)) {
        in.state = State::dropped;
        ++rec.dropped;
      }
    }
    // Done and not waiting to be applied: the buffer may go.
    while (!q.empty() && q.front().state == State::dropped && arrived(q.front(), r)) {
      rec.skipped += skipped(q.front());
      q.pop_front();
    }
  }
  return rec;
}

Inbox::Drained Inbox::drain() {
  Drained out;
  for (int r = 1; r < comm_.size(); ++r) {
    for (Incoming& in : queue_[static_cast<size_t>(r)]) {
      wait_for(in, r, Deadline::after(o_.timeout), "at the end waiting for");
      out.dropped += in.state == State::late;
      out.skipped += skipped(in);
    }
    queue_[static_cast<size_t>(r)].clear();
  }
  return out;
}

}  // namespace braid::parallel::hybrid
