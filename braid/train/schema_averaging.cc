// [local_sgd], [bmuf], [easgd], [admm]: the model-averaging family of replica
// aggregation (docs/aggregation.md), chosen by parallel.strategy.
#include "braid/train/schema.h"

namespace braid::train {

void add_averaging_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "local_sgd.period", .type = T::Int, .default_value = int64_t{8},
         .help = "local_sgd and bmuf: H, local steps between averagings of the replicas' parameters", .min = 1.0});
  s.add({.name = "local_sgd.warmup", .type = T::Int, .default_value = int64_t{0},
         .help = "local_sgd and bmuf: first steps trained as synchronous SGD (gradients all-reduced) before local "
                 "steps begin (post-local SGD)",
         .min = 0.0});
  s.add({.name = "local_sgd.host_period", .type = T::Int, .default_value = int64_t{0},
         .help = "local_sgd and bmuf: also average inside each host every h steps (hierarchical averaging; "
                 "local_sgd.period must be a multiple); 0 = off",
         .min = 0.0});
  s.add({.name = "bmuf.momentum", .type = T::Float, .default_value = 0.5,
         .help = "bmuf: block momentum eta in [0, 1); -1 = 1 - 1/W for W replicas (Chen & Huo's choice, which lost "
                 "1.5 points on the Fashion-MNIST MLP at 4 replicas and 2 epochs); 0 with bmuf.lr = 1 is plain model "
                 "averaging",
         .min = -1.0, .max = 0.999999});
  s.add({.name = "bmuf.lr", .type = T::Float, .default_value = 1.0,
         .help = "bmuf: block learning rate zeta applied to each block's averaged update", .min = 1e-9});
  s.add({.name = "bmuf.nesterov", .type = T::Bool, .default_value = true,
         .help = "bmuf: replicas start each block from W_g + eta Delta (Nesterov block momentum) instead of W_g"});
  s.add({.name = "easgd.beta", .type = T::Float, .default_value = 0.9,
         .help = "easgd: moving rate of the center, beta = W alpha; each exchange moves a worker by alpha (x - "
                 "center); 0 = independent training",
         .min = 0.0, .max = 1.0});
  s.add({.name = "easgd.tau", .type = T::Int, .default_value = int64_t{4},
         .help = "easgd: local steps between exchanges with the center", .min = 1.0});
  s.add({.name = "easgd.mode", .type = T::String, .default_value = std::string("sync"),
         .help = "easgd: sync = the center on every worker, updated by one all-reduce per exchange; async = the "
                 "center on parameter servers (braid launch --servers S --workers W), workers never wait for each "
                 "other",
         .choices = {"sync", "async"}});
  s.add({.name = "admm.rho", .type = T::Float, .default_value = 0.01,
         .help = "admm: penalty rho of the consensus constraint x_i = z (added to the gradient as rho (x - z + u))",
         .min = 1e-12});
  s.add({.name = "admm.tau", .type = T::Int, .default_value = int64_t{8},
         .help = "admm: local steps of the x-update per round (z and the duals update once per round)", .min = 1.0});
  s.add({.name = "admm.warm_start", .type = T::String, .default_value = std::string("z"),
         .help = "admm: where each round's tau local steps start: z (the consensus) or x (the replica's own "
                 "iterate, where the last round left it)",
         .choices = {"z", "x"}});
  s.add({.name = "admm.mode", .type = T::String, .default_value = std::string("sync"),
         .help = "admm: sync = z by one all-reduce per round; async = z on parameter servers (braid launch --servers "
                 "S --workers W) with a partial barrier and a bounded delay",
         .choices = {"sync", "async"}});
  s.add({.name = "admm.barrier", .type = T::Int, .default_value = int64_t{0},
         .help = "admm async: S, the workers that must report a round before any worker reads its z; 0 = all",
         .min = 0.0});
  s.add({.name = "admm.max_delay", .type = T::Int, .default_value = int64_t{2},
         .help = "admm async: rounds the fastest worker may run ahead of the slowest", .min = 0.0});
}

}  // namespace braid::train
