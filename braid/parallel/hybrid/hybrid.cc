#include "braid/parallel/hybrid/hybrid.h"

#include <algorithm>

#include "braid/base/log.h"

namespace braid::parallel::hybrid {

namespace {

constexpr size_t kTotalsWords = 8;

}  // namespace

TimeoutHybrid::TimeoutHybrid(comm::Communicator data_axis, HybridOptions options)
    : comm_(std::move(data_axis)), o_(options) {
  if (!comm_.valid()) fail<ValueError>("timeout-hybrid: needs a valid data-axis communicator");
  check_options(o_);  // when the plan is made, on every rank alike
}

std::string TimeoutHybrid::context(const std::string& what) const {
  return fmt::format("rank {} of {} on the data axis: timeout-hybrid's {} of step {}", comm_.rank(), comm_.size(),
                     what, steps_ + 1);
}

void TimeoutHybrid::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                          const nlohmann::json& description) {
  flat_ = FlatParams(params, "timeout-hybrid");
  buffers_ = start_replicas_equal(comm_, params, buffers, description, o_.timeout, "timeout-hybrid");
  if (comm_.rank() == 0) {
    inbox_ = std::make_unique<Inbox>(comm_, o_, flat_.entries(), flat_.dtype());
    inbox_->start_at(steps_);
  }
  ready_ = true;
  if (comm_.rank() == 0) {
    logging::info("timeout-hybrid: coordinator data rank 0 of {}; {}; late gradients {}", comm_.size(),
                  o_.wait.count() > 0 ? fmt::format("deadline {} after its own gradient", format_duration(o_.wait))
                                      : std::string("waits for every gradient (synchronous)"),
                  o_.late == Late::drop ? std::string("dropped")
                                        : fmt::format("applied later with weight {}^staleness up to staleness {}",
                                                      o_.stale_weight, o_.max_staleness));
  }
}

void TimeoutHybrid::expect() {
  const auto n = static_cast<size_t>(flat_.entries());
  auto header = std::make_shared<std::vector<int64_t>>(StepRecord::kWords + static_cast<size_t>(comm_.size()));
  Tensor values = flat_.empty();
  // One tag, header first: matched in posting order.
  comm::Work header_work = comm_.recv(*header, 0, {.tag = aggregate_tag(steps_)});
  comm::Work values_work = comm_.recv({values.raw_data(), n, flat_.dtype()}, 0, {.tag = aggregate_tag(steps_)});
  expected_ = Expected{.header = header, .values = values, .header_work = header_work, .values_work = values_work};
}

void TimeoutHybrid::before_forward() {
  if (!ready_) fail<ValueError>("timeout-hybrid: before_forward() before setup()");
  if (comm_.size() == 1) return;
  if (inbox_) {
    inbox_->post_through(steps_);
  } else if (!expected_) {
    expect();
  }
}

bool TimeoutHybrid::step_decided() {
  if (!ready_) fail<ValueError>("timeout-hybrid: step_decided() before setup()");
  if (inbox_ || comm_.size() == 1 || o_.catch_up != CatchUp::skip) return false;
  if (!expected_) expect();
  // The coordinator sends the aggregate only once it has closed the step.
  skipping_ = expected_->header_work.done() && expected_->values_work.done();
  return skipping_;
}

void TimeoutHybrid::combine_gradients() {
  if (!ready_) fail<ValueError>("timeout-hybrid: combine_gradients() before setup()");
  if (combined_) fail<ValueError>("timeout-hybrid: combine_gradients() twice in step {}", steps_ + 1);
  combined_ = true;
  if (comm_.size() == 1) {
    count({.step = steps_, .arrived = 1, .weight = 1, .included = {1}});
    return;
  }
  if (inbox_) {
    coordinate();
  } else {
    follow();
  }
}

