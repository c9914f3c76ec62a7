#include "braid/train/distill.h"

#include <chrono>
#include <cstring>

#include "braid/data/sampler.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"
#include "braid/ops/softmax.h"
#include "braid/train/ensemble.h"

namespace braid::train {

SoftTargets::SoftTargets(std::shared_ptr<const data::Dataset> base, Tensor probs)
    : base_(std::move(base)), probs_(probs.to(DType::f32).contiguous()), classes_(0) {
  const data::ExampleSpec s = base_->spec();
  if (s.target_dtype != DType::i64 || !s.target_shape.empty()) {
    fail<ConfigError>("distillation needs class labels as targets; the training set's are {} {}",
                      name(s.target_dtype), to_string(s.target_shape));
  }
  if (probs_.ndim() != 2 || probs_.size(0) != base_->size()) {
    fail<ValueError>("SoftTargets: {} probabilities for {} examples", to_string(probs_.shape()), base_->size());
  }
  classes_ = probs_.size(1);
}

data::ExampleSpec SoftTargets::spec() const {
  data::ExampleSpec s = base_->spec();
  s.target_shape = {classes_ + 1};
  s.target_dtype = DType::f32;
  return s;
}

void SoftTargets::read(int64_t index, std::byte* input, std::byte* target) const {
  data::check_index(index, size(), "SoftTargets");
  int64_t label = 0;
  base_->read(index, input, reinterpret_cast<std::byte*>(&label));
  // Labels are small integers: exact in f32 up to 2^24 classes.
  const float y = static_cast<float>(label);
  std::memcpy(target, &y, sizeof y);
  std::memcpy(target + sizeof y, probs_.data<float>() + index * classes_, static_cast<size_t>(classes_) * sizeof y);
}

nn::LossFn soft_target_loss(double temperature, double alpha) {
  return [temperature, alpha](const Tensor& logits, const Tensor& target) {
    const int64_t c = logits.size(-1);
    if (target.ndim() != 2 || target.size(1) != c + 1) {
      fail<ValueError>("soft_target_loss: targets {} are not (label, {} probabilities) rows for logits {}",
                       to_string(target.shape()), c, to_string(logits.shape()));
    }
    const Tensor labels = slice(target, 1, 0, 1).to(DType::i64).contiguous();
    const Tensor probs = slice(target, 1, 1, c + 1).to(logits.dtype()).contiguous();
    return nn::distillation_loss(logits, probs, reshape(labels, {-1}), temperature, alpha);
  };
}

TeacherTargets teacher_soft_targets(Trainer& member, std::shared_ptr<const data::Dataset> dataset,
                                    const TeacherOptions& o) {
  if (!(o.temperature > 0)) fail<ValueError>("teacher_soft_targets: temperature must be > 0, got {}", o.temperature);
  parallel::Ensemble& ensemble = ensemble_of(member);
  const int64_t n = dataset->size();
  const int64_t chunk = o.rows_per_allreduce > 0 ? o.rows_per_allreduce : n;
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  TeacherTargets out;
  std::vector<Tensor> parts, pending_logits, pending_labels;
  int64_t pending = 0, correct = 0;
  // The members' mean probabilities of the rows run so far, as one all-reduce.
  auto flush = [&] {
    const Tensor logits = concat(pending_logits, 0), labels = concat(pending_labels, 0);
    auto t0 = Clock::now();
    Tensor probs = softmax(div(logits, o.temperature), 1).contiguous();
    auto t1 = Clock::now();
    ensemble.average(probs);
    out.forward_seconds += seconds(t0, t1);
    out.allreduce_seconds += seconds(t1, Clock::now());
    ++out.allreduces;
    correct += count_topk(probs, labels).top1;
    parts.push_back(probs);
    pending_logits.clear(), pending_labels.clear();
    pending = 0;
  };
  data::Loader loader(dataset, std::make_shared<data::SequentialSampler>(n),
                      {.batch_size = o.batch_size, .workers = o.workers});
  loader.start_epoch(0);
  auto t_batch = Clock::now();
  while (auto b = loader.next()) {
    const Tensor logits = member.predict(b->input);
    if (logits.ndim() != 2) {
      fail<ConfigError>("distillation needs a classifier's [N, C] outputs; the members give {}",
                        to_string(logits.shape()));
    }
    pending_logits.push_back(logits);
    pending_labels.push_back(b->target.clone());  // the loader reuses its batch buffers
    pending += logits.size(0);
    out.forward_seconds += seconds(t_batch, Clock::now());
    if (pending >= chunk) flush();
    t_batch = Clock::now();
  }
  if (pending > 0) flush();
  out.probs = parts.size() == 1 ? parts[0] : concat(parts, 0);
  out.top1 = static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(n, 1));
  return out;
}

Config student_config(const Config& run, int ranks) {
  if (ranks < 1) fail<ValueError>("student_config: ranks must be >= 1, got {}", ranks);
  Config c = run;
  const std::string where = "the distilled student";
  if (const std::string& m = run.get_string("distill.model"); !m.empty()) c.set_text("model.name", m, where);
  if (const int64_t h = run.get_int("distill.hidden"); h > 0) c.set_value("model.hidden", h, where);
  c.set_value("train.epochs", run.get_int("distill.epochs"), where);
  c.set_value("distill.epochs", int64_t{0}, where);
  c.set_value("train.seed", run.get_int("train.seed") + ranks, where);
  c.set_text("train.out_dir", run.get_string("train.out_dir") + "/student", where);
  c.set_text("parallel.strategy", "auto", where);
  c.set_value("train.batch_size", std::max<int64_t>(1, run.get_int("train.batch_size") / ranks), where);
  return c;
}

DistillPlan distill_plan(const Config& run, int ranks) {
  return {.student = student_config(run, ranks), .temperature = run.get_float("distill.temperature"),
          .alpha = run.get_float("distill.alpha")};
}

}  // namespace braid::train
