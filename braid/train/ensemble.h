// Ensembles from `braid train` (parallel.strategy = ensemble,
// docs/aggregation.md): the configuration each member trains, and the
// members' test figures and the ensemble's (the average of the members'
// softmax probabilities) after training. The members' collectives are
// parallel::Ensemble's; nothing here runs while they train.
#pragma once

#include <vector>

#include "braid/data/loader.h"
#include "braid/parallel/ensemble.h"
#include "braid/train/config.h"
#include "braid/train/trainer.h"

namespace braid::train {

// Member k's configuration: train.seed + k (its initial weights, data order
// and dropout masks all differ from the other members') and
// train.out_dir/member-k (its checkpoints). The run's own seed stays what
// shard mode cuts the data by (trainer_setup.cc), so shards stay disjoint.
Config member_config(const Config& run, int member);

// The plan's ensemble; ValueError naming the plan when it has none.
parallel::Ensemble& ensemble_of(Trainer& trainer);

struct EnsembleFigures {
  int64_t examples = 0;                       // rows scored ([..., C] outputs count each position)
  std::vector<double> member_top1, member_loss;  // [members], each member's own model
  double top1 = 0;  // of the members' mean probabilities
  double loss = 0;  // mean -log of the mean probability of the target (floored at 1e-30)
  double seconds = 0;
  double mean_member_top1() const;
  double best_member_top1() const;
};

// Collective over the members: each scores its own model on `test` (the
// same examples, in the same order, on every member), then the members'
// softmax probabilities are averaged in one all-reduce and scored. Every
// member gets every figure.
EnsembleFigures evaluate_ensemble(Trainer& member, data::Loader& test);

}  // namespace braid::train
