#include "braid/parallel/hybrid/deadline_allreduce.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "braid/base/log.h"

namespace braid::parallel::hybrid {

namespace {

// The record a rank contributes to a step's all-reduce (int64, summed):
// [kHead counts] [ranks: included masks, each rank's in its own slot]
// [ranks: how many steps each rank's training thread was behind].
enum Word : size_t { kArrived, kLate, kStale, kDropped, kSkipped, kDone, kHead };

size_t record_words(int ranks) { return kHead + 2 * static_cast<size_t>(ranks); }

}  // namespace

DeadlineAllreduce::DeadlineAllreduce(comm::Communicator data_axis, HybridOptions options)
    : comm_(std::move(data_axis)), o_(options) {
  if (!comm_.valid()) fail<ValueError>("timeout-hybrid: needs a valid data-axis communicator");
  check_options(o_);
}

DeadlineAllreduce::~DeadlineAllreduce() { stop(); }

std::string DeadlineAllreduce::context(const std::string& what, int64_t step) const {
  return fmt::format("rank {} of {} on the data axis: timeout-hybrid (via all-reduce) {} of step {}", comm_.rank(),
                     comm_.size(), what, step + 1);
}

void DeadlineAllreduce::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                              const nlohmann::json& description) {
  flat_ = FlatParams(params, "timeout-hybrid");
  buffers_ = start_replicas_equal(comm_, params, buffers, description, o_.timeout, "timeout-hybrid");
  // The closer's collectives run beside the training thread's (checkpoints):
  // on a communicator of their own they cannot interleave differently on two ranks.
  if (comm_.size() > 1) closer_ = comm_.split(0, comm_.rank());
  ready_ = true;
  if (comm_.rank() == 0) {
    logging::info("timeout-hybrid via all-reduce: {} replicas; {}; late gradients {}", comm_.size(),
                  o_.wait.count() > 0
                      ? fmt::format("a step closes {} after the previous aggregate at the latest", format_duration(o_.wait))
                      : std::string("every step waits for every gradient (synchronous)"),
                  o_.late == Late::drop ? std::string("dropped")
                                        : fmt::format("applied later with weight {}^staleness up to staleness {}",
                                                      o_.stale_weight, o_.max_staleness));
  }
}

void DeadlineAllreduce::start() {
  if (closer_thread_.joinable() || comm_.size() == 1) return;
  joined_ = reached_ = steps_;  // a resumed run closes its next step first
  closer_thread_ = std::thread([this, first = steps_] { close_steps(first); });
}

void DeadlineAllreduce::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (closer_thread_.joinable()) closer_thread_.join();
}

bool DeadlineAllreduce::wait_to_close(std::unique_lock<std::mutex>& lock, int64_t k, bool first,
                                      Clock::time_point opened) {
  const auto now_or_never = [&] { return stop_ || done_ || (on_time_ && on_time_->step == k); };
  const Deadline backstop = Deadline::after(o_.timeout);
  // The first step waits for every gradient: its compute holds the warm-up
  // (first touches, a pipeline's start), which no deadline is sized for.
  if (o_.wait.count() == 0 || first) {
    if (!cv_.wait_until(lock, backstop.at(), now_or_never)) {
      fail<TimeoutError>("{} (waited {})", context("step closer waiting for its training thread's gradient", k),
                         format_duration(o_.timeout));
    }
    return !stop_;
  }
  cv_.wait_until(lock, opened + o_.wait, now_or_never);
  // Past the deadline the step closes without this rank's gradient, unless
  // its training thread is max_lag steps behind.
  if (!cv_.wait_until(lock, backstop.at(), [&] { return now_or_never() || k - reached_ < o_.max_lag; })) {
    fail<TimeoutError>("{}: the training thread is {} steps behind (hybrid.max_lag {}; waited {})",
                       context("step closer", k), k - reached_, o_.max_lag, format_duration(o_.timeout));
  }
  return !stop_;
}