void TimeoutHybrid::coordinate() {
  const Deadline deadline = Deadline::after(o_.wait);  // from the moment its own gradient is ready
  const auto n = static_cast<size_t>(flat_.entries());
  Tensor mine = flat_.empty();
  flat_.pack_grads(mine);
  std::vector<double> sum(n);
  visit_flat_dtype(flat_.dtype(), [&](auto v) {
    using T = decltype(v);
    const T* g = mine.data<T>();
    for (size_t i = 0; i < n; ++i) sum[i] = static_cast<double>(g[i]);
  });
  const auto start = Clock::now();
  const StepRecord rec = inbox_->collect(steps_, deadline, sum);
  waited_s_ += seconds_since(start);
  Outgoing out{.header = std::make_shared<std::vector<int64_t>>(rec.encode()), .values = mine, .works = {},
               .step = steps_};
  visit_flat_dtype(flat_.dtype(), [&](auto v) {
    using T = decltype(v);
    T* a = out.values.data<T>();
    for (size_t i = 0; i < n; ++i) a[i] = static_cast<T>(sum[i] / rec.weight);
  });
  flat_.unpack_grads(out.values);
  for (int r = 1; r < comm_.size(); ++r) {
    out.works.push_back(comm_.send(*out.header, r, {.tag = aggregate_tag(steps_)}));
    out.works.push_back(comm_.send({out.values.raw_data(), n, flat_.dtype()}, r, {.tag = aggregate_tag(steps_)}));
  }
  bytes_ += static_cast<double>((comm_.size() - 1) * (flat_.bytes() + out.header->size() * sizeof(int64_t)));
  outgoing_.push_back(std::move(out));
  // A worker within max_lag steps has posted the receives of these.
  reap(steps_ - o_.max_lag);
  count(rec);
}

void TimeoutHybrid::reap(int64_t through) {
  while (!outgoing_.empty() && outgoing_.front().step <= through) {
    const Outgoing& out = outgoing_.front();
    for (size_t i = 0; i < out.works.size(); ++i) {
      const int r = static_cast<int>(i / 2) + 1;
      wait_explained(out.works[i], Deadline::after(o_.timeout), [&] {
        return fmt::format("rank {} of {} on the data axis: timeout-hybrid's send of the aggregate of step {} to "
                           "rank {}", comm_.rank(), comm_.size(), out.step + 1, r);
      });
    }
    outgoing_.pop_front();
  }
}

void TimeoutHybrid::follow() {
  if (!expected_) expect();
  // The header says whether the values follow: a skipped step sends none.
  Sent out{.step = steps_,
           .header = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{steps_, skipping_ ? 0 : 1}),
           .grad = {}, .works = {}};
  out.works.push_back(comm_.send(*out.header, 0, {.tag = grad_tag(steps_)}));
  if (!skipping_) {
    out.grad = flat_.empty();
    flat_.pack_grads(out.grad);
    out.works.push_back(comm_.send({out.grad.raw_data(), static_cast<size_t>(flat_.entries()), flat_.dtype()}, 0,
                                   {.tag = values_tag(steps_)}));
    bytes_ += static_cast<double>(flat_.bytes());
  }
  bytes_ += static_cast<double>(out.header->size() * sizeof(int64_t));
  sent_.push_back(std::move(out));
  const Expected e = std::move(*expected_);
  expected_.reset();
  const auto start = Clock::now();
  const std::string what = "receive of the aggregate from the coordinator (data rank 0)";
  wait_explained(e.header_work, Deadline::after(o_.timeout), [&] { return context(what); });
  wait_explained(e.values_work, Deadline::after(o_.timeout), [&] { return context(what); });
  waited_s_ += seconds_since(start);
  const StepRecord rec = StepRecord::decode(*e.header, comm_.size());
  if (rec.step != steps_) {
    fail<PeerError>("{}: it is the aggregate of step {}", context("receive of the aggregate"), rec.step + 1);
  }
  flat_.unpack_grads(e.values);
  // A late gradient's values are taken at the coordinator's next step, so a
  // send may still be on its way; only the oldest are waited for.
  reap_sent(steps_ - o_.max_lag);
  count(rec);
}

