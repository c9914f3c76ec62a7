#include "braid/parallel/parameter_server.h"

#include <cstring>

#include "braid/autograd/node.h"
#include "braid/base/error.h"

namespace braid::parallel {

ParameterServer::ParameterServer(std::shared_ptr<comm::Transport> transport, ParameterServerOptions options)
    : transport_(std::move(transport)),
      o_(std::move(options)),
      client_(*transport_, {.servers = o_.servers, .timeout = o_.timeout}) {
  if (o_.n_fetch < 1 || o_.n_push < 1)
    fail<ConfigError>("ps.n_fetch and ps.n_push must be >= 1, got {} and {}", o_.n_fetch, o_.n_push);
  o_.config.validate(client_.workers());
}

ParameterServer::~ParameterServer() {
  try {
    push_.wait(Deadline::after(o_.timeout));
  } catch (...) {
  }
}

void ParameterServer::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>&,
                            const nlohmann::json&) {
  int64_t total = 0;
  for (const auto& p : params) {
    if (p.tensor.dtype() != DType::f32 || !p.tensor.is_contiguous())
      fail<ValueError>("parameter-server aggregation: parameter {} must be contiguous f32", p.name);
    params_.push_back(p.tensor);
    total += p.tensor.numel();
  }
  weights_.assign(static_cast<size_t>(total), 0.0f);
  grads_.assign(weights_.size(), 0.0f);
  sending_.assign(weights_.size(), 0.0f);
  clock_ = client_.hello(o_.config, total);
  if (client_.worker() == 0) {
    size_t at = 0;
    for (const Tensor& p : params_) {
      std::memcpy(weights_.data() + at, p.data<float>(), p.nbytes());
      at += static_cast<size_t>(p.numel());
    }
    client_.init_dense(weights_).wait(Deadline::after(o_.timeout));
  }
  pull(-1);
}

void ParameterServer::pull(int64_t gate) {
  client_.pull_dense(weights_, gate).wait(Deadline::after(o_.timeout * 3));
  size_t at = 0;
  for (const Tensor& p : params_) {
    std::memcpy(p.data<float>(), weights_.data() + at, p.nbytes());
    at += static_cast<size_t>(p.numel());
  }
}

void ParameterServer::step(double lr) {
  size_t at = 0;
  for (const Tensor& p : params_) {
    const Tensor g = p.grad();
    const auto n = static_cast<size_t>(p.numel());
    if (g.defined()) {
      const Tensor gc = g.is_contiguous() ? g : g.contiguous();
      const float* src = gc.data<float>();
      for (size_t i = 0; i < n; ++i) grads_[at + i] += src[i];
    }
    at += n;
  }
  ++steps_;
  if (steps_ % o_.n_push == 0) {
    push_.wait(Deadline::after(o_.timeout * 3));  // `sending_` is free again
    std::swap(sending_, grads_);
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    push_ = client_.push_dense(sending_, clock_, lr);
    ++clock_;
  }
  if (steps_ % o_.n_fetch == 0) {
    const ps::Consistency c = o_.config.consistency;
    pull(c == ps::Consistency::bsp || c == ps::Consistency::ssp ? clock_ : -1);
  }
}

void ParameterServer::finish() {
  if (finished_) return;
  finished_ = true;
  push_.wait(Deadline::after(o_.timeout * 3));
  // The final model, for evaluation and the checkpoint: worker 0's is the
  // job's, so it is the servers' once every worker is through.
  if (client_.worker() == 0) client_.wait_for_other_workers();
  const ps::Consistency c = o_.config.consistency;
  pull(c == ps::Consistency::bsp ? clock_ : -1);
  client_.done();
}

}  // namespace braid::parallel
