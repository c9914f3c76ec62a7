#include "braid/parallel/averaging/admm.h"

#include <fmt/format.h>

#include <algorithm>

#include "braid/autograd/node.h"
#include "braid/base/error.h"
#include "braid/base/json_number.h"

namespace braid::parallel::averaging {

namespace {

void check(const AdmmOptions& o) {
  if (!(o.rho > 0.0)) fail<ConfigError>("admm.rho must be > 0, got {}", o.rho);
  if (o.tau < 1) fail<ConfigError>("admm.tau must be >= 1, got {}", o.tau);
  if (o.barrier < 0) fail<ConfigError>("admm.barrier must be >= 0, got {}", o.barrier);
  if (o.max_delay < 0) fail<ConfigError>("admm.max_delay must be >= 0, got {}", o.max_delay);
}

CenterOptions z_options(const AdmmOptions& o, const comm::Transport& transport, int servers) {
  const int workers = transport.size() - servers;
  if (o.barrier > workers) fail<ConfigError>("admm.barrier = {} is more than the {} workers", o.barrier, workers);
  return {.servers = servers, .consistency = ps::Consistency::ssp, .staleness = o.max_delay,
          .barrier = o.barrier > 0 ? o.barrier : workers, .timeout = o.timeout};
}

}  // namespace

Admm::Admm(comm::Communicator data_axis, AdmmOptions options) : o_(options) {
  check(o_);
  world_ = Exchange(std::move(data_axis), "ADMM", o_.timeout, o_.algorithm);
}

Admm::Admm(std::shared_ptr<comm::Transport> transport, int servers, AdmmOptions options) : o_(options) {
  check(o_);
  if (!transport) fail<ConfigError>("asynchronous ADMM needs the job's transport");
  const CenterOptions z = z_options(o_, *transport, servers);
  z_on_servers_ = std::make_unique<CenterOnServers>(std::move(transport), z);
}

int Admm::replica() const { return z_on_servers_ ? z_on_servers_->worker() : world_.rank(); }
int Admm::replicas() const { return z_on_servers_ ? z_on_servers_->workers() : world_.size(); }

void Admm::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                 const nlohmann::json& description) {
  params_ = flat_f32(params, "ADMM");
  flat_ = params_.empty();
  grads_ = params_.empty();
  if (z_on_servers_) {
    // The servers' z is the mean of the workers' shares x_i + u_i only if
    // every share starts where z starts: every worker starts from its own
    // x_0, which must be worker 0's (braid train builds the model from
    // train.seed on every worker). The z read here may already hold a faster
    // worker's first change; it can be checked only when it does not.
    params_.pack_values(flat_);
    z_ = z_on_servers_->start(values(flat_));
    if (z_on_servers_->updates_at_start() == 0 && !std::equal(z_.begin(), z_.end(), values(flat_).begin())) {
      fail<ConfigError>("asynchronous ADMM: worker {} starts from a model other than worker 0's; every worker must "
                        "build the same initial model (the same train.seed)", z_on_servers_->worker());
    }
  } else {
    buffers_ = start_replicas_equal(world_.comm(), params, buffers, description, o_.timeout, "ADMM");
    params_.pack_values(flat_);
  }
  z_.assign(values(flat_).begin(), values(flat_).end());
  share_ = z_;
  u_.assign(z_.size(), 0.0f);
  ready_ = true;
}

void Admm::combine_gradients() {
  if (!ready_) fail<ValueError>("ADMM: combine_gradients() before setup()");
  params_.pack_values(flat_);
  params_.pack_grads(grads_);
  const float* x = flat_.data<float>();
  float* g = grads_.data<float>();
  const auto rho = static_cast<float>(o_.rho);
  for (size_t i = 0; i < z_.size(); ++i) g[i] += rho * (x[i] - z_[i] + u_[i]);
  params_.unpack_grads(grads_);
}

