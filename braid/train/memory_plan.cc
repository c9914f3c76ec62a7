#include "braid/train/memory_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "braid/nn/attention.h"
#include "braid/nn/dropout.h"
#include "braid/nn/recompute.h"
#include "braid/nn/sequential.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/train/config.h"

namespace braid::train {

namespace {

constexpr int64_t kF32 = 4;  // bytes; activations are f32 (bf16 autocast keeps f32 between its products)

// A parameter's shape by the end of its name ("attn.in_proj.weight"); empty if none.
Shape param_shape(const nn::Module& m, std::string_view suffix) {
  for (const auto& [n, t] : m.named_parameters()) {
    if (n == suffix || (n.size() > suffix.size() && n.ends_with(suffix) && n[n.size() - suffix.size() - 1] == '.')) {
      return t.shape();
    }
  }
  return {};
}

double dropout_p(const nn::Module& m) {
  double p = 0;
  auto visit = [&](auto&& self, const nn::Module& mod) -> void {
    if (const auto* d = dynamic_cast<const nn::Dropout*>(&mod)) p = std::max(p, d->p());
    for (const auto& [n, c] : mod.children()) self(self, *c);
  };
  visit(visit, m);
  return p;
}

// One transformer block, per token, in elements (docs/memory.md has the
// table): what stays from forward to backward under each mode, and what
// its backward allocates on top.
// Under sequence parallelism the elements "per token" of a segment's tensors
// (the norms' inputs and statistics, the residual dropouts' masks) count for
// 1 / seq of the tokens; the functions below return elements for n tokens.
struct BlockShape {
  int64_t d = 0;    // model width (norms and residuals are whole under plain tensor parallelism)
  int64_t a = 0;    // q, k, v projection width on this rank
  int64_t dq = 0;   // attention output width on this rank
  int64_t f1 = 0;   // fc1 output (2 x hidden for SwiGLU)
  int64_t f = 0;    // activation output (fc2 input)
  int64_t norm_stats = 2;  // mean and rstd (layer norm) or rstd (RMS)
  bool rope = false;       // rotated q and k are copies
  bool dropout = false;
  int64_t seq = 1;  // sequence-parallel shards (1: the whole sequence)
};

int64_t kept_none(const BlockShape& b, int64_t n) {
  const int64_t drop = b.dropout ? 2 * b.d : 0;  // the residual dropouts' masks
  const int64_t rotated = b.rope ? b.dq + (b.a - b.dq) / 2 : 0;
  // On segments: x and h (the norms' inputs), their statistics, the masks.
  // Whole: ln1 and ln2 out (all-gathered under sequence parallelism, and kept
  // gathered by the column products for their dw), qkv, attention out, fc1
  // out, activation out.
  return (b.d + b.d + 2 * b.norm_stats + drop) * n / b.seq + (b.d + b.a + rotated + b.dq + b.d + b.f1 + b.f) * n;
}

int64_t kept_selective(const BlockShape& b, int64_t n) {
  // x and h (the norms' inputs) and with dropout the two residual dropouts'
  // masks, on segments; qkv, the fused attention's output (its core is not
  // rerun: nn::attend_keeps_scores), fc1 out. Under sequence parallelism the
  // norms' outputs are rematerialised, but the column products keep their
  // all-gathered copies, whole.
  const int64_t rotated = b.rope ? b.dq + (b.a - b.dq) / 2 : 0;
  const int64_t gathered = b.seq > 1 ? 2 * b.d : 0;
  return (b.d + b.d + (b.dropout ? 2 * b.d : 0)) * n / b.seq + (b.a + rotated + b.dq + b.f1 + gathered) * n;
}

int64_t backward_none(const BlockShape& b) {
  // the MLP's gradients at their widest: d(act out), d(fc1 out) and the
  // residual stream's two
  return b.f + b.f1 + 2 * b.d;
}

}  // namespace

int64_t MemoryPlan::activations_kept() const {
  int64_t k = 0;
  for (const LayerMemory& l : layers) k += l.kept;
  return k * live_microbatches;
}

int64_t MemoryPlan::peak_activations() const {
  int64_t b = 0;
  for (const LayerMemory& l : layers) b = std::max(b, l.backward);
  return activations_kept() + b;
}

int64_t MemoryPlan::total() const {
  return parameters + gradients + optimizer_state + communication + peak_activations();
}

std::string MemoryPlan::table() const {
  auto mib = [](int64_t bytes) { return fmt::format("{:10.3f} MiB", static_cast<double>(bytes) / (1 << 20)); };
  std::string s;
  s += fmt::format("  parameters        {}\n", mib(parameters));
  s += fmt::format("  gradients         {}\n", mib(gradients));
  s += fmt::format("  optimizer state   {}\n", mib(optimizer_state));
  s += fmt::format("  communication     {}\n", mib(communication));
  s += fmt::format("  activations peak  {}  ({} bytes: kept {} x {} micro-batch{} + largest backward)\n",
                   mib(peak_activations()), peak_activations(),
                   activations_kept() / std::max<int64_t>(live_microbatches, 1),
                   live_microbatches, live_microbatches == 1 ? "" : "es");
  s += fmt::format("  total             {}\n", mib(total()));
  s += fmt::format("  activations by layer ({} tokens a micro-batch): kept / backward\n", tokens);
  for (const LayerMemory& l : layers) {
    s += fmt::format("    {:>4} {:<20} {} / {}\n", l.name, l.kind, mib(l.kept), mib(l.backward));
  }
  return s;
}

MemoryPlan plan_memory(const nn::Module& model, const MemoryShape& shape) {
  MemoryPlan plan;
  plan.live_microbatches = shape.live_microbatches;
  plan.tokens = shape.rows * shape.context;
  const int64_t n = plan.tokens;
  const int64_t shards = std::max(shape.sequence_shards, 1);  // segments: n / shards tokens
  int64_t params = 0;
  for (const Tensor& p : model.parameters()) params += static_cast<int64_t>(p.nbytes());
  const int data = std::max(shape.data, 1);
  const bool zero = shape.zero_stage > 0 && data > 1;
  plan.parameters = zero && shape.zero_stage >= 3 ? params / data : params;
  plan.gradients = zero && shape.zero_stage >= 2 ? params / data : params;
  plan.optimizer_state =
      static_cast<int64_t>(shape.optimizer_states * static_cast<double>(zero ? params / data : params));

  const auto* seq = dynamic_cast<const nn::Sequential*>(&model);
  std::vector<std::pair<std::string, const nn::Module*>> layers;
  if (seq) {
    for (size_t i = 0; i < seq->size(); ++i) layers.emplace_back(seq->name_of(i), &(*seq)[i]);
  } else {
    layers.emplace_back("model", &model);
  }
  int64_t vocab = 0, largest_layer = 0;  // the token table's rows (a tied head's width)
  for (const auto& [name, m] : layers) {
    const Shape tok = param_shape(*m, "tok.weight");
    if (tok.size() == 2) vocab = tok[0];
    int64_t bytes = 0;
    for (const Tensor& p : m->parameters()) bytes += static_cast<int64_t>(p.nbytes());
    largest_layer = std::max(largest_layer, bytes);
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& [name, m] = layers[i];
    const bool last = i + 1 == layers.size();
    LayerMemory l{.name = name, .kind = "other", .kept = 0, .backward = 0};
    const Shape tok = param_shape(*m, "tok.weight");
    const Shape in_proj = param_shape(*m, "attn.in_proj.weight");
    const auto* block = dynamic_cast<const nn::Recomputable*>(m);
    if (tok.size() == 2) {
      l.kind = "embedding";
      const int64_t d = tok[1];
      l.kept = kF32 * (dropout_p(*m) > 0 ? d * n / shards : 0);  // the dropout mask (after the scatter)
      l.backward = kF32 * (2 * d * n + tok[0] * d);     // its output's gradient, the table's dense gradient
    } else if (block && in_proj.size() == 2) {
      const Shape out_proj = param_shape(*m, "attn.out_proj.weight"), fc1 = param_shape(*m, "fc1.weight"),
                  fc2 = param_shape(*m, "fc2.weight");
      if (out_proj.size() != 2 || fc1.size() != 2 || fc2.size() != 2) {
        l.kind = "block (not modelled)";
        plan.layers.push_back(l);
        continue;
      }
      BlockShape b{.d = in_proj[1], .a = in_proj[0], .dq = out_proj[1], .f1 = fc1[0], .f = fc2[1],
                   .norm_stats = param_shape(*m, "ln1.bias").empty() ? 1 : 2, .rope = false,
                   .dropout = dropout_p(*m) > 0, .seq = shards};
      if (const auto* tb = dynamic_cast<const nn::TransformerBlock*>(m)) b.rope = tb->attn()->options().rope_theta > 0;
      // Weight-gradient temporaries (a layer's gradient is made, then added
      // into its .grad buffer).
      const int64_t weight_grad = std::max({in_proj[0] * in_proj[1], fc1[0] * fc1[1], fc2[0] * fc2[1]});
      const nn::Recompute mode = block->recompute();
      l.kind = fmt::format("block ({})", nn::name(mode));
      switch (mode) {
        case nn::Recompute::none:
          l.kept = kept_none(b, n);
          l.backward = backward_none(b) * n + weight_grad;
          break;
        case nn::Recompute::selective:
          l.kept = kept_selective(b, n);
          // plus the activation's output refilled
          l.backward = (backward_none(b) + b.f) * n + weight_grad;
          break;
        case nn::Recompute::full:
          l.kept = b.d * n / b.seq;  // its input
          // the whole block rebuilt (less the input it kept) and its backward,
          // while the gradient arriving at the checkpoint and the one it
          // returns for the input are held
          l.backward = kept_none(b, n) + (b.d + backward_none(b)) * n + weight_grad;
          break;
      }
      l.kept *= kF32;
      l.backward *= kF32;
    } else if (last && shape.ends_model) {
      // The head: its input; the loss keeps log-probabilities [N, V]; the
      // backward makes d(logits) and the table's or weight's gradient.
      const Shape w = param_shape(*m, "weight");
      const int64_t v = w.size() == 2 ? w[0] : vocab;
      const int64_t d = w.size() == 2 ? w[1] : 0;
      l.kind = "head + loss";
      l.kept = kF32 * (v * n + (d > 0 ? d * n : 0));
      l.backward = kF32 * (v * n + (d > 0 ? d * n + v * d : 0));
    } else if (m->children().empty() && param_shape(*m, "weight").size() == 1) {
      l.kind = "norm";
      const int64_t d = param_shape(*m, "weight")[0];
      l.kept = kF32 * (d + 2) * n / shards;  // its input and statistics
      l.backward = kF32 * 2 * d * n / shards;
    }
    plan.layers.push_back(l);
  }
  // A tied head has no weight of its own: its input is the final norm's
  // output and its weight gradient the table's.
  for (size_t i = 0; i + 1 < plan.layers.size(); ++i) {
    if (plan.layers[i].kind == "norm" && plan.layers[i + 1].kind == "head + loss" &&
        param_shape(*layers[i + 1].second, "weight").empty()) {
      const int64_t d = param_shape(*layers[i].second, "weight")[0];
      plan.layers[i + 1].kept += kF32 * d * n;
      plan.layers[i + 1].backward += kF32 * (d * n + vocab * d);
    }
  }
  // Communication: ZeRO-3's gathered layers (this one and the prefetched
  // next); data-parallel buckets in flight; a pipeline's activation and
  // gradient messages.
  if (zero && shape.zero_stage >= 3) plan.communication += 2 * largest_layer;
  if (data > 1 && !zero) plan.communication += 2 * shape.bucket_bytes;
  return plan;
}

MemoryShape memory_shape(const Config& c, int stage, int stages) {
  MemoryShape s;
  const int64_t batch = c.get_int("train.batch_size");
  const int64_t micro = std::max<int64_t>(c.get_int("parallel.microbatches"), 1);
  const bool gpt = c.get_string("model.name") == "gpt" || c.get_string("model.name") == "char_transformer";
  // Context parallelism: each rank holds 1 / C of every sequence.
  s.context = gpt ? c.get_int("model.context") / std::max<int64_t>(c.get_int("parallel.context"), 1) : 1;
  if (stages > 1) {
    const int64_t m = micro * c.get_int("train.accumulate");
    s.rows = (batch + m - 1) / m;
    const std::string schedule = c.get_string("parallel.schedule");
    s.live_microbatches = schedule == "gpipe" ? m : std::min<int64_t>(stages - stage, m);
    if (schedule == "zero_bubble" || schedule == "interleaved") {
      // The schedule's own count (pipeline/schedule.h): ZB-H1 holds up to
      // min(P, M) on every stage; interleaved counts chunks of 1/V of the
      // stage, rounded up to whole micro-batches.
      const int v = schedule == "interleaved" ? static_cast<int>(c.get_int("parallel.virtual_stages")) : 1;
      const int live = parallel::pipeline::max_live(parallel::pipeline::actions(
          parallel::pipeline::parse_schedule(schedule), stages, stage, static_cast<int>(m), v));
      s.live_microbatches = (live + v - 1) / v;
    }
  } else {
    s.rows = (batch + micro - 1) / micro;
  }
  s.ends_model = stage + 1 == stages;
  const std::string opt = c.get_string("optim.name");
  if (opt == "adam" || opt == "adamw" || opt == "lamb") {
    s.optimizer_states = 2;
  } else if (opt == "sgd") {
    s.optimizer_states = c.get_float("optim.momentum") > 0 ? 1 : 0;
  } else {
    s.optimizer_states = 1;
  }
  const std::string strategy = c.get_string("parallel.strategy");
  if (strategy == "zero") s.zero_stage = static_cast<int>(c.get_int("parallel.zero_stage"));
  if (strategy == "allreduce" || strategy == "auto") s.bucket_bytes = c.get_int("parallel.bucket_kb") * 1024;
  if (c.get_bool("parallel.sequence_parallel")) s.sequence_shards = static_cast<int>(c.get_int("parallel.tensor"));
  return s;
}

}  // namespace braid::train
