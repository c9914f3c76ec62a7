// [gossip] and [hybrid]: the decentralised strategies of the data axis
// (parallel.strategy = gossip | hybrid, docs/aggregation.md).
#include "braid/train/schema.h"

namespace braid::train {

void add_gossip_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "gossip.topology", .type = T::String, .default_value = std::string("ring"),
         .help = "strategy gossip (D-PSGD): who averages with whom each step. ring = the two neighbours; torus = the "
                 "four of a rows x cols grid (gossip.torus_rows); exponential = neighbours at distances 1, 2, 4, ... "
                 "(directed, SGP's graph); weights uniform over self and neighbours",
         .choices = {"ring", "torus", "exponential"}});
  s.add({.name = "gossip.torus_rows", .type = T::Int, .default_value = int64_t{0},
         .help = "gossip.topology = torus: rows of the grid, a divisor of the replicas; 0 = the divisor closest to "
                 "the square root", .min = 0.0});
  s.add({.name = "gossip.final_average", .type = T::Bool, .default_value = true,
         .help = "strategy gossip: after the last step, replace every replica by the exact average (one all-reduce), "
                 "so the evaluated and saved model is the consensus; false = each replica keeps its own (the reports "
                 "show data rank 0's)"});
  s.add({.name = "gossip.consensus_every", .type = T::Int, .default_value = int64_t{0},
         .help = "strategy gossip: measure and log the consensus distance mean ||x_i - mean x||^2 every n steps (one "
                 "all-reduce of the model); 0 = only at the end", .min = 0.0});
  s.add({.name = "gossip.mode", .type = T::String, .default_value = std::string("sync"),
         .help = "strategy gossip: sync = every step waits for the in-neighbours' weights of that step (D-PSGD); "
                 "async = never wait: mix once with each neighbour's latest weights as they arrive, so a slow "
                 "replica slows no one", .choices = {"sync", "async"}});
  s.add({.name = "gossip.max_staleness", .type = T::Int, .default_value = int64_t{8},
         .help = "gossip.mode = async: a neighbour's weights sent more than this many steps behind this replica's "
                 "are not mixed", .min = 0.0});
  s.add({.name = "hybrid.timeout_ms", .type = T::Float, .default_value = 0.0,
         .help = "strategy hybrid: how long the coordinator (data rank 0) waits for the other replicas' gradients "
                 "after its own is ready before stepping with those that arrived (hybrid.via = allreduce: the longest "
                 "a step stays open after the previous aggregate); 0 = wait for all (synchronous SGD)",
         .min = 0.0, .max = 3.2e10});  // a year; durations are nanoseconds in an int64
  s.add({.name = "hybrid.via", .type = T::String, .default_value = std::string("coordinator"),
         .help = "strategy hybrid: who closes a step at its deadline: the coordinator (data rank 0, whose deadline "
                 "counts from its own gradient; its link carries every gradient) or allreduce (every rank, in one "
                 "all-reduce a step joined by a thread of its own at the latest hybrid.timeout_ms after the previous "
                 "aggregate; no rank paces the others, and the bytes are an all-reduce's)",
         .choices = {"coordinator", "allreduce"}});
  s.add({.name = "hybrid.late", .type = T::String, .default_value = std::string("drop"),
         .help = "strategy hybrid: a gradient that misses its step's deadline is dropped, or applied (stale) in the "
                 "first later step it has arrived by, weighted hybrid.stale_weight^staleness",
         .choices = {"drop", "stale"}});
  s.add({.name = "hybrid.stale_weight", .type = T::Float, .default_value = 0.5,
         .help = "hybrid.late = stale: a gradient s steps old weighs this^s against 1 for the step's own gradients "
                 "in the weighted mean", .min = 0.0, .max = 1.0});  // 0 itself is refused by the strategy
  s.add({.name = "hybrid.max_staleness", .type = T::Int, .default_value = int64_t{4},
         .help = "hybrid.late = stale: late gradients older than this many steps are dropped", .min = 0.0,
         .max = 62.0});
  s.add({.name = "hybrid.catch_up", .type = T::String, .default_value = std::string("skip"),
         .help = "strategy hybrid: a worker that finds a step already closed without it (its aggregate waiting) "
                 "skips that step's forward and backward and only applies the aggregate (skip), or computes its "
                 "gradient anyway, which can then only count late (compute)",
         .choices = {"skip", "compute"}});
  s.add({.name = "hybrid.max_lag", .type = T::Int, .default_value = int64_t{8},
         .help = "strategy hybrid: steps a replica may fall behind the coordinator; at the bound the coordinator "
                 "waits for it (up to parallel.timeout_s)", .min = 1.0});
}

}  // namespace braid::train