void Admm::after_step() {
  if (!ready_) fail<ValueError>("ADMM: after_step() before setup()");
  ++steps_, ++steps_here_;
  if (steps_ % o_.tau == 0) round();
}

void Admm::round() {
  autograd::NoGradGuard no_grad;
  params_.pack_values(flat_);
  const float* x = flat_.data<float>();
  const size_t n = z_.size();
  if (z_on_servers_) {
    // z on the servers is the mean of the workers' latest shares: add the
    // change of mine, divided by W, then read z back.
    const auto w = static_cast<float>(replicas());
    change_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const float share = x[i] + u_[i];
      change_[i] = (share - share_[i]) / w;
      share_[i] = share;
    }
    z_on_servers_->add(change_);
    z_on_servers_->pull(z_);
  } else {
    for (size_t i = 0; i < n; ++i) z_[i] = x[i] + u_[i];
    world_.average(z_, "all-reduce of x + u", steps_);
  }
  double r = 0;
  for (size_t i = 0; i < n; ++i) {
    const float d = x[i] - z_[i];
    u_[i] += d;
    r += static_cast<double>(d) * d;
  }
  residual_ = r;
  ++rounds_;
  if (o_.start_from_z) {
    std::copy(z_.begin(), z_.end(), flat_.data<float>());
    params_.unpack_values(flat_);
  }
}

std::optional<int64_t> Admm::job_steps() const {
  if (!z_on_servers_) return std::nullopt;
  return z_on_servers_->adds() * o_.tau;
}

void Admm::finish() {
  if (!ready_ || finished_) return;
  finished_ = true;
  if (z_on_servers_) {
    z_on_servers_->finish(z_);
  } else {
    world_.average_buffers(buffers_);
  }
  std::copy(z_.begin(), z_.end(), flat_.data<float>());
  params_.unpack_values(flat_);
}

void Admm::begin_evaluation() {
  if (ready_ && !finished_) evaluation_.begin(params_, z_);
}

void Admm::end_evaluation() { evaluation_.end(params_); }

void Admm::load_state_dict(const nlohmann::json& state) {
  if (state.empty()) return;
  steps_ = json_integer<int64_t>(state.at("steps"));
  if (ready_ && !z_on_servers_) {  // the checkpoint's z, loaded on every worker
    params_.pack_values(flat_);
    z_.assign(values(flat_).begin(), values(flat_).end());
    share_ = z_;
    std::fill(u_.begin(), u_.end(), 0.0f);
  }
}

nn::NamedTensors Admm::model_state(const nn::Module& model) {
  if (!ready_) return model.state_dict();
  Tensor t = params_.empty();
  std::copy(z_.begin(), z_.end(), t.data<float>());
  return params_.state_with(model, t);
}

nlohmann::json Admm::stats() const {
  const double steps = static_cast<double>(std::max<int64_t>(steps_here_, 1));
  const double sent = z_on_servers_ ? z_on_servers_->bytes_sent() : world_.bytes_sent();
  return {{"replicas", replicas()}, {"mode", z_on_servers_ ? "async" : "sync"}, {"rho", o_.rho}, {"tau", o_.tau},
          {"steps", steps_here_}, {"rounds", rounds_}, {"residual", residual_}, {"bytes_sent", sent},
          {"bytes_per_step", sent / steps}};
}

std::string Admm::report() const {
  if (steps_here_ == 0) return "";
  return fmt::format("ADMM ({}, rho {}): {} round{} of {} local steps; |x - z|^2 {:.4g} after the last; {:.0f} bytes "
                     "sent per worker per step",
                     z_on_servers_ ? fmt::format("asynchronous, z on parameter servers, barrier {}, max delay {}",
                                                 o_.barrier > 0 ? o_.barrier : replicas(), o_.max_delay)
                                   : std::string("synchronous"),
                     o_.rho, rounds_, rounds_ == 1 ? "" : "s", o_.tau, residual_, stats()["bytes_per_step"].get<double>());
}

}  // namespace braid::parallel::averaging
