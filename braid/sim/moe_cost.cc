#include "braid/sim/moe_cost.h"

#include <algorithm>
#include <cmath>

#include "braid/base/error.h"
#include "braid/nn/sequential.h"
#include "braid/train/trainer_setup.h"

namespace braid::sim {

namespace {

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

bool has_moe(const train::Config& config) {
  return config.get_string("model.name") == "gpt" && config.get_int("model.moe.experts") > 0;
}

double expert_forward_seconds(OpTable& table, int64_t rows, int64_t dim, int64_t hidden, int64_t fc1_rows,
                              int threads) {
  if (rows <= 0) return 0;
  const op::OpDef& matmul = op::find("matmul");
  const op::Attrs attrs{};
  const std::vector<op::TensorMeta> fc1{{.shape = {rows, dim}, .dtype = DType::f32},
                                        {.shape = {dim, fc1_rows}, .dtype = DType::f32}};
  const std::vector<op::TensorMeta> fc2{{.shape = {rows, hidden}, .dtype = DType::f32},
                                        {.shape = {hidden, dim}, .dtype = DType::f32}};
  return table.seconds(matmul, attrs, fc1, threads) + table.seconds(matmul, attrs, fc2, threads);
}

StepProfile profile_moe_step(const train::Config& config, OpTable& table, int64_t batch, int threads) {
  train::Config dense = config;
  dense.set("model.moe.experts=0");
  StepProfile p = profile_step(dense, table, batch, threads);
  const train::ModelAndBatch m = train::model_and_batch(config);
  auto seq = std::dynamic_pointer_cast<nn::Sequential>(m.model);
  if (!seq || seq->size() != p.layers.size()) {
    fail<ValueError>("braid sim: the MoE model's layers do not match its dense twin's");
  }
  int64_t tokens = p.batch;
  for (int64_t d : m.example.input_shape) tokens *= d;
  const int64_t top_k = config.get_int("model.moe.top_k");
  // Balanced routing sends N top_k / E rows to each expert; a capacity below
  // that (factor < 1) keeps factor x of them, one above it drops none (braid
  // never pads to capacity).
  const double factor = config.get_float("model.moe.capacity_factor");
  const double kept = factor > 0 ? std::min(1.0, factor) : 1.0;
  const auto rows = static_cast<int64_t>(std::llround(static_cast<double>(tokens * top_k) * kept));
  for (size_t i = 0; i < seq->size(); ++i) {
    Tensor fc1, fc2;
    int64_t moe_other = 0;  // router and shared experts
    for (const auto& [name, t] : (*seq)[i].named_parameters()) {
      if (ends_with(name, "moe.experts.fc1")) {
        fc1 = t;
      } else if (ends_with(name, "moe.experts.fc2")) {
        fc2 = t;
      } else if (name.find("moe.") != std::string::npos) {
        moe_other += static_cast<int64_t>(t.nbytes());
      }
    }
    if (!fc1.defined()) continue;
    LayerProfile& lp = p.layers[i];
    const int64_t E = fc1.size(0), F1 = fc1.size(1), D = fc1.size(2), H = fc2.size(2);
    const int64_t shared = config.get_int("model.moe.shared_experts");
    // The twin's dense MLP is one expert over every token; the MoE layer runs
    // its experts over the routed rows, and its shared experts' dense MLP.
    const double twin = expert_forward_seconds(table, tokens, D, H, F1, threads);
    const double experts = expert_forward_seconds(table, rows, D, H, F1, threads);
    const double shared_mlp =
        shared > 0 ? expert_forward_seconds(table, tokens, D, shared * H, shared * F1, threads) : 0;
    const double more = experts + shared_mlp - twin;
    lp.forward += more;
    lp.backward += 2 * more;
    p.forward += more;
    p.backward += 2 * more;
    lp.experts = E;
    lp.expert_forward = experts;
    lp.expert_backward = 2 * experts;
    lp.dispatch_bytes = rows * D * (lp.output_bytes / std::max<int64_t>(1, tokens * D));
    // Weights: the dense MLP's out, the experts', router's and shared experts' in.
    const std::string prefix = lp.name + ".";
    int64_t twin_bytes = 0;
    double ready = 0;
    std::vector<GradientReady> kept_gradients;
    for (GradientReady& g : p.gradients) {
      if (g.layer == static_cast<int>(i) &&
          (g.name.rfind(prefix + "fc1.", 0) == 0 || g.name.rfind(prefix + "fc2.", 0) == 0)) {
        twin_bytes += g.bytes;
        ready = std::max(ready, g.ready);
      } else {
        kept_gradients.push_back(g);
      }
    }
    // Backward runs from the last layer to the first: this layer's longer
    // backward makes its own gradients and every earlier layer's later.
    for (GradientReady& g : kept_gradients) {
      if (g.layer <= static_cast<int>(i)) g.ready += 2 * more;
    }
    ready += 2 * more;
    const auto expert_bytes = static_cast<int64_t>(fc1.nbytes() + fc2.nbytes());
    kept_gradients.push_back({.name = prefix + "moe.experts", .layer = static_cast<int>(i), .bytes = expert_bytes,
                              .ready = ready, .expert = true});
    if (moe_other > 0) {
      kept_gradients.push_back({.name = prefix + "moe.router", .layer = static_cast<int>(i), .bytes = moe_other,
                                .ready = ready});
    }
    p.gradients = std::move(kept_gradients);
    const double per_byte = lp.parameter_bytes > 0 ? lp.update / static_cast<double>(lp.parameter_bytes) : 0;
    const int64_t delta = expert_bytes + moe_other - twin_bytes;
    lp.expert_parameter_bytes = expert_bytes;
    lp.expert_update = per_byte * static_cast<double>(expert_bytes);
    lp.update += per_byte * static_cast<double>(delta);
    p.update += per_byte * static_cast<double>(delta);
    lp.parameter_bytes += delta;
    p.parameter_bytes += delta;
  }
  std::stable_sort(p.gradients.begin(), p.gradients.end(),
                   [](const GradientReady& a, const GradientReady& b) { return a.ready < b.ready; });
  p.model = config.get_string("model.name");
  return p;
}

}  // namespace braid::sim
