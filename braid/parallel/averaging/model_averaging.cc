#include "braid/parallel/averaging/model_averaging.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "braid/autograd/node.h"
#include "braid/base/error.h"
#include "braid/base/json_number.h"
#include "braid/base/log.h"

namespace braid::parallel::averaging {

namespace {

std::string rule_name(const ModelAveragingOptions& o) { return o.bmuf ? "BMUF" : "local SGD"; }

}  // namespace

ModelAveraging::ModelAveraging(comm::Communicator data_axis, ModelAveragingOptions options) : o_(options) {
  const std::string key = o_.bmuf ? "bmuf" : "local_sgd";
  if (o_.period < 1) fail<ConfigError>("{}.period must be >= 1, got {}", key, o_.period);
  if (o_.warmup < 0) fail<ConfigError>("{}.warmup must be >= 0, got {}", key, o_.warmup);
  if (o_.host_period < 0 || (o_.host_period > 0 && o_.period % o_.host_period != 0)) {
    fail<ConfigError>("{}.host_period must be 0 or divide {}.period = {}, got {}", key, key, o_.period, o_.host_period);
  }
  if (!(o_.block_momentum >= 0.0 && o_.block_momentum < 1.0)) {
    fail<ConfigError>("bmuf.momentum must be in [0, 1), got {}", o_.block_momentum);
  }
  if (!(o_.block_lr > 0.0)) fail<ConfigError>("bmuf.lr must be > 0, got {}", o_.block_lr);
  world_ = Exchange(data_axis, rule_name(o_), o_.timeout, o_.algorithm);
  if (o_.host_period > 0) host_ = Exchange(data_axis.split_by_host(), rule_name(o_) + " (in host)", o_.timeout);
}

void ModelAveraging::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                           const nlohmann::json& description) {
  params_ = flat_f32(params, rule_name(o_));
  if (o_.bmuf && !params_.device().is_cpu()) {
    fail<ConfigError>("parallel.strategy = bmuf on {}: BMUF's block state (global model, momentum) is kept in host "
                      "memory; local_sgd averages on the device", braid::name(params_.device()));
  }
  buffers_ = start_replicas_equal(world_.comm(), params, buffers, description, o_.timeout, rule_name(o_));
  flat_ = params_.empty();
  grads_ = params_.empty();
  if (o_.bmuf) {
    params_.pack_values(flat_);
    global_model_.assign(values(flat_).begin(), values(flat_).end());
    start_ = global_model_;
    delta_.assign(global_model_.size(), 0.0f);
  }
  if (host_.valid() && host_.size() == world_.size()) {
    logging::info("{}: every replica is on one host; {}.host_period has nothing to do apart from the period",
                  rule_name(o_), o_.bmuf ? "bmuf" : "local_sgd");
  }
  ready_ = true;
}

void ModelAveraging::combine_gradients() {
  if (!in_warmup() || world_.size() == 1) return;
  params_.pack_grads(grads_);
  world_.average(grads_, "warm-up all-reduce of the gradients", steps_ + 1);
  params_.unpack_grads(grads_);
}

void ModelAveraging::after_step() {
  if (!ready_) fail<ValueError>("{}: after_step() before setup()", rule_name(o_));
  const int64_t k = steps_;  // this step's index
  ++steps_, ++steps_here_;
  if (k < o_.warmup) {
    last_average_ = steps_;  // replicas equal
    return;
  }
  if ((k - o_.warmup) % o_.period == 0) {
    average_globally();
  } else if (o_.host_period > 0 && (k - o_.warmup) % o_.host_period == 0) {
    average_in_host();
  }
}

void ModelAveraging::average_globally() {
  autograd::NoGradGuard no_grad;
  params_.pack_values(flat_);
  world_.average(flat_, "all-reduce of the parameters", steps_);
  world_.average_buffers(buffers_);
  if (o_.bmuf) {
    const auto eta = static_cast<float>(o_.block_momentum), zeta = static_cast<float>(o_.block_lr);
    float* x = flat_.data<float>();
    for (size_t i = 0; i < global_model_.size(); ++i) {
      const float g = x[i] - start_[i];
      delta_[i] = eta * delta_[i] + zeta * g;
      global_model_[i] += delta_[i];
      start_[i] = o_.nesterov ? global_model_[i] + eta * delta_[i] : global_model_[i];
      x[i] = start_[i];
    }
  }
  params_.unpack_values(flat_);
  last_average_ = steps_;
  ++global_;
}

