// [ensemble] and [distill]: parallel.strategy = ensemble's members and the
// student distilled from them (docs/aggregation.md, "Ensembles and distillation").
#include "braid/train/schema.h"

namespace braid::train {

void add_ensemble_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "ensemble.data", .type = T::String, .default_value = std::string("whole"),
         .help = "what each member trains on: whole = the whole training set in its own order (seed train.seed + "
                 "member); shard = its 1/K of the training set (disjoint shards, K members train the data one "
                 "model would)",
         .choices = {"whole", "shard"}});
  s.add({.name = "distill.epochs", .type = T::Int, .default_value = int64_t{0},
         .help = "strategy ensemble: after the members, train one student for this many epochs on the members' "
                 "averaged soft targets (0 = no student); it trains data-parallel over the job's ranks with the "
                 "run's other train.* and optim.* settings",
         .min = 0.0});
  // Defaults measured (docs/aggregation.md, "Figures"): on Fashion-MNIST T = 2,
  // alpha = 0.5 did as well as any setting tried; T = 4, alpha = 0.9 made a
  // small student collapse under a confident teacher at the members' lr.
  s.add({.name = "distill.temperature", .type = T::Float, .default_value = 2.0,
         .help = "softmax temperature T of the teacher's soft targets and the student's soft term", .min = 0.01});
  s.add({.name = "distill.alpha", .type = T::Float, .default_value = 0.5,
         .help = "weight of the soft term: alpha T^2 KL(teacher || student at T) + (1 - alpha) cross-entropy with "
                 "the labels",
         .min = 0.0, .max = 1.0});
  s.add({.name = "distill.model", .type = T::String, .default_value = std::string(""),
         .help = "the student's model.name; \"\" = the members' model", .choices = {"", "mlp", "cnn"}});
  s.add({.name = "distill.hidden", .type = T::Int, .default_value = int64_t{0},
         .help = "the student's model.hidden (mlp width); 0 = the members' model.hidden", .min = 0.0});
}

}  // namespace braid::train
