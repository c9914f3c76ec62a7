#include "braid/parallel/averaging/replica_exchange.h"

#include <cstring>
#include <map>

#include "braid/base/deadline.h"
#include "braid/base/error.h"
#include "braid/parallel/agreement.h"

namespace braid::parallel::averaging {

void FlatReplica::bind(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                       const std::string& rule) {
  params_.clear(), buffers_.clear(), n_ = 0;
  shapes_ = nlohmann::json::array();
  for (const auto& p : params) {
    if (p.tensor.dtype() != DType::f32 || !p.tensor.is_contiguous()) {
      fail<ValueError>("{}: parameter {} must be contiguous f32 (is {})", rule, p.name, braid::name(p.tensor.dtype()));
    }
    params_.push_back(p.tensor);
    n_ += p.tensor.numel();
    shapes_.push_back({p.name, p.tensor.shape()});
  }
  for (const auto& b : buffers) {
    if (b.tensor.dtype() == DType::f32) buffers_.push_back(b);
    shapes_.push_back({b.name, b.tensor.shape(), std::string(braid::name(b.tensor.dtype()))});
  }
}

void FlatReplica::read(std::vector<float>& out) const {
  out.resize(static_cast<size_t>(n_));
  size_t at = 0;
  for (const Tensor& p : params_) {
    std::memcpy(out.data() + at, p.data<float>(), p.nbytes());
    at += static_cast<size_t>(p.numel());
  }
}

void FlatReplica::write(std::span<const float> in) const {
  if (static_cast<int64_t>(in.size()) != n_) fail<ValueError>("FlatReplica::write: {} values for {} entries", in.size(), n_);
  size_t at = 0;
  for (const Tensor& p : params_) {
    std::memcpy(p.data<float>(), in.data() + at, p.nbytes());
    at += static_cast<size_t>(p.numel());
  }
}

void FlatReplica::read_grads(std::vector<float>& out) const {
  out.assign(static_cast<size_t>(n_), 0.0f);
  size_t at = 0;
  for (const Tensor& p : params_) {
    const Tensor g = p.grad();
    if (g.defined()) {
      const Tensor c = g.is_contiguous() ? g : g.contiguous();
      std::memcpy(out.data() + at, c.data<float>(), c.nbytes());
    }
    at += static_cast<size_t>(p.numel());
  }
}

void FlatReplica::write_grads(std::span<const float> in) const {
  size_t at = 0;
  for (const Tensor& p : params_) {
    Tensor g = p.grad();
    const auto n = static_cast<size_t>(p.numel());
    if (g.defined()) {
      if (!g.is_contiguous()) fail<ValueError>("FlatReplica::write_grads: a gradient is not contiguous");
      std::memcpy(g.data<float>(), in.data() + at, n * sizeof(float));
    }
    at += n;
  }
}

nn::NamedTensors FlatReplica::state_with(const nn::Module& model, std::span<const float> values) const {
  if (static_cast<int64_t>(values.size()) != n_) fail<ValueError>("FlatReplica::state_with: {} values for {} entries", values.size(), n_);
  std::map<const void*, Tensor> by_data;  // a parameter is known by its storage
  size_t at = 0;
  for (const Tensor& p : params_) {
    Tensor t = Tensor::empty(p.shape(), DType::f32);
    std::memcpy(t.data<float>(), values.data() + at, t.nbytes());
    at += static_cast<size_t>(p.numel());
    by_data[p.raw_data()] = t;
  }
  nn::NamedTensors out = model.state_dict();
  for (auto& [name, t] : out) {
    if (auto it = by_data.find(t.raw_data()); it != by_data.end()) t = it->second;
  }
  return out;
}

Exchange::Exchange(comm::Communicator comm, std::string rule, Duration timeout, comm::Algorithm algorithm)
    : comm_(std::move(comm)), rule_(std::move(rule)), timeout_(timeout), algorithm_(algorithm) {
  if (!comm_.valid()) fail<ValueError>("{}: needs a valid data-axis communicator", rule_);
}

void Exchange::wait(comm::Work work, const char* what, int64_t step) const {
  const auto start = std::chrono::steady_clock::now();
  auto waited = [&] {
    return format_duration(std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start));
  };
  try {
    work.wait(Deadline::after(timeout_ * 2));
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("rank {} of {} on the data axis: {}'s {} at step {} waited {}: {}", comm_.rank(), comm_.size(),
                       rule_, what, step, waited(), e.what());
  } catch (const PeerError& e) {
    fail<PeerError>("rank {} of {} on the data axis: {}'s {} at step {} failed after {}: {}", comm_.rank(),
                    comm_.size(), rule_, what, step, waited(), e.what());
  }
}

double Exchange::allreduce_bytes(double bytes) const {
  const int w = comm_.size();
  return w > 1 ? 2.0 * (w - 1) / w * bytes : 0.0;
}

void Exchange::average(std::span<float> values, const char* what, int64_t step) {
  if (comm_.size() == 1 || values.empty()) return;
  wait(comm_.allreduce(values, {.op = comm::Op::avg, .algorithm = algorithm_, .timeout = timeout_}), what, step);
  bytes_ += allreduce_bytes(static_cast<double>(values.size_bytes()));
}

void Exchange::average_buffers(const std::vector<NamedParameter>& buffers, int64_t step) {
  for (const auto& b : buffers) {
    Tensor staged = b.tensor.contiguous();
    average({staged.data<float>(), static_cast<size_t>(staged.numel())}, "all-reduce of the buffers", step);
    if (staged.raw_data() != b.tensor.raw_data()) b.tensor.copy_from(staged);
  }
}

void Exchange::broadcast(std::span<float> values, int root, const char* what, int64_t step) {
  if (comm_.size() == 1 || values.empty()) return;
  wait(comm_.broadcast(values, {.root = root, .timeout = timeout_}), what, step);
  bytes_ += static_cast<double>(values.size_bytes());
}

void start_equal(Exchange& exchange, const FlatReplica& replica, const nlohmann::json& description, Duration timeout) {
  check_agreement(exchange.comm(), {{"config", description}, {"params", replica.shapes()}}, timeout);
  if (exchange.size() == 1) return;
  std::vector<float> flat;
  replica.read(flat);
  exchange.broadcast(flat, 0, "broadcast of data rank 0's parameters", 0);
  replica.write(flat);
  for (const auto& b : replica.buffers()) {
    Tensor staged = b.tensor.contiguous();
    exchange.broadcast({staged.data<float>(), static_cast<size_t>(staged.numel())}, 0,
                       "broadcast of data rank 0's buffers", 0);
    if (staged.raw_data() != b.tensor.raw_data()) b.tensor.copy_from(staged);
  }
}

}  // namespace braid::parallel::averaging
