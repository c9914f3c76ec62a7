#include "braid/train/ensemble.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "braid/ops/loss.h"
#include "braid/ops/shape.h"
#include "braid/ops/softmax.h"

namespace braid::train {

Config member_config(const Config& run, int member) {
  if (member < 0) fail<ValueError>("member_config: member must be >= 0, got {}", member);
  Config c = run;
  const std::string where = fmt::format("member {} of the ensemble", member);
  c.set_value("train.seed", run.get_int("train.seed") + member, where);
  c.set_text("train.out_dir", fmt::format("{}/member-{}", run.get_string("train.out_dir"), member), where);
  return c;
}

parallel::Ensemble& ensemble_of(Trainer& trainer) {
  auto* e = dynamic_cast<parallel::Ensemble*>(trainer.plan().aggregation());
  if (!e) fail<ValueError>("not an ensemble member: the plan is {}", trainer.plan().describe());
  return *e;
}

double EnsembleFigures::mean_member_top1() const {
  if (member_top1.empty()) return 0;
  double s = 0;
  for (double t : member_top1) s += t;
  return s / static_cast<double>(member_top1.size());
}

double EnsembleFigures::best_member_top1() const {
  return member_top1.empty() ? 0 : *std::max_element(member_top1.begin(), member_top1.end());
}

EnsembleFigures evaluate_ensemble(Trainer& member, data::Loader& test) {
  parallel::Ensemble& ensemble = ensemble_of(member);
  const auto t0 = std::chrono::steady_clock::now();
  Tensor targets;
  Tensor logits = member.predict(test, &targets);
  if (!logits.defined() || logits.ndim() < 2) {
    fail<ValueError>("evaluate_ensemble: the model gives no [..., C] outputs on the test set");
  }
  // [..., C] outputs (a language model's [N, T, V]) score every position.
  const int64_t classes = logits.size(-1);
  logits = reshape(logits, {-1, classes});
  targets = reshape(targets.to(DType::i64), {-1}).contiguous();
  EnsembleFigures f;
  f.examples = logits.size(0);
  const TopK own = count_topk(logits, targets);
  const double own_top1 = static_cast<double>(own.top1) / static_cast<double>(std::max<int64_t>(own.n, 1));
  const double own_loss = braid::cross_entropy(logits, targets).item();

  Tensor probs = softmax(logits, 1).contiguous();
  ensemble.average(probs);
  const TopK mixed = count_topk(probs, targets);
  f.top1 = static_cast<double>(mixed.top1) / static_cast<double>(std::max<int64_t>(mixed.n, 1));
  const float* p = probs.data<float>();
  const int64_t* y = targets.data<int64_t>();
  double nll = 0;
  for (int64_t i = 0; i < f.examples; ++i) nll -= std::log(std::max(1e-30, static_cast<double>(p[i * classes + y[i]])));
  f.loss = nll / static_cast<double>(std::max<int64_t>(f.examples, 1));

  const std::vector<double> all = ensemble.gather({own_top1, own_loss});
  for (size_t m = 0; m < all.size() / 2; ++m) {
    f.member_top1.push_back(all[2 * m]);
    f.member_loss.push_back(all[2 * m + 1]);
  }
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return f;
}

}  // namespace braid::train