void DeadlineAllreduce::close_steps(int64_t first) {
  const int ranks = closer_.size(), me = closer_.rank();
  const auto n = static_cast<size_t>(flat_.entries());
  try {
    Clock::time_point opened = Clock::now();
    for (int64_t k = first;; ++k) {
      std::vector<int64_t> words(record_words(ranks), 0);
      Tensor values;
      bool was_done = false;
      {
        std::unique_lock lock(mu_);
        if (!wait_to_close(lock, k, k == first, opened)) return;
        was_done = done_;
        uint64_t included = 0;
        if (on_time_ && on_time_->step == k) {
          values = std::move(on_time_->grad);  // weight 1: summed as it is
          on_time_.reset();
          included |= 1;
          words[kArrived] = 1;
        } else if (!done_) {
          words[kLate] = 1;
        }
        if (late_) {
          const int64_t s = k - late_->step;
          if (!done_ && s <= o_.max_staleness) {
            if (!values.defined()) values = Tensor::zeros({flat_.entries()}, flat_.dtype());
            const double w = std::pow(o_.stale_weight, static_cast<double>(s));
            visit_flat_dtype(flat_.dtype(), [&](auto v) {
              using T = decltype(v);
              T* a = values.data<T>();
              const T* g = late_->grad.data<T>();
              for (size_t i = 0; i < n; ++i) a[i] += static_cast<T>(w * static_cast<double>(g[i]));
            });
            included |= uint64_t{1} << s;
            words[kStale] = 1;
          } else {
            ++dropped_;
          }
          late_.reset();
        }
        if (!values.defined()) values = Tensor::zeros({flat_.entries()}, flat_.dtype());
        words[kDropped] = std::exchange(dropped_, 0);
        words[kSkipped] = std::exchange(skipped_, 0);
        words[kDone] = done_ ? 1 : 0;
        words[kHead + static_cast<size_t>(me)] = static_cast<int64_t>(included);
        // The gradients this rank still owes, step k's included (0 when it is in).
        words[kHead + static_cast<size_t>(ranks + me)] = std::max<int64_t>(0, k + 1 - reached_);
        joined_ = k + 1;
      }
      comm::Work record = closer_.allreduce(words, {.op = comm::Op::sum, .timeout = o_.timeout});
      comm::Work sum = closer_.allreduce({values.raw_data(), n, flat_.dtype()}, {.op = comm::Op::sum, .timeout = o_.timeout});
      const Deadline deadline = Deadline::after(comm::collective_backstop(o_.timeout) * 2);
      wait_explained(record, deadline, [&] { return context("all-reduce of the record", k); });
      wait_explained(sum, deadline, [&] { return context("all-reduce of the gradients", k); });
      opened = Clock::now();  // the next step's deadline counts from here

      StepRecord r{.step = k, .arrived = words[kArrived], .late = words[kLate], .stale = words[kStale],
                   .dropped = words[kDropped], .skipped = words[kSkipped], .included = {}};
      for (int i = 0; i < ranks; ++i) {
        const auto mask = static_cast<uint64_t>(words[kHead + static_cast<size_t>(i)]);
        r.included.push_back(mask);
        for (int s = 0; s < 64; ++s) {
          if (!(mask >> s & 1)) continue;
          r.weight += std::pow(o_.stale_weight, static_cast<double>(s));
          if (s > 0) r.max_staleness = std::max<int64_t>(r.max_staleness, s);
        }
        r.lag = std::max(r.lag, words[kHead + static_cast<size_t>(ranks + i)]);
      }
      if (r.weight > 0) {
        visit_flat_dtype(flat_.dtype(), [&](auto v) {
          using T = decltype(v);
          T* a = values.data<T>();
          for (size_t i = 0; i < n; ++i) a[i] = static_cast<T>(static_cast<double>(a[i]) / r.weight);
        });
      }
      {
        std::lock_guard lock(mu_);
        stale_all_ += r.stale, dropped_all_ += r.dropped, skipped_all_ += r.skipped;
        if (words[kDone] == ranks) {  // every rank is past its last step
          drained_ = true;
        } else if (!was_done) {
          closed_.push_back({std::move(r), std::move(values)});
        }
      }
      cv_.notify_all();
      if (words[kDone] == ranks) return;
    }
  } catch (...) {
    {
      std::lock_guard lock(mu_);
      error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

void DeadlineAllreduce::before_forward() {
  if (!ready_) fail<ValueError>("timeout-hybrid: before_forward() before setup()");
  start();
}

bool DeadlineAllreduce::step_decided() {
  if (!ready_) fail<ValueError>("timeout-hybrid: step_decided() before setup()");
  if (comm_.size() == 1 || o_.catch_up != CatchUp::skip) return false;
  start();
  std::lock_guard lock(mu_);
  skipping_ = joined_ > steps_;  // closed without this rank: its gradient could only be late
  return skipping_;
}

void DeadlineAllreduce::combine_gradients() {
  if (!ready_) fail<ValueError>("timeout-hybrid: combine_gradients() before setup()");
  if (combined_) fail<ValueError>("timeout-hybrid: combine_gradients() twice in step {}", steps_ + 1);
  combined_ = true;
  if (comm_.size() == 1) {
    last_ = {.step = steps_, .arrived = 1, .weight = 1, .included = {1}};
    totals_.count(last_);
    return;
  }
  start();
  Tensor grad;
  if (!skipping_) {
    grad = flat_.empty();
    flat_.pack_grads(grad);
  }
  const auto start_wait = Clock::now();
  Closed c;
  {
    std::unique_lock lock(mu_);
    if (skipping_) {
      ++dropped_, ++skipped_;
    } else if (joined_ <= steps_) {
      on_time_ = Handed{steps_, grad};
    } else if (o_.late == Late::stale && o_.max_staleness > 0) {
      if (late_) ++dropped_;  // superseded before the closer took it
      late_ = Handed{steps_, grad};
    } else {
      ++dropped_;
    }
    reached_ = steps_ + 1;
    cv_.notify_all();
    const Duration patience = o_.wait + comm::collective_backstop(o_.timeout) * 2;
    const bool in = cv_.wait_for(lock, patience, [&] { return error_ || drained_ || !closed_.empty(); });
    if (error_) std::rethrow_exception(error_);
    if (!in || closed_.empty()) {
      fail<TimeoutError>("{} (waited {})", context("wait for the aggregate", steps_), format_duration(patience));
    }
    c = std::move(closed_.front());
    closed_.pop_front();
  }
  waited_s_ += seconds_since(start_wait);
  if (c.record.step != steps_) {
    fail<ValueError>("{}: the step closer handed the aggregate of step {}", context("aggregate", steps_),
                     c.record.step + 1);
  }
  flat_.unpack_grads(c.values);
  if (c.record.weight == 0 && !warned_empty_ && comm_.rank() == 0) {
    warned_empty_ = true;  // once: the same holds for the steps after it
    logging::warn("timeout-hybrid via all-reduce: step {} closed before any rank's gradient was in (its update is "
                  "zero): hybrid.timeout_ms = {} counts from the previous aggregate and must cover a step's compute",
                  steps_ + 1, format_duration(o_.wait));
  }
  last_ = c.record;
  totals_.count(last_);  // dropped and skipped are taken at finish(), over every step joined
}

double DeadlineAllreduce::bytes_sent() const {
  // Every applied step is the same pair of all-reduces: the values and the record.
  const size_t per_step = flat_.bytes() + record_words(comm_.size()) * sizeof(int64_t);
  return static_cast<double>(totals_.steps) * allreduce_bytes(static_cast<double>(per_step), comm_.size());
}

void DeadlineAllreduce::after_step() {
  if (!combined_) fail<ValueError>("timeout-hybrid: after_step() without combine_gradients() (step {})", steps_ + 1);
  combined_ = false;
  skipping_ = false;
  ++steps_;
}

void DeadlineAllreduce::finish() {
  if (!ready_) return;
  if (comm_.size() > 1) {
    if (closer_thread_.joinable()) {
      {
        std::lock_guard lock(mu_);
        done_ = true;
      }
      cv_.notify_all();
      // Every wait of the closer has a deadline, so this ends.
      closer_thread_.join();
      if (error_) std::rethrow_exception(error_);
    }
    // Late gradients applied only in steps after the last one count as dropped.
    totals_.dropped = dropped_all_ + stale_all_ - totals_.stale;
    totals_.skipped = skipped_all_;
    finish_replicas(comm_, flat_, buffers_, o_.timeout, steps_,
                    [&] { return context("check that every replica holds the same parameters", steps_); });
  }
  ready_ = false;
}

void DeadlineAllreduce::load_state_dict(const nlohmann::json& state) {
  if (state.empty()) return;
  if (closer_thread_.joinable()) fail<ValueError>("timeout-hybrid: load_state_dict() after the first step");
  steps_ = state.value("steps", int64_t{0});
}

nn::NamedTensors DeadlineAllreduce::model_state(const nn::Module& model) {
  if (!ready_) return model.state_dict();
  return state_with_mean_buffers(comm_, model, buffers_, o_.timeout);
}

nlohmann::json DeadlineAllreduce::stats() const {
  return hybrid_stats(totals_, o_, comm_.size(), waited_s_, bytes_sent(), flat_.bytes());
}

std::string DeadlineAllreduce::report() const {
  const HybridTotals& t = totals_;
  if (t.steps == 0) return "";
  const double steps = static_cast<double>(t.steps);
  return fmt::format("timeout-hybrid via all-reduce: {} steps of {} replicas, {}; {:.2f} gradients arrived per step, "
                     "{} late, {} applied stale (max staleness {}), {} dropped ({} never computed: skipped to catch "
                     "up); max lag {}; waited {:.1f} ms per step; {:.0f} bytes sent per step here",
                     t.steps, comm_.size(),
                     o_.wait.count() > 0 ? fmt::format("deadline {}", format_duration(o_.wait)) : std::string("no deadline"),
                     static_cast<double>(t.arrived) / steps, t.late, t.stale, t.max_staleness, t.dropped, t.skipped,
                     t.max_lag, 1e3 * waited_s_ / steps, bytes_sent() / steps);
}

}  // namespace braid::parallel::hybrid
