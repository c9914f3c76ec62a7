// Knowledge distillation of an ensemble into one student (distill.* keys,
// docs/aggregation.md): the teacher's soft targets for the training set,
// the dataset and loss the student trains with, and the student's
// configuration. The student is an ordinary TrainingRun: its checkpoints
// load in `braid train` and `braid inspect` like any other.
#pragma once

#include <memory>

#include "braid/data/dataset.h"
#include "braid/nn/loss.h"
#include "braid/train/config.h"
#include "braid/train/trainer.h"

namespace braid::train {

// `base`'s examples with their teacher probabilities: the target becomes f32
// [C + 1] = (label, p_1 .. p_C), so any loader, sampler and plan carry soft
// targets unchanged. `probs` [base->size(), C] f32; `base`'s targets must
// be class labels (i64 scalars).
class SoftTargets final : public data::Dataset {
 public:
  SoftTargets(std::shared_ptr<const data::Dataset> base, Tensor probs);
  int64_t size() const override { return base_->size(); }
  data::ExampleSpec spec() const override;
  void read(int64_t index, std::byte* input, std::byte* target) const override;

 private:
  std::shared_ptr<const data::Dataset> base_;
  Tensor probs_;
  int64_t classes_;
};

// nn::distillation_loss on SoftTargets' targets: logits [N, C] against
// target [N, C + 1].
nn::LossFn soft_target_loss(double temperature, double alpha);

struct TeacherOptions {
  double temperature = 4;
  int64_t batch_size = 256;  // rows per forward pass
  int workers = 1;           // loader threads
  // Rows per all-reduce: 0 = all of them in one all-reduce after every
  // forward pass (what braid train does); a batch size = what computing the
  // targets during the student's steps would cost per epoch (benchmarks).
  int64_t rows_per_allreduce = 0;
};

struct TeacherTargets {
  Tensor probs;  // [N, C] f32: the members' mean of softmax(logits / T)
  double top1 = 0;  // the teacher's top-1 against the labels (at any T)
  double forward_seconds = 0, allreduce_seconds = 0;
  int64_t allreduces = 0;
};

// Collective over the ensemble's members: each runs its model over `data`
// in order (no augmentation) and the members' probabilities at temperature T
// are averaged. ConfigError unless the model gives [N, C] outputs.
TeacherTargets teacher_soft_targets(Trainer& member, std::shared_ptr<const data::Dataset> data,
                                    const TeacherOptions& options);

// The student's configuration: the run's, with model.name and model.hidden
// from distill.model and distill.hidden (when set), train.epochs =
// distill.epochs, train.seed + `ranks` (no member's seed),
// train.out_dir/student, data parallel over the `ranks` ranks
// (parallel.strategy = auto) with floor(train.batch_size / ranks) examples
// per rank (the global batch the members had, as near as divides), and
// distill.epochs = 0, so the configuration stored in the student's
// checkpoints trains it as a plain model.
Config student_config(const Config& run, int ranks);

// Everything distillation reads from the run's config, read before the
// members train (so a key it would not use is refused up front).
struct DistillPlan {
  Config student;           // student_config(run, ranks)
  double temperature = 1;   // distill.temperature
  double alpha = 0.5;       // distill.alpha
};
DistillPlan distill_plan(const Config& run, int ranks);

}  // namespace braid::train
