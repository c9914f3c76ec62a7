#include "braid/parallel/pipeline/partition.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "braid/autograd/engine.h"
#include "braid/base/deadline.h"
#include "braid/base/median.h"
#include "braid/nn/attention.h"
#include "braid/ops/reduce.h"

namespace braid::parallel::pipeline {

std::vector<double> parameter_costs(const nn::Sequential& model) {
  std::vector<double> costs;
  for (size_t i = 0; i < model.size(); ++i) costs.push_back(1.0 + static_cast<double>(model[i].num_parameters()));
  return costs;
}

std::vector<double> measured_costs(const nn::Sequential& model, const Tensor& sample, int repeats) {
  std::vector<double> costs;
  Tensor x = sample;
  for (size_t i = 0; i < model.size(); ++i) {
    std::vector<double> times;
    Tensor y;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      const Tensor in = is_floating(x.dtype()) ? x.detach().set_requires_grad() : x;
      const auto t0 = Clock::now();
      y = model[i].forward(in);
      if (y.requires_grad()) backward(sum(y));
      times.push_back(seconds_since(t0));
    }
    costs.push_back(upper_median(std::move(times)));
    x = y.detach();
  }
  // The timing runs left gradients behind.
  for (size_t i = 0; i < model.size(); ++i) {
    for (const Tensor& p : model[i].parameters()) p.zero_grad();
  }
  return costs;
}

std::vector<int> balanced_starts(const std::vector<double>& costs, int stages) {
  const int n = static_cast<int>(costs.size());
  if (stages < 1 || n < stages) {
    fail<ConfigError>("a model of {} layers cannot be cut into {} pipeline stages", n, stages);
  }
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) prefix[static_cast<size_t>(i) + 1] = prefix[static_cast<size_t>(i)] + costs[static_cast<size_t>(i)];
  auto run = [&](int b, int e) { return prefix[static_cast<size_t>(e)] - prefix[static_cast<size_t>(b)]; };
  // best[k][e]: the smallest possible largest stage when layers [0, e) form k stages.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<size_t>(stages) + 1, std::vector<double>(static_cast<size_t>(n) + 1, inf));
  std::vector<std::vector<int>> cut(best.size(), std::vector<int>(static_cast<size_t>(n) + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    for (int e = k; e <= n; ++e) {
      for (int b = k - 1; b < e; ++b) {
        const double v = std::max(best[static_cast<size_t>(k) - 1][static_cast<size_t>(b)], run(b, e));
        if (v < best[static_cast<size_t>(k)][static_cast<size_t>(e)]) {
          best[static_cast<size_t>(k)][static_cast<size_t>(e)] = v;
          cut[static_cast<size_t>(k)][static_cast<size_t>(e)] = b;
        }
      }
    }
  }
  std::vector<int> starts(static_cast<size_t>(stages));
  for (int k = stages, e = n; k >= 1; --k) {
    starts[static_cast<size_t>(k) - 1] = cut[static_cast<size_t>(k)][static_cast<size_t>(e)];
    e = starts[static_cast<size_t>(k) - 1];
  }
  return starts;
}

std::vector<int> starts_from_boundaries(const std::vector<int>& boundaries, int layers, int stages) {
  if (static_cast<int>(boundaries.size()) != stages - 1) {
    fail<ConfigError>("parallel.stage_boundaries names {} boundaries; {} pipeline stages need {}", boundaries.size(),
                      stages, stages - 1);
  }
  std::vector<int> starts{0};
  for (int b : boundaries) {
    if (b <= starts.back() || b >= layers) {
      fail<ConfigError>("parallel.stage_boundaries: {} must increase within (0, {}) (the model has {} layers)", b,
                        layers, layers);
    }
    starts.push_back(b);
  }
  return starts;
}

std::shared_ptr<nn::Sequential> cut_stage(const nn::Sequential& model, const std::vector<int>& starts, int stage) {
  if (stage < 0 || stage >= static_cast<int>(starts.size())) {
    fail<ValueError>("pipeline: stage {} of {}", stage, starts.size());
  }
  const size_t begin = static_cast<size_t>(starts[static_cast<size_t>(stage)]);
  const size_t end = stage + 1 < static_cast<int>(starts.size()) ? static_cast<size_t>(starts[static_cast<size_t>(stage) + 1])
                                                                : model.size();
  // A head tied to the token embedding reads a table another stage would own
  // and update (Megatron-LM all-reduces the two copies' gradients; braid does
  // not yet): only with both layers in one stage. Checked over every stage,
  // so each rank refuses the cut alike.
  auto stage_of = [&](size_t layer) {
    return static_cast<int>(std::upper_bound(starts.begin(), starts.end(), static_cast<int>(layer)) - starts.begin()) - 1;
  };
  for (size_t i = 0; i < model.size(); ++i) {
    const auto* tied = dynamic_cast<const nn::TiedHead*>(model.layer(i).get());
    if (!tied) continue;
    for (size_t e = 0; e < model.size(); ++e) {
      const auto* embed = dynamic_cast<const nn::TokenPositionEmbedding*>(model.layer(e).get());
      if (embed && embed->tok() == tied->tied() && stage_of(e) != stage_of(i)) {
        fail<ConfigError>("pipeline: the head (layer {}, stage {}) is tied to the embedding (layer {}, stage {}); set "
                          "model.tie_embeddings = false to cut this model into stages",
                          model.name_of(i), stage_of(i), model.name_of(e), stage_of(e));
      }
    }
  }
  auto out = std::make_shared<nn::Sequential>();
  for (size_t i = begin; i < end; ++i) out->push_back(model.name_of(i), model.layer(i));
  out->train(model.is_training());
  return out;
}

RankChunks cut_chunks(const nn::Sequential& model, const std::vector<int>& starts, int stages, int rank) {
  const int virtual_stages = static_cast<int>(starts.size());
  if (stages < 1 || rank < 0 || rank >= stages || virtual_stages % stages != 0) {
    fail<ValueError>("pipeline: rank {} of {} over {} virtual stages", rank, stages, virtual_stages);
  }
  RankChunks out{std::make_shared<nn::Sequential>(), {}};
  for (int v = rank; v < virtual_stages; v += stages) {
    // cut_stage refuses a head tied to an embedding in another virtual stage.
    const auto chunk = cut_stage(model, starts, v);
    out.chunk_starts.push_back(static_cast<int>(out.model->size()));
    for (size_t i = 0; i < chunk->size(); ++i) out.model->push_back(chunk->name_of(i), chunk->layer(i));
  }
  out.model->train(model.is_training());
  return out;
}

}  // namespace braid::parallel::pipeline
