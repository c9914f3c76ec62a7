#include "braid/train/moe_run.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

namespace braid::train {

namespace {

void collect(nn::Module& m, const std::string& prefix, std::vector<std::pair<std::string, nn::MoE*>>& out) {
  if (auto* moe = dynamic_cast<nn::MoE*>(&m)) out.emplace_back(prefix, moe);
  for (const auto& [name, child] : m.children()) collect(*child, prefix.empty() ? name : prefix + "." + name, out);
}

double max_over_mean(const std::vector<int64_t>& tokens) {
  if (tokens.empty()) return 0;
  const double total = static_cast<double>(std::accumulate(tokens.begin(), tokens.end(), int64_t{0}));
  if (total == 0) return 0;
  return static_cast<double>(*std::max_element(tokens.begin(), tokens.end())) /
         (total / static_cast<double>(tokens.size()));
}

}  // namespace

std::vector<std::pair<std::string, nn::MoE*>> moe_layers(nn::Module& model) {
  std::vector<std::pair<std::string, nn::MoE*>> out;
  collect(model, "", out);
  return out;
}

void check_expert_parallel(const Config& c, const parallel::PlanOptions& po) {
  if (po.expert <= 1) return;
  if (c.get_string("model.name") != "gpt" || c.get_int("model.moe.experts") == 0) {
    fail<ConfigError>("parallel.expert = {} needs mixture-of-experts layers (model.name = gpt with model.moe.experts "
                      "> 0)", po.expert);
  }
  if (c.get_float("train.grad_clip") > 0) {
    fail<ConfigError>("train.grad_clip with parallel.expert = {}: the gradient norm would count only this rank's "
                      "experts (use train.grad_clip = 0)", po.expert);
  }
}

void set_moe_loss_scale(nn::Module& model, int64_t micro_batches) {
  for (auto& [name, moe] : moe_layers(model)) moe->set_loss_scale(1.0 / static_cast<double>(micro_batches));
}

MoeMetrics::MoeMetrics(std::vector<std::pair<std::string, nn::MoE*>> layers, std::string out_dir)
    : layers_(std::move(layers)), out_dir_(std::move(out_dir)) {}

void MoeMetrics::on_log(const StepMetrics& m) {
  nlohmann::json layers = nlohmann::json::array();
  nn::RouterStats all;
  double ratio = 0;
  for (auto& [name, moe] : layers_) {
    const nn::RouterStats s = moe->take_stats();
    if (s.calls == 0) continue;
    const double calls = static_cast<double>(s.calls);
    const double r = max_over_mean(s.tokens);
    ratio = std::max(ratio, r);
    layers.push_back({{"layer", name}, {"tokens", s.tokens}, {"max_over_mean", r}, {"dropped", s.dropped},
                      {"dropped_fraction", s.assigned ? static_cast<double>(s.dropped) / static_cast<double>(s.assigned) : 0.0},
                      {"aux_loss", s.aux_loss / calls}, {"z_loss", s.z_loss / calls}});
    nn::RouterStats mean = s;
    mean.aux_loss /= calls, mean.z_loss /= calls, mean.calls = 1;
    mean.tokens.clear();
    all.add(mean);
  }
  if (layers.empty()) return;
  if (!jsonl_) jsonl_ = std::make_unique<JsonlWriter>((std::filesystem::path(out_dir_) / "metrics.jsonl").string());
  const double n = static_cast<double>(all.calls);
  jsonl_->write({{"event", "moe"}, {"time", unix_seconds()}, {"step", m.step}, {"layers", layers},
                 {"max_over_mean", ratio},
                 {"dropped_fraction", all.assigned ? static_cast<double>(all.dropped) / static_cast<double>(all.assigned) : 0.0},
                 {"aux_loss", all.aux_loss / n}, {"z_loss", all.z_loss / n}});
}

}  // namespace braid::train
