// A run's mixture-of-experts layers (nn/moe.h; docs/moe.md): the settings the
// plan decides (the auxiliary losses' weight per micro-batch, refusals of
// what expert parallelism cannot take) and the router statistics written to
// metrics.jsonl.
//
//   {"event":"moe","time","step","layers":[{"layer","tokens","max_over_mean","dropped",
//    "dropped_fraction","aux_loss","z_loss"}],"max_over_mean","dropped_fraction","aux_loss","z_loss"}
//
// per train.log_every window, of the tokens this rank routed (its data shard):
// tokens per expert, max / mean of them, assignments dropped over capacity,
// and the unweighted load-balancing and z losses averaged over the window's
// micro-batches (the top-level figures over every layer); with
// model.moe.balance = bias each layer's "bias" [E] as it stands.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/nn/moe.h"
#include "braid/parallel/plan_factory.h"
#include "braid/train/callbacks.h"
#include "braid/train/config.h"
#include "braid/train/metrics.h"

namespace braid::train {

// Every MoE layer of `model` with its dotted name ("3.moe").
std::vector<std::pair<std::string, nn::MoE*>> moe_layers(nn::Module& model);

// Before the plan: refuses parallel.expert without MoE layers and what
// expert parallelism does not take (ConfigError naming the keys).
void check_expert_parallel(const Config& c, const parallel::PlanOptions& po);

// After the plan: each micro-batch's auxiliary losses weigh 1 / (micro-batches
// per step), as its loss does. micro_batches: of one optimizer step.
void set_moe_loss_scale(nn::Module& model, int64_t micro_batches);

// model.moe.balance = bias: after every step each layer's load (assignments
// per expert) is summed over `data` (every rank holding a replica of the
// layer, so the tokens of the whole step), and the bias moves by it alike on
// every rank. Refuses a plan whose data ranks do not step together
// (ConfigError naming the keys).
class MoeBalanceBias final : public Callback {
 public:
  MoeBalanceBias(std::vector<std::pair<std::string, nn::MoE*>> layers, comm::Communicator data,
                 const std::string& strategy);
  void on_step(const StepMetrics& m) override;

 private:
  std::vector<nn::MoE*> layers_;
  comm::Communicator data_;
};

class MoeMetrics final : public Callback {
 public:
  // Appends to out_dir/metrics.jsonl (opened at the first record).
  MoeMetrics(std::vector<std::pair<std::string, nn::MoE*>> layers, std::string out_dir);
  void on_log(const StepMetrics& m) override;

 private:
  std::vector<std::pair<std::string, nn::MoE*>> layers_;
  std::string out_dir_;
  std::unique_ptr<JsonlWriter> jsonl_;
};

}  // namespace braid::train
