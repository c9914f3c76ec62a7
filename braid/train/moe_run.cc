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
}

void set_moe_loss_scale(nn::Module& model, int64_t micro_batches) {
  for (auto& [name, moe] : moe_layers(model)) moe->set_loss_scale(1.0 / static_cast<double>(micro_batches));
}

MoeBalanceBias::MoeBalanceBias(std::vector<std::pair<std::string, nn::MoE*>> layers, comm::Communicator data,
                               const std::string& strategy)
    : data_(std::move(data)) {
  for (auto& [name, moe] : layers) {
    if (moe->balance_bias().defined()) layers_.push_back(moe);
  }
  const bool lockstep = strategy == "none" || strategy == "auto" || strategy == "allreduce" || strategy == "zero";
  if (data_.valid() && data_.size() > 1 && !lockstep) {
    fail<ConfigError>("model.moe.balance = bias with parallel.strategy = {}: the bias moves by every data rank's load "
                      "each step, and those ranks do not step together (use allreduce, zero or auto)", strategy);
  }
}

void MoeBalanceBias::on_step(const StepMetrics&) {
  if (layers_.empty()) return;
  std::vector<std::vector<int64_t>> loads;
  std::vector<double> all;  // counts, exact in doubles
  for (nn::MoE* moe : layers_) {
    loads.push_back(moe->take_step_load());
    all.insert(all.end(), loads.back().begin(), loads.back().end());
  }
  if (data_.valid() && data_.size() > 1) {
    const Duration timeout = data_.options().timeout;
    comm::Communicator(data_).allreduce(all, {.op = comm::Op::sum, .timeout = timeout}).wait(Deadline::after(timeout * 2));
  }
  size_t at = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    for (int64_t& v : loads[l]) v = static_cast<int64_t>(all[at++]);
    layers_[l]->update_balance_bias(loads[l]);
  }
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
    if (moe->balance_bias().defined()) layers.back()["bias"] = moe->balance_bias().to_vector<float>();
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
