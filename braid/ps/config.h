// What the servers of a parameter-server job must know, chosen by the ps.*
// config keys: how pushes from the workers are combined (the consistency
// model), which optimizer the servers run, and how they checkpoint.
//
// Consistency models (W workers; a worker's clock counts its pushes):
//   bsp       apply clock t once every worker pushed t (the mean of W
//             gradients); a pull at clock t waits for t to be applied.
//             With backup_workers = b, clock t is applied after the first
//             W - b pushes and the late ones are dropped (and counted).
//   asp       apply each gradient on arrival; pulls never wait.
//   ssp       asp, but a worker at clock c may not pull until the slowest
//             live worker reached c - staleness. With barrier = S > 0 the
//             pull also waits until S workers reached clock c (a partial
//             barrier: asynchronous ADMM's "first S of W").
//   softsync  n-softsync (Zhang et al., 2016): apply after ceil(W / n)
//             gradients, each scaled by 1 / its staleness (the updates the
//             server made since the worker pulled).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "braid/comm/codec/codec.h"

namespace braid::ps {

enum class Consistency { bsp, asp, ssp, softsync };

Consistency parse_consistency(std::string_view name);
std::string to_string(Consistency c);

// The server-side optimizer. lr arrives with every push (so the workers'
// learning-rate schedule still applies); the rest is fixed for the job.
struct UpdaterOptions {
  std::string name = "sgd";  // sgd, momentum, adagrad, adam
  double momentum = 0.9;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0;
  // ps.async_momentum = offset: the momentum updater under asynchronous
  // consistency runs server_momentum() instead of `momentum` (below).
  bool offset_async = true;
};

struct PsConfig {
  Consistency consistency = Consistency::bsp;
  int64_t staleness = 2;       // ssp
  int64_t softsync_n = 1;      // softsync
  int64_t backup_workers = 0;  // bsp
  int64_t barrier = 0;         // ssp: workers that must reach a clock before a pull at it (0: none)
  // How workers encode dense pushes (fp16, bf16, qsgd, onebit, topk; "none":
  // raw f32); the servers decode with the same codec. Declared before
  // `updater`: after it, GCC 12 -O3 reports a false maybe-uninitialized for
  // updater.name wherever a PsConfig temporary is built from designated
  // initializers (examples/sparse_embeddings.cc, trainer_test).
  comm::codec::CodecOptions codec{};
  UpdaterOptions updater{};
  std::string checkpoint_dir{};   // empty: servers keep no checkpoints
  int64_t checkpoint_every = 0;   // dense updates between shard checkpoints (0: only at the end)
  // Load the shard checkpoints found in checkpoint_dir (a resumed or
  // restarted job); false: a fresh run, which overwrites them.
  bool resume = false;
  uint64_t seed = 0;              // initial values of sparse rows
  // How long a server waits for a worker (a bsp clock, a silent worker);
  // servers adopt the workers' value at hello.
  double timeout_s = 300;

  nlohmann::json to_json() const;
  static PsConfig from_json(const nlohmann::json& j);
  // ConfigError naming the key for a setting that cannot work with `workers`.
  void validate(int workers) const;
};

// The momentum the servers' momentum updater runs with `workers` workers.
// With A workers pushing in turn the servers apply A updates where a
// synchronous job applies one (the mean of A gradients): each step of lr on
// one worker's gradient is an A-th of a synchronous round, so a round moves
// the weights A times as far, and in the long run momentum mu multiplies a
// step by 1 / (1 - mu). Asynchrony then reads as momentum of its own,
// 1 - 1/A (Mitliagkas et al., "Asynchrony begets momentum", 2016), which
// compounds with optim.momentum: 4 asp workers at 0.9 diverged on the
// Fashion-MNIST MLP. With offset_async the servers run the momentum mu' for
// which A / (1 - mu') = 1 / (1 - mu), the long-run step of a synchronous
// round: mu' = max(0, 1 - A (1 - mu)), A = the workers under asp and ssp, n
// under n-softsync, 1 under bsp (0.6 for 4 workers at 0.9); without it,
// `momentum` as set.
double server_momentum(const PsConfig& c, int workers);

}  // namespace braid::ps
