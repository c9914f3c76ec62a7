#include "braid/parallel/averaging/easgd.h"

#include <fmt/format.h>

#include <algorithm>

#include "braid/autograd/node.h"
#include "braid/base/error.h"
#include "braid/base/json_number.h"
#include "braid/parallel/agreement.h"

namespace braid::parallel::averaging {

namespace {

void check(const EasgdOptions& o) {
  if (!(o.beta >= 0.0 && o.beta <= 1.0)) fail<ConfigError>("easgd.beta must be in [0, 1], got {}", o.beta);
  if (o.tau < 1) fail<ConfigError>("easgd.tau must be >= 1, got {}", o.tau);
}

}  // namespace

Easgd::Easgd(comm::Communicator data_axis, EasgdOptions options) : o_(options) {
  check(o_);
  world_ = Exchange(std::move(data_axis), "EASGD", o_.timeout, o_.algorithm);
}

Easgd::Easgd(std::shared_ptr<comm::Transport> transport, int servers, EasgdOptions options) : o_(options) {
  check(o_);
  center_on_servers_ = std::make_unique<CenterOnServers>(
      std::move(transport), CenterOptions{.servers = servers, .consistency = ps::Consistency::asp, .timeout = o_.timeout});
}

int Easgd::replica() const { return center_on_servers_ ? center_on_servers_->worker() : world_.rank(); }
int Easgd::replicas() const { return center_on_servers_ ? center_on_servers_->workers() : world_.size(); }

void Easgd::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                  const nlohmann::json& description) {
  params_ = flat_f32(params, "EASGD");
  flat_ = params_.empty();
  if (center_on_servers_) {
    // Worker 0's initial model becomes the center; every worker starts from it.
    params_.pack_values(flat_);
    center_ = center_on_servers_->start(values(flat_));
    std::copy(center_.begin(), center_.end(), flat_.data<float>());
    params_.unpack_values(flat_);
  } else {
    buffers_ = start_replicas_equal(world_.comm(), params, buffers, description, o_.timeout, "EASGD");
    params_.pack_values(flat_);
    center_.assign(values(flat_).begin(), values(flat_).end());
  }
  ready_ = true;
}

void Easgd::after_step() {
  if (!ready_) fail<ValueError>("EASGD: after_step() before setup()");
  ++steps_, ++steps_here_;
  if (steps_ % o_.tau == 0) exchange();
}

void Easgd::exchange() {
  autograd::NoGradGuard no_grad;
  const auto a = static_cast<float>(alpha());
  params_.pack_values(flat_);
  float* x = flat_.data<float>();
  const size_t n = center_.size();
  if (center_on_servers_) {
    center_on_servers_->pull(center_);
    change_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      change_[i] = a * (x[i] - center_[i]);
      x[i] -= change_[i];
      center_[i] += change_[i];  // the center as far as this worker knows (what begin_evaluation shows)
    }
    center_on_servers_->add(change_);
  } else {
    mean_.assign(x, x + n);
    world_.average(mean_, "all-reduce of the parameters", steps_);
    const auto beta = static_cast<float>(o_.beta);
    for (size_t i = 0; i < n; ++i) {
      const float c = center_[i];
      x[i] -= a * (x[i] - c);
      center_[i] = c + beta * (mean_[i] - c);
    }
  }
  params_.unpack_values(flat_);
  ++exchanges_;
}

std::optional<int64_t> Easgd::job_steps() const {
  if (!center_on_servers_) return std::nullopt;
  return center_on_servers_->adds() * o_.tau;
}

void Easgd::finish() {
  if (!ready_ || finished_) return;
  finished_ = true;
  if (center_on_servers_) {
    center_on_servers_->finish(center_);
  } else {
    world_.average_buffers(buffers_);
  }
  std::copy(center_.begin(), center_.end(), flat_.data<float>());
  params_.unpack_values(flat_);
}

void Easgd::begin_evaluation() {
  if (ready_ && !finished_) evaluation_.begin(params_, center_);
}

void Easgd::end_evaluation() { evaluation_.end(params_); }

void Easgd::load_state_dict(const nlohmann::json& state) {
  if (state.empty()) return;
  // The checkpoint holds the center, loaded on every worker: each restarts from it.
  steps_ = json_integer<int64_t>(state.at("steps"));
  if (ready_ && !center_on_servers_) {
    params_.pack_values(flat_);
    center_.assign(values(flat_).begin(), values(flat_).end());
  }
}

nn::NamedTensors Easgd::model_state(const nn::Module& model) {
  if (!ready_) return model.state_dict();
  std::vector<float> center = center_;
  if (center_on_servers_ && !finished_) center_on_servers_->pull(center);
  Tensor t = params_.empty();
  std::copy(center.begin(), center.end(), t.data<float>());
  return params_.state_with(model, t);
}

nlohmann::json Easgd::stats() const {
  const double steps = static_cast<double>(std::max<int64_t>(steps_here_, 1));
  const double n_bytes = static_cast<double>(params_.bytes());
  const double allreduce = replicas() > 1 ? 2.0 * (replicas() - 1) / replicas() * n_bytes : 0.0;
  const double sent = center_on_servers_ ? center_on_servers_->bytes_sent() : world_.bytes_sent();
  return {{"replicas", replicas()}, {"mode", center_on_servers_ ? "async" : "sync"}, {"beta", o_.beta},
          {"alpha", alpha()}, {"tau", o_.tau}, {"steps", steps_here_}, {"exchanges", exchanges_},
          {"bytes_sent", sent}, {"bytes_per_step", sent / steps}, {"allreduce_bytes_per_step", allreduce}};
}

std::string Easgd::report() const {
  if (steps_here_ == 0) return "";
  const nlohmann::json s = stats();
  return fmt::format("EASGD ({}, alpha {:.4g}, beta {}): {} exchange{} every {} steps in {} steps; {:.0f} bytes sent "
                     "per worker per step, all-reduce {:.0f}",
                     center_on_servers_ ? "asynchronous, center on parameter servers" : "synchronous", alpha(),
                     o_.beta, exchanges_, exchanges_ == 1 ? "" : "s", o_.tau, steps_here_,
                     s["bytes_per_step"].get<double>(), s["allreduce_bytes_per_step"].get<double>());
}

}  // namespace braid::parallel::averaging
