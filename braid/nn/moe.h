// A sparse mixture-of-experts feed-forward layer (Shazeer et al., 2017;
// GShard, Lepikhin et al., 2020; Switch, Fedus et al., 2021): a router picks
// top_k of E expert MLPs per token, the chosen experts run on their tokens
// only, and the outputs are summed with the router's gates. It stands where a
// transformer block's MLP stands (nn::TransformerBlock with
// BlockOptions::moe.experts > 0); docs/moe.md is the user's view.
//
//   router   logits = x Wr^T [N, E] (no bias); p = softmax(logits); the top_k
//            experts per token (ties to the lower index); gates = their p,
//            renormalised to sum 1 when top_k > 1 (top-1 keeps p, as Switch,
//            or the router would get no gradient from the output)
//   capacity C = ceil(capacity_factor N top_k / E) assignments per expert;
//            assignments beyond it are dropped, first choices of every token
//            before second choices, tokens in order (GShard's priority); a
//            dropped assignment adds nothing (its token keeps the residual).
//            capacity_factor 0: dropless
//   experts  two grouped GEMMs over every local expert (ops/grouped_gemm.h):
//            fc1 [E, H (2H for SwiGLU), D], fc2 [E, D, H], no biases
//   shared   shared_experts > 0: a dense MLP of width shared_experts x H that
//            every token passes through, added to the routed sum (DeepSeekMoE)
//   losses   load balance (Switch's form): E sum_e f_e P_e, f_e the fraction
//            of the N top_k assignments routed to e (before dropping), P_e the
//            mean router probability of e; router z-loss (ST-MoE):
//            mean_n logsumexp(logits_n)^2. Their weighted sum joins the
//            training loss's gradient through the layer's output (below).
//   balance  aux_loss: the load-balance loss above. bias: DeepSeek-V3's
//            auxiliary-loss-free balancing: a per-expert bias b [E] (a buffer,
//            "balance_bias") is added to p for the top_k choice only (gates
//            stay p), and after each optimizer step b_e += bias_rate
//            sign(mean load - load_e), load counted over the step's tokens of
//            every data rank (the trainer sums them, so every rank routes
//            alike); the balance loss is then reported, not trained
//
// The auxiliary losses are not returned: the layer's output carries them. Its
// autograd node passes the output's gradient through unchanged and gives the
// auxiliary sum the gradient `loss_scale` (Megatron-Core's auxiliary-loss
// scaler), so backward from the training loss alone differentiates
// loss + aux_coef * balance + z_coef * z, in any plan, pipeline stages
// included. The trainer sets loss_scale to 1 / (micro-batches per step), as
// each micro-batch's loss is weighted by its share of the step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "braid/base/rng.h"
#include "braid/nn/linear.h"
#include "braid/nn/module.h"

namespace braid::nn {

enum class MlpKind;  // attention.h

enum class MoeBalance { aux_loss, bias };

struct MoeOptions {
  int64_t experts = 0;          // E; 0: a dense MLP instead
  int64_t top_k = 2;
  int64_t every = 1;            // (for the model) every n-th block's MLP is an MoE layer
  double capacity_factor = 0;   // 0: dropless
  int64_t shared_experts = 0;
  double aux_loss = 0.01;       // coefficient of the load-balancing loss
  double z_loss = 0.001;        // coefficient of the router z-loss
  MoeBalance balance = MoeBalance::aux_loss;
  double bias_rate = 0.001;     // balance = bias: the bias's step per optimizer step
};

// Router figures summed over the training-mode calls since the last take.
struct RouterStats {
  std::vector<int64_t> tokens;  // per expert: assignments routed to it (before dropping)
  int64_t assigned = 0;         // N top_k summed over calls
  int64_t dropped = 0;          // assignments over capacity
  double aux_loss = 0, z_loss = 0;  // sums of the unweighted losses
  int64_t calls = 0;
  void add(const RouterStats& o);
};

// Rows of a batch for the local experts, and what combine needs to send the
// experts' outputs back.
struct ExpertBatch {
  Tensor rows;                  // [A', D] sorted by local expert
  std::vector<int64_t> counts;  // per local expert
  std::shared_ptr<void> route;
};

// Moves expert inputs to the ranks that hold the experts and the outputs
// back (expert parallelism, braid/parallel/expert_parallel/). Both calls are
// differentiable and collective over the expert group.
class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;
  // rows [A, D] sorted by global expert, counts [E] -> this rank's experts' rows.
  virtual ExpertBatch dispatch(const Tensor& rows, const std::vector<int64_t>& counts) = 0;
  // The experts' outputs [A', D] in dispatch's order -> [A, D] in the order
  // dispatch was given.
  virtual Tensor combine(const Tensor& rows, const ExpertBatch& batch) = 0;
};

