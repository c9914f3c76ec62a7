#include "braid/parallel/pipeline/stage.h"

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/base/trace.h"
#include "braid/nn/sequential.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"

namespace braid::parallel::pipeline {

namespace {

using Clock = std::chrono::steady_clock;

// Point-to-point tags: what travels, the receiver's chunk and the micro-batch.
enum : uint64_t { kActivation = 1, kGradient = 2, kEvalActivation = 3 };
uint64_t tag(uint64_t kind, int microbatch, int chunk = 0) {
  return (kind << 32) | (static_cast<uint64_t>(chunk) << 24) | static_cast<uint64_t>(microbatch);
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

Stage::Stage(comm::Communicator pipe, StageOptions options)
    : pipe_(std::move(pipe)), o_(options), stage_(pipe_.rank()), stages_(pipe_.size()) {
  if (o_.microbatches < 1) fail<ConfigError>("parallel.microbatches must be >= 1, got {}", o_.microbatches);
  if (o_.microbatches >= (1 << 24) || chunks() >= 256) {
    fail<ConfigError>("parallel.microbatches = {} and {} chunks per rank: at most 2^24 - 1 and 255", o_.microbatches,
                      chunks());
  }
  if (!o_.chunk_starts.empty() && o_.chunk_starts[0] != 0) {
    fail<ValueError>("pipeline stage: the first chunk starts at layer {}, not 0", o_.chunk_starts[0]);
  }
  check_schedule(o_.schedule, stages_, chunks(), o_.microbatches);
}

std::string Stage::name() const {
  return fmt::format("{} stage {} of {} x{}{}", pipeline::name(o_.schedule), stage_, stages_, o_.microbatches,
                     chunks() > 1 ? fmt::format(" chunks {}", chunks()) : "");
}

[[noreturn]] void Stage::fail_wait(const std::string& what, const Error& e) const {
  fail<TimeoutError>("pipeline stage {} of {} (rank {}): {}: {}", stage_, stages_, pipe_.transport_rank(stage_), what,
                     e.what());
}

Tensor Stage::receive(uint64_t t, int from, const std::string& what) {
  trace::Span span("wait", "wait on stage");
  if (span) {
    span.arg("stage", from).arg("microbatch", static_cast<int64_t>(t & 0xffffffu));
    if (chunks() > 1) span.arg("chunk", static_cast<int64_t>((t >> 24) & 0xffu));
  }
  try {
    return recv_tensor(pipe_, from, t, Deadline::after(o_.timeout), what, device_);
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

Tensor Stage::run_chunk(nn::Module& model, int c, const Tensor& x) const {
  if (chunks() == 1) return model.forward(x);
  auto* seq = dynamic_cast<nn::Sequential*>(&model);
  if (!seq) fail<ValueError>("pipeline stage: {} chunks need the rank's model as an nn::Sequential", chunks());
  const size_t begin = static_cast<size_t>(o_.chunk_starts[static_cast<size_t>(c)]);
  const size_t end = c + 1 < chunks() ? static_cast<size_t>(o_.chunk_starts[static_cast<size_t>(c) + 1]) : seq->size();
  Tensor y = x;
  for (size_t l = begin; l < end; ++l) y = (*seq)[l].forward(y);
  return y;
}

void Stage::forward(nn::Module& model, const nn::LossFn& loss, Micro& m, const Action& a) {
  trace::Span span("step", "forward");
  if (span) span.arg("microbatch", a.microbatch).arg("chunk", a.chunk);
  const auto t0 = Clock::now();
  const Tensor y = run_chunk(model, a.chunk, m.input);
  if (ends_chunks(a.chunk)) {
    const Tensor l = mul(loss(y, m.target), m.share);
    loss_sum_ += l.item();
    m.output = l;
  } else {
    // The next virtual stage: the next rank's same chunk, or rank 0's next one.
    const bool wrap = stage_ + 1 == stages_;
    send(y.detach(), wrap ? 0 : stage_ + 1, tag(kActivation, a.microbatch, a.chunk + (wrap ? 1 : 0)));
    m.output = y;
  }
  busy_ms_ += ms_since(t0);
}

void Stage::backward(Micro& m, const Action& a) {
  const int i = a.microbatch, c = a.chunk;
  Tensor g;
  if (!ends_chunks(c)) {
    const bool wrap = stage_ + 1 == stages_;
    g = receive(tag(kGradient, i, c), wrap ? 0 : stage_ + 1,
                chunks() > 1 ? fmt::format("gradient of micro-batch {} chunk {}", i, c)
                             : fmt::format("gradient of micro-batch {}", i));
  }
  const bool split = splits_backward(o_.schedule);
  trace::Span span("step", split ? "backward B" : "backward");
  if (span) span.arg("microbatch", i).arg("chunk", c);
  const auto t0 = Clock::now();
  if (!m.output.requires_grad()) {
    // The model's first chunk with no parameters (a Flatten): nothing to
    // differentiate, and no stage before it to send a gradient to.
  } else if (split) {
    // The gradient the previous stage waits for now; the weights' later (W).
    std::vector<Tensor> now;
    if (m.input.requires_grad()) now.push_back(m.input);
    m.weights = autograd::backward_deferring_weights(m.output, g, now);
  } else {
    braid::backward(m.output, g);
  }
  if (!starts_model(c)) {
    const bool wrap = stage_ == 0;
    send(m.input.grad(), wrap ? stages_ - 1 : stage_ - 1, tag(kGradient, i, c - (wrap ? 1 : 0)));
  }
  if (split) {
    // The graph stays reachable from the nodes W will apply; the rest goes.
    m.input = Tensor(), m.output = Tensor(), m.target = Tensor();
  } else {
    m = Micro{};
  }
  busy_ms_ += ms_since(t0);
}

void Stage::weight(Micro& m, const Action& a) {
  trace::Span span("step", "backward W");
  if (span) span.arg("microbatch", a.microbatch).arg("chunk", a.chunk);
  const auto t0 = Clock::now();
  m.weights.run();
  m = Micro{};
  busy_ms_ += ms_since(t0);
}

double Stage::run(nn::Module& model, const nn::LossFn& loss, const Tensor& input, const Tensor& target,
                  const std::function<void(bool)>& set_sync) {
  const auto t_step = Clock::now();
  const int M = o_.microbatches, V = chunks();
  const std::vector<Action> order = actions(o_.schedule, stages_, stage_, M, V);
  const int64_t n = input.size(0);
  std::vector<Micro> micro(static_cast<size_t>(M * V));
  busy_ms_ = 0, loss_sum_ = 0, live_ = 0, max_live_ = 0;
  device_ = input.device();
  ran_.clear();
  // The parameters' gradients are final at each chunk's last backward (or
  // W): the data axis communicates for that chunk's parameters then only.
  const Action::Kind finishing = splits_backward(o_.schedule) ? Action::weight : Action::backward;
  std::vector<int> left(static_cast<size_t>(V), M);
  for (const Action& a : order) {
    Micro& m = micro[static_cast<size_t>(a.chunk * M + a.microbatch)];
    const auto [b, e] = microbatch_rows(n, M, a.microbatch);
    if (a.kind == Action::forward) {
      m.share = static_cast<double>(e - b) / static_cast<double>(n);
      if (starts_model(a.chunk)) {
        m.input = slice(input, 0, b, e);
      } else {
        // A leaf whose gradient goes back to the previous virtual stage.
        const bool wrap = stage_ == 0;
        m.input = receive(tag(kActivation, a.microbatch, a.chunk), wrap ? stages_ - 1 : stage_ - 1,
                          V > 1 ? fmt::format("activation of micro-batch {} chunk {}", a.microbatch, a.chunk)
                                : fmt::format("activation of micro-batch {}", a.microbatch));
        m.input.set_requires_grad();
      }
      if (ends_chunks(a.chunk)) m.target = slice(target, 0, b, e);
      forward(model, loss, m, a);
      max_live_ = std::max(max_live_, ++live_);
    } else {
      if (a.kind == finishing) set_sync(--left[static_cast<size_t>(a.chunk)] == 0);
      if (a.kind == Action::backward) {
        backward(m, a);
      } else {
        weight(m, a);
      }
      if (a.kind == finishing) --live_;
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
  // Through every virtual stage in turn: this rank's chunk c after the last
  // rank's chunk c - 1.
  Tensor y;
  for (int c = 0; c < chunks(); ++c) {
    const bool first = starts_model(c);
    Tensor x = first ? input
                     : receive(tag(kEvalActivation, 0, c), stage_ == 0 ? stages_ - 1 : stage_ - 1,
                               "evaluation activation");
    y = run_chunk(model, c, x);
    if (ends_chunks(c)) {
      drain_sends();
      return y;
    }
    const bool wrap = stage_ + 1 == stages_;
    send(y, wrap ? 0 : stage_ + 1, tag(kEvalActivation, 0, c + (wrap ? 1 : 0)));
  }
  drain_sends();
  return Tensor();
}

nlohmann::json Stage::stats() const {
  return {{"busy_ms", busy_ms_}, {"step_ms", step_ms_}, {"max_live_microbatches", max_live_},
          {"order", to_string(ran_)}};
}

}  // namespace braid::parallel::pipeline
