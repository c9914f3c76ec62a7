#include "braid/parallel/expert_parallel/expert_parallel.h"

#include <functional>
#include <map>

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
                               const nn::Module& model, std::unique_ptr<zero::ZeroSync> expert_zero)
    : inner_(std::move(inner)), expert_zero_(std::move(expert_zero)), groups_(std::move(groups)),
      names_(std::move(names)) {
  dense_zero_ = dynamic_cast<zero::ZeroSync*>(inner_.get());
  if ((dense_zero_ == nullptr) != (expert_zero_ == nullptr)) {
    fail<ValueError>("ExpertDataSync: ZeRO splits both parameter groups or neither");
  }
  // Known before setup: a checkpoint's optimizer state may be loaded first.
  size_t i = 0;
  for (const auto& [name, t] : model.named_parameters()) {
    if (names_.count(name)) expert_index_.insert(i);
    model_names_.push_back(name);
    ++i;
  }
}

void ExpertDataSync::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                           const nlohmann::json& description) {
  std::vector<NamedParameter> dense;
  dense_index_.assign(params.size(), -1);
  expert_of_.assign(params.size(), -1);
  for (size_t i = 0; i < params.size(); ++i) {
    if (names_.count(params[i].name)) {
      expert_of_[i] = static_cast<int64_t>(experts_.size());
      experts_.push_back(params[i]);
    } else {
      dense_index_[i] = static_cast<int64_t>(dense.size());
      dense.push_back(params[i]);
    }
  }
  inner_->setup(dense, buffers, description);
  if (expert_zero_) {  // which also starts the replicas from replica 0's experts
    expert_zero_->setup(experts_, {}, description);
    return;
  }
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
  } else if (expert_zero_ && index < expert_of_.size() && expert_of_[index] >= 0) {
    expert_zero_->on_grad_ready(static_cast<size_t>(expert_of_[index]), grad);
  }
}

void ExpertDataSync::set_sync(bool sync) {
  sync_ = sync;
  inner_->set_sync(sync);
  if (expert_zero_) expert_zero_->set_sync(sync);
}

void ExpertDataSync::after_step() {
  inner_->after_step();
  if (expert_zero_) expert_zero_->after_step();
}

