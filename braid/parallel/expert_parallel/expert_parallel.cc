#include "braid/parallel/expert_parallel/expert_parallel.h"

#include <functional>

#include "braid/comm/tensor_buffer.h"
#include "braid/nn/moe.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"
#include "braid/parallel/expert_parallel/exchange.h"

namespace braid::parallel::expert_parallel {

namespace {

void for_each_moe(nn::Module& m, const std::string& prefix, const std::function<void(const std::string&, nn::MoE&)>& fn) {
  if (auto* moe = dynamic_cast<nn::MoE*>(&m)) fn(prefix, *moe);
  for (const auto& [name, child] : m.children()) for_each_moe(*child, prefix + name + ".", fn);
}

}  // namespace

ExpertGroups split_expert_groups(const comm::Communicator& data, int degree) {
  if (degree < 1 || data.size() % degree != 0) {
    fail<ConfigError>("parallel.expert = {} must divide the data degree {}", degree, data.size());
  }
  const int r = data.rank();
  ExpertGroups g;
  g.experts = data.split(r / degree, r);
  g.replicas = data.split(r % degree, r);
  g.data_degree = data.size();
  return g;
}

std::set<std::string> shard_experts(nn::Module& model, const ExpertGroups& groups) {
  const int x = groups.experts.size(), r = groups.experts.rank();
  std::set<std::string> names;
  for_each_moe(model, "", [&](const std::string& prefix, nn::MoE& moe) {
    const int64_t e = moe.options().experts;
    if (e % x != 0) fail<ConfigError>("model.moe.experts = {} is not divisible by parallel.expert = {}", e, x);
    moe.keep_experts(r * (e / x), e / x, std::make_shared<CommExchange>(groups.experts, e));
    names.insert(prefix + "experts.fc1");
    names.insert(prefix + "experts.fc2");
  });
  return names;
}

ExpertDataSync::ExpertDataSync(std::unique_ptr<GradSync> inner, ExpertGroups groups, std::set<std::string> names,
                               const nn::Module& model)
    : inner_(std::move(inner)), groups_(std::move(groups)), names_(std::move(names)) {
  // Known before setup: a checkpoint's optimizer state may be loaded first.
  size_t i = 0;
  for (const auto& [name, t] : model.named_parameters()) {
    if (names_.count(name)) expert_index_.insert(i);
    ++i;
  }
}

void ExpertDataSync::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                           const nlohmann::json& description) {
  std::vector<NamedParameter> dense;
  dense_index_.assign(params.size(), -1);
  for (size_t i = 0; i < params.size(); ++i) {
    if (names_.count(params[i].name)) {
      experts_.push_back(params[i]);
    } else {
      dense_index_[i] = static_cast<int64_t>(dense.size());
      dense.push_back(params[i]);
    }
  }
  inner_->setup(dense, buffers, description);
  // Replicas of an expert start equal (the seed draws the same whole model on every rank; this makes sure).
  if (groups_.replicas.size() > 1) {
    comm::Communicator c(groups_.replicas);
    for (const NamedParameter& p : experts_) {
      wait_for(c.broadcast(comm::buffer_of(p.tensor), {.root = 0, .timeout = c.options().timeout}), c,
           "broadcast of the experts");
    }
  }
}

void ExpertDataSync::on_grad_ready(size_t index, Tensor& grad) {
  if (index < dense_index_.size() && dense_index_[index] >= 0) {
    inner_->on_grad_ready(static_cast<size_t>(dense_index_[index]), grad);
  }
}

void ExpertDataSync::set_sync(bool sync) {
  sync_ = sync;
  inner_->set_sync(sync);
}

void ExpertDataSync::finish() {
  inner_->finish();
  if (!sync_) return;
  comm::Communicator c(groups_.replicas);
  const double scale = 1.0 / static_cast<double>(groups_.data_degree);
  for (const NamedParameter& p : experts_) {
    Tensor g = p.tensor.grad();
    if (!g.defined()) {
      g = Tensor::zeros(p.tensor.shape(), p.tensor.dtype());
      p.tensor.set_grad(g);
    }
    Tensor sum = g.contiguous().clone();
    if (c.size() > 1) wait_for(c.allreduce(comm::buffer_of(sum), {.timeout = c.options().timeout}), c, "all-reduce of expert gradients");
    g.copy_from(mul(sum, scale));
  }
}

Tensor ExpertDataSync::gather_experts(const Tensor& local) const {
  comm::Communicator c(groups_.experts);
  const Tensor in = local.detach().contiguous();
  Shape shape = in.shape();
  shape[0] *= c.size();
  Tensor out = Tensor::empty(shape, in.dtype());
  wait_for(c.allgather(comm::buffer_of(in), comm::buffer_of(out), {.timeout = c.options().timeout}), c,
       "gather of the experts");
  return out;
}

Tensor ExpertDataSync::my_experts(const Tensor& all) const {
  const int64_t local = all.size(0) / groups_.experts.size();
  return slice(all, 0, groups_.experts.rank() * local, (groups_.experts.rank() + 1) * local).contiguous();
}

nn::NamedTensors ExpertDataSync::model_state(const nn::Module& model) {
  nn::NamedTensors state = inner_->model_state(model);
  for (auto& [name, t] : state) {
    if (names_.count(name)) t = gather_experts(t);
  }
  return state;
}

void ExpertDataSync::load_model_state(nn::Module& model, const nn::NamedTensors& state) {
  nn::NamedTensors mine = state;
  for (auto& [name, t] : mine) {
    if (names_.count(name)) t = my_experts(t);
  }
  inner_->load_model_state(model, mine);
}

namespace {

// "<param index>.<buffer>" -> the index, or -1.
int64_t parameter_of(const std::string& key) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos || dot == 0) return -1;
  for (size_t i = 0; i < dot; ++i)
    if (key[i] < '0' || key[i] > '9') return -1;
  return std::stoll(key.substr(0, dot));
}

}  // namespace

optim::OptimizerState ExpertDataSync::optimizer_state(const optim::Optimizer& optimizer) {
  optim::OptimizerState s = inner_->optimizer_state(optimizer);
  for (auto& [key, t] : s.tensors) {
    const int64_t i = parameter_of(key);
    if (i >= 0 && expert_index_.count(static_cast<size_t>(i)) && t.ndim() >= 1) t = gather_experts(t);
  }
  return s;
}

void ExpertDataSync::load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state) {
  optim::OptimizerState mine = state;
  for (auto& [key, t] : mine.tensors) {
    const int64_t i = parameter_of(key);
    if (i >= 0 && expert_index_.count(static_cast<size_t>(i)) && t.ndim() >= 1) t = my_experts(t);
  }
  inner_->load_optimizer_state(optimizer, mine);
}

}  // namespace braid::parallel::expert_parallel
