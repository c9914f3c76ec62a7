#include "braid/parallel/pipeline/stage.h"

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/base/trace.h"
#include "braid/ops/dropout.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"

namespace braid::parallel::pipeline {

namespace {

using Clock = std::chrono::steady_clock;

// Point-to-point tags: what travels, and the micro-batch.
enum : uint64_t { kActivation = 1, kGradient = 2, kEvalActivation = 3 };
uint64_t tag(uint64_t kind, int microbatch) { return (kind << 32) | static_cast<uint64_t>(microbatch); }

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

Stage::Stage(comm::Communicator pipe, StageOptions options)
    : pipe_(std::move(pipe)), o_(options), stage_(pipe_.rank()), stages_(pipe_.size()) {
  if (o_.microbatches < 1) fail<ConfigError>("parallel.microbatches must be >= 1, got {}", o_.microbatches);
}

std::string Stage::name() const {
  return fmt::format("{} stage {} of {} x{}{}", pipeline::name(o_.schedule), stage_, stages_, o_.microbatches,
                     o_.recompute ? " recompute" : "");
}

[[noreturn]] void Stage::fail_wait(const std::string& what, const Error& e) const {
  fail<TimeoutError>("pipeline stage {} of {} (rank {}): {}: {}", stage_, stages_, pipe_.transport_rank(stage_), what,
                     e.what());
}

Tensor Stage::receive(uint64_t t, int from, const std::string& what) {
  trace::Span span("wait", "wait on stage");
  if (span) span.arg("stage", from).arg("microbatch", static_cast<int64_t>(t & 0xffffffffu));
  try {
    return recv_tensor(pipe_, from, t, Deadline::after(o_.timeout), what);
  } catch (const TimeoutError& e) {
    fail_wait(fmt::format("no {} from stage {} (rank {})", what, from, pipe_.transport_rank(from)), e);
  } catch (const PeerError& e) {
    fail_wait(fmt::format("lost stage {} (rank {}) waiting for {}", from, pipe_.transport_rank(from), what), e);
  }
}

void Stage::send(const Tensor& t, int to, uint64_t tg) { sends_.emplace_back(pipe_, t, to, tg); }

void Stage::drain_sends() {
  const Deadline deadline = Deadline::after(o_.timeout);
  try {
    for (const TensorSend& s : sends_) s.wait(deadline);
  } catch (const Error& e) {
    fail_wait("a send to a neighbouring stage did not complete", e);
  }
  sends_.clear();
}

void Stage::forward(nn::Module& model, const nn::LossFn& loss, Micro& m, int i, bool keep_graph) {
  trace::Span span("step", "forward");
  if (span) span.arg("microbatch", i);
  const auto t0 = Clock::now();
  Generator& gen = o_.dropout_generator ? *o_.dropout_generator : dropout_generator();
  m.rng = gen.state();
  Tensor y;
  if (keep_graph) {
    y = model.forward(m.input);
  } else {
    autograd::NoGradGuard no_grad;
    y = model.forward(m.input);
  }
  if (ends_model()) {
    const Tensor l = mul(loss(y, m.target), m.share);
    loss_sum_ += l.item();
    m.output = l;
  } else {
    send(y.detach(), stage_ + 1, tag(kActivation, i));
    m.output = keep_graph ? y : Tensor();
  }
  busy_ms_ += ms_since(t0);
}

void Stage::backward(nn::Module& model, const nn::LossFn& loss, Micro& m, int i) {
  Tensor g;
  if (!ends_model()) g = receive(tag(kGradient, i), stage_ + 1, fmt::format("gradient of micro-batch {}", i));
  trace::Span span("step", "backward");
  if (span) span.arg("microbatch", i);
  const auto t0 = Clock::now();
  if (o_.recompute) {
    // Replay this micro-batch's dropout draws, then put the generator back
    // where the step has got to.
    Generator& gen = o_.dropout_generator ? *o_.dropout_generator : dropout_generator();
    const Generator::State now = gen.state();
    gen.set_state(m.rng);
    const Tensor y = model.forward(m.input);
    gen.set_state(now);
    m.output = ends_model() ? mul(loss(y, m.target), m.share) : y;
  }
  braid::backward(m.output, g);
  if (stage_ > 0) send(m.input.grad(), stage_ - 1, tag(kGradient, i));
  m = Micro{};
  busy_ms_ += ms_since(t0);
}

double Stage::run(nn::Module& model, const nn::LossFn& loss, const Tensor& input, const Tensor& target,
                  const std::function<void(bool)>& set_sync) {
  const auto t_step = Clock::now();
  const std::vector<Action> order = actions(o_.schedule, stages_, stage_, o_.microbatches);
  const int64_t n = input.size(0);
  std::vector<Micro> micro(static_cast<size_t>(o_.microbatches));
  busy_ms_ = 0, loss_sum_ = 0, live_ = 0, max_live_ = 0;
  ran_.clear();
  int backwards_left = o_.microbatches;
  for (const Action& a : order) {
    Micro& m = micro[static_cast<size_t>(a.microbatch)];
    const auto [b, e] = microbatch_rows(n, o_.microbatches, a.microbatch);
    if (a.kind == Action::forward) {
      m.share = static_cast<double>(e - b) / static_cast<double>(n);
      if (stage_ == 0) {
        m.input = slice(input, 0, b, e);
      } else {
        // A leaf whose gradient goes back to the previous stage.
        m.input = receive(tag(kActivation, a.microbatch), stage_ - 1,
                          fmt::format("activation of micro-batch {}", a.microbatch));
        m.input.set_requires_grad();
      }
      if (ends_model()) m.target = slice(target, 0, b, e);
      forward(model, loss, m, a.microbatch, /*keep_graph=*/!o_.recompute);
      max_live_ = std::max(max_live_, ++live_);
    } else {
      set_sync(--backwards_left == 0);
      backward(model, loss, m, a.microbatch);
      --live_;
    }
    ran_.push_back(a);
  }
  drain_sends();
  // The step's loss lives on the last stage; every stage reports it.
  std::vector<double> total{loss_sum_};
  if (stages_ > 1) {
    try {
      pipe_.broadcast(total, {.root = stages_ - 1, .timeout = o_.timeout}).wait(Deadline::after(o_.timeout * 2));
    } catch (const Error& e) {
      fail_wait("the step's loss from the last stage", e);
    }
  }
  step_ms_ = ms_since(t_step);
  return total[0];
}

Tensor Stage::evaluate(nn::Module& model, const Tensor& input) {
  autograd::NoGradGuard no_grad;
  Tensor x = stage_ == 0 ? input : receive(tag(kEvalActivation, 0), stage_ - 1, "evaluation activation");
  Tensor y = model.forward(x);
  if (ends_model()) return y;
  send(y, stage_ + 1, tag(kEvalActivation, 0));
  drain_sends();
  return Tensor();
}

nlohmann::json Stage::stats() const {
  return {{"busy_ms", busy_ms_}, {"step_ms", step_ms_}, {"max_live_microbatches", max_live_},
          {"order", to_string(ran_)}};
}

}  // namespace braid::parallel::pipeline