std::vector<NamedParameter> ExpertDataSync::optimizer_parameters() const {
  std::vector<NamedParameter> out = inner_->optimizer_parameters();
  if (expert_zero_) {
    for (NamedParameter& p : expert_zero_->optimizer_parameters()) out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> ExpertDataSync::optimizer_parameter_runs() const {
  auto out = inner_->optimizer_parameter_runs();
  if (expert_zero_) {
    for (const auto& r : expert_zero_->optimizer_parameter_runs()) out.push_back(r);
  }
  return out;
}

void ExpertDataSync::attach(optim::Optimizer& optimizer) {
  if (!expert_zero_) {
    inner_->attach(optimizer);
    return;
  }
  if (!optimizer.works_on_shards()) {
    fail<ConfigError>("ZeRO gives each data rank slices of the parameters; optimizer {} cannot run on slices",
                      optimizer.name());
  }
  const std::vector<NamedParameter> slices = optimizer_parameters();
  const auto& mine = optimizer.params();
  bool same = mine.size() == slices.size();
  for (size_t j = 0; same && j < mine.size(); ++j) same = mine[j].raw_data() == slices[j].tensor.raw_data();
  if (!same) {
    fail<ValueError>("expert parallelism with ZeRO: the optimizer must be built over the plan's "
                     "optimizer_parameters() ({} slices), it has {} parameters", slices.size(), mine.size());
  }
}

void ExpertDataSync::sum_split(std::vector<double>& values) const {
  if (expert_zero_ || groups_.experts.size() == 1) return;
  const Duration timeout = groups_.experts.options().timeout;
  comm::Communicator(groups_.experts)
      .allreduce(values, {.op = comm::Op::sum, .timeout = timeout})
      .wait(Deadline::after(timeout * 2));
}

void ExpertDataSync::finish() {
  inner_->finish();
  if (!sync_) return;
  // Each expert's replicas hold the losses of data / replicas ranks' tokens
  // each: averaged over the replicas, then scaled to the data axis's average.
  if (expert_zero_) {
    expert_zero_->finish();
    const double rescale = static_cast<double>(groups_.replicas.size()) / static_cast<double>(groups_.data_degree);
    for (const NamedParameter& s : expert_zero_->optimizer_parameters()) {
      Tensor g = s.tensor.grad();
      if (g.defined() && g.numel() > 0) g.copy_from(mul(g, rescale));
    }
    return;
  }
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

// ZeRO on both groups: the optimizer's state is numbered dense slices first,
// then expert slices. Splits it for the two syncs, and merges their whole
// buffers back into the model's parameter order.
optim::OptimizerState ExpertDataSync::zero_optimizer_state(const optim::Optimizer& optimizer) {
  const optim::OptimizerState local = optimizer.state_dict();
  const size_t nd = inner_->optimizer_parameters().size();
  optim::OptimizerState dense_local, expert_local;
  dense_local.scalars = expert_local.scalars = local.scalars;
  for (const auto& [key, t] : local.tensors) {
    const int64_t j = parameter_of(key);
    if (j < 0) fail<ValueError>("expert parallelism with ZeRO: optimizer buffer {} names no slice", key);
    const std::string rest = key.substr(key.find('.') + 1);
    if (static_cast<size_t>(j) < nd) {
      dense_local.tensors.emplace_back(key, t);
    } else {
      expert_local.tensors.emplace_back(fmt::format("{}.{}", static_cast<size_t>(j) - nd, rest), t);
    }
  }
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < model_names_.size(); ++i) index[model_names_[i]] = i;
  optim::OptimizerState whole = dense_zero_->gather_optimizer_state(dense_local);
  whole.scalars["num_params"] = model_names_.size();
  for (auto& [key, t] : whole.tensors) {
    const size_t i = static_cast<size_t>(parameter_of(key));
    key = fmt::format("{}.{}", index.at(dense_zero_->parameters()[i].name), key.substr(key.find('.') + 1));
  }
  // Complete on replica 0, which is the whole first expert group: it gathers every expert.
  for (auto& [key, t] : expert_zero_->gather_optimizer_state(expert_local).tensors) {
    const size_t i = static_cast<size_t>(parameter_of(key));
    whole.tensors.emplace_back(
        fmt::format("{}.{}", index.at(expert_zero_->parameters()[i].name), key.substr(key.find('.') + 1)),
        t.ndim() >= 1 ? gather_experts(t) : t);
  }
  return whole;
}

void ExpertDataSync::load_zero_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state) {
  std::map<std::string, size_t> dense_at, expert_at;
  for (size_t i = 0; i < dense_zero_->parameters().size(); ++i) dense_at[dense_zero_->parameters()[i].name] = i;
  for (size_t i = 0; i < expert_zero_->parameters().size(); ++i) expert_at[expert_zero_->parameters()[i].name] = i;
  optim::OptimizerState dense_whole, expert_whole;
  dense_whole.scalars = expert_whole.scalars = state.scalars;
  dense_whole.scalars["num_params"] = dense_at.size();
  expert_whole.scalars["num_params"] = expert_at.size();
  for (const auto& [key, t] : state.tensors) {
    const int64_t i = parameter_of(key);
    if (i < 0 || static_cast<size_t>(i) >= model_names_.size()) {
      fail<ValueError>("optimizer state: buffer {} fits no parameter of this model", key);
    }
    const std::string& name = model_names_[static_cast<size_t>(i)];
    const std::string rest = key.substr(key.find('.') + 1);
    if (names_.count(name)) {
      expert_whole.tensors.emplace_back(fmt::format("{}.{}", expert_at.at(name), rest), t.ndim() >= 1 ? my_experts(t) : t);
    } else {
      dense_whole.tensors.emplace_back(fmt::format("{}.{}", dense_at.at(name), rest), t);
    }
  }
  optim::OptimizerState mine = dense_zero_->slice_optimizer_state(dense_whole);
  const size_t nd = inner_->optimizer_parameters().size();
  const optim::OptimizerState experts = expert_zero_->slice_optimizer_state(expert_whole);
  for (const auto& [key, t] : experts.tensors) {
    mine.tensors.emplace_back(fmt::format("{}.{}", nd + static_cast<size_t>(parameter_of(key)), key.substr(key.find('.') + 1)), t);
  }
  mine.scalars["num_params"] = nd + expert_zero_->optimizer_parameters().size();
  optimizer.load_state_dict(mine);
}

optim::OptimizerState ExpertDataSync::optimizer_state(const optim::Optimizer& optimizer) {
  if (expert_zero_) return zero_optimizer_state(optimizer);
  optim::OptimizerState s = inner_->optimizer_state(optimizer);
  for (auto& [key, t] : s.tensors) {
    const int64_t i = parameter_of(key);
    if (i >= 0 && expert_index_.count(static_cast<size_t>(i)) && t.ndim() >= 1) t = gather_experts(t);
  }
  return s;
}

void ExpertDataSync::load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state) {
  if (expert_zero_) {
    load_zero_optimizer_state(optimizer, state);
    return;
  }
  optim::OptimizerState mine = state;
  for (auto& [key, t] : mine.tensors) {
    const int64_t i = parameter_of(key);
    if (i >= 0 && expert_index_.count(static_cast<size_t>(i)) && t.ndim() >= 1) t = my_experts(t);
  }
  inner_->load_optimizer_state(optimizer, mine);
}

}  // namespace braid::parallel::expert_parallel