// Experts first .. first + count - 1 of E: parameters "fc1" [count, H or 2H,
// D] and "fc2" [count, D, H], each expert drawn as an nn::Linear is.
class Experts final : public Module {
 public:
  Experts(int64_t count, int64_t dim, int64_t hidden, MlpKind mlp, Generator& gen);
  // Empty: for the slice of another Experts (expert parallelism).
  Experts(const Experts& all, int64_t first, int64_t count);
  // rows [A, D] sorted by expert, counts [count] -> [A, D].
  Tensor forward(const Tensor& rows, const std::vector<int64_t>& counts);
  Tensor forward(const Tensor& x) override;  // refused: needs counts
  int64_t count() const { return fc1_.size(0); }
  const Tensor& fc1() const { return fc1_; }
  const Tensor& fc2() const { return fc2_; }

 private:
  MlpKind mlp_;
  Tensor fc1_, fc2_;
};

class MoE final : public Module {
 public:
  // hidden: each expert's MLP width.
  MoE(int64_t dim, int64_t hidden, MlpKind mlp, const MoeOptions& options, Generator& gen);
  // x [..., D] -> [..., D].
  Tensor forward(const Tensor& x) override;

  // Keeps experts [first, first + count) and routes through `exchange`
  // (expert parallelism); the router and shared experts stay whole.
  void keep_experts(int64_t first, int64_t count, std::shared_ptr<ExpertExchange> exchange);
  void set_loss_scale(double s) { loss_scale_ = s; }
  RouterStats take_stats();
  // balance = bias: assignments routed to each expert by the training
  // forwards since the last take [E]; then the step's load summed over every
  // data rank moves the bias (b_e += bias_rate sign(mean - load_e)).
  std::vector<int64_t> take_step_load();
  void update_balance_bias(const std::vector<int64_t>& load);
  const Tensor& balance_bias() const { return bias_; }  // [E] f32; undefined for balance = aux_loss

  const MoeOptions& options() const { return o_; }
  int64_t first_expert() const { return first_; }
  const std::shared_ptr<Linear>& router() const { return router_; }
  const std::shared_ptr<Experts>& experts() const { return experts_; }
  const std::shared_ptr<Linear>& shared_fc1() const { return shared_fc1_; }
  const std::shared_ptr<Linear>& shared_fc2() const { return shared_fc2_; }

 private:
  int64_t dim_, hidden_;
  MlpKind mlp_;
  MoeOptions o_;
  int64_t first_ = 0;
  double loss_scale_ = 1;
  std::shared_ptr<Linear> router_, shared_fc1_, shared_fc2_;
  std::shared_ptr<Experts> experts_;
  std::shared_ptr<ExpertExchange> exchange_;
  RouterStats stats_;
  Tensor bias_;
  std::vector<int64_t> step_load_;
};

// The MLP activation of `kind` on fc1's output (SwiGLU: (gate, up) side by side).
Tensor mlp_activation(const Tensor& h, MlpKind kind);

}  // namespace braid::nn