void ModelAveraging::average_in_host() {
  if (host_.size() == 1) return;
  autograd::NoGradGuard no_grad;
  params_.pack_values(flat_);
  host_.average(flat_, "all-reduce of the parameters", steps_);
  host_.average_buffers(buffers_);
  params_.unpack_values(flat_);
  ++local_;
}

void ModelAveraging::finish() {
  if (!ready_) return;
  // Every rank has taken the same steps, so all average or none does.
  if (steps_ > last_average_) average_globally();
  if (o_.bmuf && global_ > 0) {  // the block's W_g, not the next block's start
    std::copy(global_model_.begin(), global_model_.end(), flat_.data<float>());
    params_.unpack_values(flat_);
  }
}

void ModelAveraging::load_state_dict(const nlohmann::json& state) {
  if (state.empty()) return;  // a checkpoint of another plan: count from 0
  // The checkpoint holds the replicas' mean, loaded on every rank: replicas
  // are equal again, and BMUF's blocks restart from it with no momentum.
  steps_ = last_average_ = json_integer<int64_t>(state.at("steps"));
  if (o_.bmuf && ready_) {
    params_.pack_values(flat_);
    global_model_.assign(values(flat_).begin(), values(flat_).end());
    start_ = global_model_;
    std::fill(delta_.begin(), delta_.end(), 0.0f);
  }
}

nn::NamedTensors ModelAveraging::model_state(const nn::Module& model) {
  if (!ready_ || steps_ == last_average_ || world_.size() == 1) return model.state_dict();
  // On copies, not counted in bytes (not training): the live replicas stay as they are.
  Exchange copy(world_.comm(), rule_name(o_), o_.timeout);
  Tensor mean = params_.empty();
  params_.pack_values(mean);
  copy.average(mean, "all-reduce of the parameters for a checkpoint", steps_);
  nn::NamedTensors out = params_.state_with(model, mean);
  std::vector<NamedParameter> means;
  for (const auto& b : buffers_) means.push_back({b.name, b.tensor.contiguous().clone()});
  copy.average_buffers(means);
  std::map<const void*, Tensor> by_storage;  // a buffer is known by its data
  for (size_t i = 0; i < buffers_.size(); ++i) by_storage[buffers_[i].tensor.raw_data()] = means[i].tensor;
  for (auto& [name, t] : out) {
    if (auto it = by_storage.find(t.raw_data()); it != by_storage.end()) t = it->second;
  }
  return out;
}

nlohmann::json ModelAveraging::stats() const {
  const double steps = static_cast<double>(std::max<int64_t>(steps_here_, 1));
  const double allreduce = world_.allreduce_bytes(static_cast<double>(params_.bytes()));
  const double sent = world_.bytes_sent() + host_.bytes_sent();
  return {{"replicas", world_.size()}, {"period", o_.period}, {"warmup", o_.warmup},
          {"host_period", o_.host_period}, {"steps", steps_here_}, {"averagings", global_},
          {"host_averagings", local_}, {"bytes_sent", sent}, {"bytes_per_step", sent / steps},
          {"allreduce_bytes_per_step", allreduce},
          {"ratio", allreduce > 0 ? nlohmann::json(sent / steps / allreduce) : nlohmann::json(nullptr)}};
}

std::string ModelAveraging::report() const {
  if (steps_here_ == 0) return "";
  const nlohmann::json s = stats();
  const double per = s["bytes_per_step"].get<double>(), ar = s["allreduce_bytes_per_step"].get<double>();
  std::string rule = o_.bmuf ? fmt::format("BMUF (block momentum {}, block lr {}{})", o_.block_momentum, o_.block_lr,
                                           o_.nesterov ? ", Nesterov" : "")
                             : std::string("local SGD");
  return fmt::format("{}: {} averaging{} every {} steps{} in {} steps{}; {:.0f} bytes sent per rank per step, "
                     "all-reduce {:.0f} ({})",
                     rule, global_, global_ == 1 ? "" : "s", o_.period,
                     o_.warmup > 0 ? fmt::format(" after {} synchronous steps", o_.warmup) : std::string(),
                     steps_here_,
                     o_.host_period > 0 ? fmt::format(", {} in-host every {}", local_, o_.host_period) : std::string(),
                     per, ar, ar > 0 ? fmt::format("{:.3f}x", per / ar) : std::string("one replica: nothing sent"));
}

}  // namespace braid::parallel::averaging
