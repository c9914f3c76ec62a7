// Trainer: evaluation on a held-out loader and prediction (trainer.h).
#include <algorithm>
#include <cmath>

#include "braid/autograd/node.h"
#include "braid/base/deadline.h"
#include "braid/ops/autocast.h"
#include "braid/ops/shape.h"
#include "braid/train/trainer.h"

namespace braid::train {

TopK count_topk(const Tensor& logits, const Tensor& targets) {
  if (logits.ndim() < 1 || numel(targets.shape()) * logits.size(-1) != logits.numel()) {
    fail<ValueError>("count_topk: logits {} do not match targets {}", to_string(logits.shape()),
                     to_string(targets.shape()));
  }
  // Counted on the host: one copy of the logits, wherever they were computed.
  const Tensor l = logits.to(Device::cpu).to(DType::f32).contiguous();
  const Tensor t = targets.to(Device::cpu).to(DType::i64).contiguous();
  const float* lp = l.data<float>();
  const int64_t* tp = t.data<int64_t>();
  const int64_t c = logits.size(-1);
  TopK r;
  r.n = t.numel();
  for (int64_t i = 0; i < r.n; ++i) {
    const float* row = lp + i * c;
    const int64_t y = tp[i];
    if (y < 0 || y >= c) fail<IndexError>("count_topk: target {} outside [0, {})", y, c);
    int64_t above = 0;  // classes scored strictly higher than the target
    for (int64_t k = 0; k < c; ++k) above += row[k] > row[y];
    r.top1 += above < 1;
    r.top5 += above < 5;
  }
  return r;
}

EvalMetrics Trainer::evaluate() {
  if (!test_) return {.step = step_, .epoch = epoch_};
  return evaluate(*test_, o_.test_shares, o_.eval_batches);
}

EvalMetrics Trainer::evaluate(data::Loader& loader, bool shares, int64_t max_batches) {
  setup_plan();
  EvalMetrics m;
  m.step = step_;
  m.epoch = epoch_;
  const auto t0 = Clock::now();
  autograd::NoGradGuard no_grad;
  Autocast autocast(o_.precision);
  model_->eval();
  plan_->begin_evaluation();  // the job's model, where a replica holds a copy
  struct EndEvaluation {
    parallel::Plan& plan;
    ~EndEvaluation() { plan.end_evaluation(); }
  } end_evaluation{*plan_};
  double loss_sum = 0;
  TopK total;
  loader.start_epoch(0);
  int64_t batches = 0;
  while (max_batches <= 0 || batches++ < max_batches) {
    const std::optional<data::Batch> b = loader.next();
    if (!b) break;
    // Under a pipeline only the last stage sees outputs; the others run
    // their part of the forward and learn the figures below.
    const Tensor out = plan_->evaluate(*model_, b->input.to(device_));
    if (!out.defined()) continue;
    const TopK k = count_topk(out, b->target);
    loss_sum += eval_loss_(out, b->target.to(device_)).item() * static_cast<double>(k.n);
    total.top1 += k.top1, total.top5 += k.top5, total.n += k.n;
  }
  model_->train();
  std::vector<double> figures{loss_sum, static_cast<double>(total.top1), static_cast<double>(total.top5),
                              static_cast<double>(total.n)};
  plan_->share_from_model_end(figures);
  if (shares) plan_->sum_over_replicas(figures);
  loss_sum = figures[0];
  total = {static_cast<int64_t>(figures[1]), static_cast<int64_t>(figures[2]), static_cast<int64_t>(figures[3])};
  if (total.n > 0) {
    m.loss = loss_sum / static_cast<double>(total.n);
    m.top1 = static_cast<double>(total.top1) / static_cast<double>(total.n);
    m.top5 = static_cast<double>(total.top5) / static_cast<double>(total.n);
    // The loss is the mean over every predicted position (count_topk counts
    // positions), so this is the per-token perplexity.
    if (o_.tokens_per_example > 0) m.perplexity = std::exp(m.loss);
  }
  m.examples = total.n;
  m.seconds = seconds_since(t0);
  return m;
}

Tensor Trainer::predict(const Tensor& input) {
  setup_plan();
  autograd::NoGradGuard no_grad;
  Autocast autocast(o_.precision);
  model_->eval();
  const Tensor out = plan_->evaluate(*model_, input.to(device_));
  model_->train();
  // On the host: callers gather many batches of them (ensembles, distillation).
  return out.defined() ? out.to(Device::cpu).to(DType::f32) : out;
}

Tensor Trainer::predict(data::Loader& loader, Tensor* targets) {
  std::vector<Tensor> outs, ys;
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    const Tensor out = predict(b->input);
    if (!out.defined()) continue;
    outs.push_back(out);
    if (targets) ys.push_back(b->target.clone());  // the loader reuses its batch buffers
  }
  if (targets) *targets = ys.empty() ? Tensor() : concat(ys, 0);
  return outs.empty() ? Tensor() : concat(outs, 0);
}

}  // namespace braid::train