void TimeoutHybrid::reap_sent(int64_t through) {
  while (!sent_.empty()) {
    const Sent& x = sent_.front();
    const bool done = std::all_of(x.works.begin(), x.works.end(), [](const comm::Work& w) { return w.done(); });
    if (!done && x.step > through) break;
    for (const comm::Work& w : x.works) {
      wait_explained(w, Deadline::after(o_.timeout), [&] {
        return fmt::format("rank {} of {} on the data axis: timeout-hybrid's send of its gradient of step {} to rank 0",
                           comm_.rank(), comm_.size(), x.step + 1);
      });
    }
    sent_.pop_front();
  }
}

void TimeoutHybrid::count(const StepRecord& r) {
  last_ = r;
  totals_.count(r);
}

void TimeoutHybrid::after_step() {
  if (!combined_) fail<ValueError>("timeout-hybrid: after_step() without combine_gradients() (step {})", steps_ + 1);
  combined_ = false;
  skipping_ = false;
  ++steps_;
}

void TimeoutHybrid::finish() {
  if (!ready_) return;
  if (comm_.size() > 1) {
    // The coordinator's counts, with the late gradients the end left
    // unapplied, become every rank's.
    std::vector<int64_t> totals(kTotalsWords);
    if (inbox_) {
      const Inbox::Drained d = inbox_->drain();
      totals_.dropped += d.dropped, totals_.skipped += d.skipped;
      const HybridTotals& t = totals_;
      totals = {t.steps, t.arrived, t.late, t.stale, t.dropped, t.skipped, t.max_staleness, t.max_lag};
      std::vector<comm::Work> works;
      for (int r = 1; r < comm_.size(); ++r) works.push_back(comm_.send(totals, r, {.tag = totals_tag(steps_)}));
      reap(steps_);
      for (size_t i = 0; i < works.size(); ++i) {
        wait_explained(works[i], Deadline::after(o_.timeout), [&] {
          return context(fmt::format("send of the run's counts to rank {} after the last step", i + 1));
        });
      }
    } else {
      wait_explained(comm_.recv(totals, 0, {.tag = totals_tag(steps_)}), Deadline::after(o_.timeout),
                     [&] { return context("receive of the run's counts from rank 0 after the last step"); });
      reap_sent(steps_);  // the coordinator took every gradient before it sent the counts
      totals_ = {totals[0], totals[1], totals[2], totals[3], totals[4], totals[5], totals[6], totals[7]};
    }
    finish_replicas(comm_, flat_, buffers_, o_.timeout, steps_,
                    [&] { return context("check that every replica holds the same parameters"); });
  }
  ready_ = false;  // nothing posted is left; a second finish() does nothing
}

void TimeoutHybrid::load_state_dict(const nlohmann::json& state) {
  if (state.empty()) return;  // a checkpoint of another plan
  steps_ = state.value("steps", int64_t{0});
  if (inbox_) inbox_->start_at(steps_);  // loaded after setup: nothing posted yet
}

nn::NamedTensors TimeoutHybrid::model_state(const nn::Module& model) {
  if (!ready_) return model.state_dict();
  return state_with_mean_buffers(comm_, model, buffers_, o_.timeout);
}

nlohmann::json TimeoutHybrid::stats() const {
  return hybrid_stats(totals_, o_, comm_.size(), waited_s_, bytes_, flat_.bytes());
}

std::string TimeoutHybrid::report() const {
  const HybridTotals& t = totals_;
  if (t.steps == 0) return "";
  const double steps = static_cast<double>(t.steps);
  return fmt::format("timeout-hybrid: {} steps of {} replicas, {}; {:.2f} gradients arrived per step, {} late, {} "
                     "applied stale (max staleness {}), {} dropped ({} never computed: skipped to catch up); max lag {}; waited {:.1f} ms per step; {:.0f} "
                     "bytes sent per step here (all-reduce {:.0f})",
                     t.steps, comm_.size(),
                     o_.wait.count() > 0 ? fmt::format("deadline {}", format_duration(o_.wait)) : std::string("no deadline"),
                     static_cast<double>(t.arrived) / steps, t.late, t.stale, t.max_staleness, t.dropped, t.skipped, t.max_lag,
                     1e3 * waited_s_ / steps, bytes_ / steps,
                     allreduce_bytes(static_cast<double>(flat_.bytes()), comm_.size()));
}

}  // namespace braid::parallel::hybrid
