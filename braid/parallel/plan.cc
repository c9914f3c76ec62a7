#include "braid/parallel/plan.h"

#include <cmath>
#include <map>

#include "braid/optim/clip.h"
#include "braid/optim/reduce.h"

namespace braid::parallel {

namespace {

// Sum of `values` over a mesh axis's group (in place); nothing for one rank.
void sum_over(const Mesh& mesh, Axis axis, std::vector<double>& values, Duration timeout) {
  if (mesh.degree(axis) == 1) return;
  const comm::Communicator& g = mesh.group(axis);
  comm::Communicator(g).allreduce(values, {.op = comm::Op::sum, .timeout = timeout}).wait(Deadline::after(timeout * 2));
}

// Sum over the ranks that hold replicas of the same parameters (data, and
// context with it), where ZeRO's slices are cut.
void sum_over_replicas_of(const Mesh& mesh, std::vector<double>& values, Duration timeout) {
  const comm::Communicator& g = mesh.data_context_group();
  if (g.size() == 1) return;
  comm::Communicator(g).allreduce(values, {.op = comm::Op::sum, .timeout = timeout}).wait(Deadline::after(timeout * 2));
}

Duration timeout_of(const Mesh& mesh) { return mesh.world().options().timeout; }

}  // namespace

Plan::Plan() : Plan(PlanParts{}) {}

Plan::Plan(PlanParts parts) : p_(std::move(parts)) {
  if (!p_.schedule) p_.schedule = std::make_unique<LocalSchedule>(1);
}

Plan::~Plan() = default;

std::string Plan::describe() const {
  return fmt::format("{}{}; schedule {}; grad sync {}; aggregation {}", p_.mesh.describe(),
                     p_.context ? fmt::format("; context {}", context_parallel::name(p_.context->mode())) : "",
                     p_.schedule->name(),
                     p_.grad_sync ? p_.grad_sync->name() : "none",
                     p_.aggregation ? p_.aggregation->name() : "none");
}

std::vector<Tensor> Plan::optimizer_parameters(const nn::Module& model) const {
  if (!p_.grad_sync || p_.grad_sync->optimizer_parameters().empty()) return model.parameters();
  std::vector<Tensor> out;
  for (const auto& s : p_.grad_sync->optimizer_parameters()) out.push_back(s.tensor);
  return out;
}

std::vector<std::string> Plan::optimizer_parameter_names(const nn::Module& model) const {
  std::vector<std::string> out;
  if (!p_.grad_sync || p_.grad_sync->optimizer_parameters().empty()) {
    for (const auto& [name, t] : model.named_parameters()) out.push_back(name);
    return out;
  }
  for (const auto& s : p_.grad_sync->optimizer_parameters()) out.push_back(s.name);
  return out;
}

void Plan::setup(nn::Module& model, const nlohmann::json& description, optim::Optimizer* optimizer) {
  params_.clear();
  for (auto& [name, tensor] : model.named_parameters()) params_.push_back({name, tensor});
  std::vector<NamedParameter> buffers;
  for (auto& [name, tensor] : model.named_buffers()) buffers.push_back({name, tensor});
  if (p_.grad_sync) {
    p_.grad_sync->setup(params_, buffers, description);
    connect_grad_hooks(*p_.grad_sync, params_);
    slices_ = p_.grad_sync->optimizer_parameters();
    if (optimizer) {
      p_.grad_sync->attach(*optimizer);
    } else if (!slices_.empty()) {
      fail<ValueError>("Plan::setup: {} updates slices of the parameters; pass the optimizer built over "
                       "optimizer_parameters()", p_.grad_sync->name());
    }
  }
  bool split = false;  // experts held across an expert group
  for (const auto& p : params_) split = split || (p_.grad_sync && p_.grad_sync->holds_split(p.name));
  if (optimizer && (!slices_.empty() || p_.mesh.degree(Axis::tensor) > 1 || split)) total_across_shards(*optimizer);
  if (p_.aggregation) p_.aggregation->setup(params_, buffers, description);
}

void Plan::total_across_shards(optim::Optimizer& optimizer) {
  // Optimizer parameter j is (a slice of) model parameter owner[j].
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].name] = i;
  std::vector<size_t> owner;
  for (const auto& p : gradient_holders()) owner.push_back(index.at(p.name));
  std::vector<size_t> tensor_sliced;  // parameters split along the tensor axis
  std::vector<size_t> split;          // parameters the grad sync holds split (experts)
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto it = p_.shards.find(params_[i].name);
    if (it != p_.shards.end() && it->second.dim >= 0) tensor_sliced.push_back(i);
    if (p_.grad_sync && p_.grad_sync->holds_split(params_[i].name)) split.push_back(i);
  }
  optimizer.set_partial_sums([this, owner, tensor_sliced, split](std::vector<double>& sums, size_t figures) {
    const Duration timeout = timeout_of(p_.mesh);
    std::vector<double> all(params_.size() * figures, 0.0);
    for (size_t j = 0; j < owner.size(); ++j) {
      for (size_t f = 0; f < figures; ++f) all[owner[j] * figures + f] = sums[j * figures + f];
    }
    // ZeRO's slices make up each tensor-parallel slice over the data axis,
    // and the tensor-parallel slices the whole tensor over the tensor axis.
    if (!slices_.empty()) sum_over_replicas_of(p_.mesh, all, timeout);
    // An expert parameter's figures: of this rank's experts, summed over the
    // expert group into the whole layer's.
    if (!split.empty()) {
      std::vector<double> part;
      for (size_t i : split) part.insert(part.end(), all.begin() + i * figures, all.begin() + (i + 1) * figures);
      p_.grad_sync->sum_split(part);
      for (size_t k = 0; k < split.size(); ++k) {
        std::copy(part.begin() + k * figures, part.begin() + (k + 1) * figures, all.begin() + split[k] * figures);
      }
    }
    if (!tensor_sliced.empty() && p_.mesh.degree(Axis::tensor) > 1) {
      std::vector<double> part;
      for (size_t i : tensor_sliced) part.insert(part.end(), all.begin() + i * figures, all.begin() + (i + 1) * figures);
      sum_over(p_.mesh, Axis::tensor, part, timeout);
      for (size_t k = 0; k < tensor_sliced.size(); ++k) {
        std::copy(part.begin() + k * figures, part.begin() + (k + 1) * figures, all.begin() + tensor_sliced[k] * figures);
      }
    }
    for (size_t j = 0; j < owner.size(); ++j) {
      for (size_t f = 0; f < figures; ++f) sums[j * figures + f] = all[owner[j] * figures + f];
    }
  });
}

double Plan::forward_backward(nn::Module& model, const nn::LossFn& loss, const Tensor& input, const Tensor& target,
                              bool last) {
  if (p_.aggregation && !accumulating_) p_.aggregation->before_forward();
  accumulating_ = !last;
  GradSync* sync = p_.grad_sync.get();
  auto set_sync = [sync, last](bool on) {
    if (sync) sync->set_sync(on && last);
  };
  if (!p_.context) return p_.schedule->run(model, loss, input, target, set_sync);
  // This rank's tokens, with the ring or Ulysses as the attention of every
  // layer for forward and backward (recomputation included); the loss of the
  // whole sequences is the mean of the ranks' (equal token counts).
  nn::AttendOverride attend(&p_.context->attend());
  const double mine = p_.schedule->run(model, loss, p_.context->shard(input), p_.context->shard(target), set_sync);
  return p_.context->average(mine);
}

bool Plan::step_decided() {
  if (!p_.aggregation || p_.grad_sync || p_.mesh.degree(Axis::pipeline) > 1) return false;
  return p_.aggregation->step_decided();
}

void Plan::finish_gradients() {
  if (p_.grad_sync) p_.grad_sync->finish();
  if (p_.aggregation) p_.aggregation->combine_gradients();
}

std::vector<Tensor> Plan::gradients() const {
  std::vector<Tensor> out;
  for (const auto& p : gradient_holders()) out.push_back(p.tensor.grad());
  return out;
}

double Plan::sum_squares(const std::vector<Tensor>& like_gradients) const {
  const std::vector<NamedParameter>& holders = gradient_holders();
  if (like_gradients.size() != holders.size()) {
    fail<ValueError>("Plan::sum_squares: {} tensors for {} gradients", like_gradients.size(), holders.size());
  }
  // Every element once: a slice counts on its rank; a tensor replicated
  // across the tensor axis counts on tensor rank 0; pipeline stages hold
  // disjoint parameters. Data-axis replicas hold the same (combined)
  // gradients, so the data axis takes part only when ZeRO splits them.
  // Parameters the grad sync holds split across data ranks (experts) count
  // their part on each of those ranks, summed over them.
  const bool first_tensor_rank = p_.mesh.coord(Axis::tensor) == 0;
  std::vector<Tensor> counted, split;
  for (size_t i = 0; i < holders.size(); ++i) {
    const Tensor& t = like_gradients[i];
    if (!t.defined()) continue;
    const auto it = p_.shards.find(holders[i].name);
    if (!(it != p_.shards.end() && it->second.dim >= 0) && !first_tensor_rank) continue;
    if (t.dtype() != DType::f32 || !t.is_contiguous()) fail<ValueError>("Plan::sum_squares: tensors must be contiguous f32");
    (p_.grad_sync && p_.grad_sync->holds_split(holders[i].name) ? split : counted).push_back(t);
  }
  std::vector<double> sq{optim::sum_squares(counted)};  // on the tensors' device
  if (p_.grad_sync) {
    std::vector<double> part{split.empty() ? 0.0 : optim::sum_squares(split)};
    p_.grad_sync->sum_split(part);
    sq[0] += part[0];
  }
  const Duration timeout = timeout_of(p_.mesh);
  sum_over(p_.mesh, Axis::tensor, sq, timeout);
  sum_over(p_.mesh, Axis::pipeline, sq, timeout);
  if (!slices_.empty()) sum_over_replicas_of(p_.mesh, sq, timeout);
  return sq[0];
}

double Plan::grad_norm() const { return std::sqrt(sum_squares(gradients())); }

double Plan::clip_grad_norm(double max_norm) const {
  std::vector<Tensor> all;
  for (const auto& p : gradient_holders()) all.push_back(p.tensor);
  bool split = false;
  for (const auto& p : gradient_holders()) split = split || (p_.grad_sync && p_.grad_sync->holds_split(p.name));
  if (p_.mesh.degree(Axis::tensor) == 1 && p_.mesh.degree(Axis::pipeline) == 1 && slices_.empty() && !split) {
    return optim::clip_grad_norm(all, max_norm);
  }
  const double norm = grad_norm();
  optim::clip_grads_to(all, norm, max_norm);
  return norm;
}

void Plan::step(double lr) {
  if (!owns_optimizer()) fail<ValueError>("Plan::step: no part of this plan owns the optimizer");
  p_.aggregation->step(lr);
}

void Plan::after_step() {
  if (p_.grad_sync) p_.grad_sync->after_step();
  if (p_.aggregation) p_.aggregation->after_step();
}

void Plan::finish() {
  if (finished_) return;
  finished_ = true;
  if (p_.aggregation) p_.aggregation->finish();
}

Tensor Plan::evaluate(nn::Module& model, const Tensor& input) {
  if (!p_.context) {
    Tensor out = p_.schedule->evaluate(model, input);
    if (out.defined() && p_.full_output) out = p_.full_output(out);
    return out;
  }
  nn::AttendOverride attend(&p_.context->attend());
  Tensor out = p_.schedule->evaluate(model, p_.context->shard(input));
  if (out.defined() && p_.full_output) out = p_.full_output(out);
  // A context group lies within one pipeline stage: all its ranks hold an output or none does.
  return out.defined() ? p_.context->gather(out) : out;
}

bool Plan::ends_model() const { return p_.schedule->ends_model(); }

void Plan::share_from_model_end(std::vector<double>& values) const {
  if (p_.mesh.degree(Axis::pipeline) == 1) return;
  const Duration timeout = timeout_of(p_.mesh);
  comm::Communicator g = p_.mesh.group(Axis::pipeline);
  g.broadcast(values, {.root = g.size() - 1, .timeout = timeout}).wait(Deadline::after(timeout * 2));
}

bool Plan::evaluates_shares() const {
  return p_.grad_sync && !p_.aggregation && !p_.grad_sync->collective_forward() && data_world() > 1;
}

bool Plan::evaluation_is_collective() const {
  return evaluates_shares() || p_.mesh.degree(Axis::tensor) > 1 || p_.mesh.degree(Axis::pipeline) > 1 ||
         p_.mesh.degree(Axis::context) > 1 ||
         (p_.grad_sync && p_.grad_sync->collective_forward() && p_.mesh.degree(Axis::data) > 1);
}

void Plan::sum_over_replicas(std::vector<double>& values) const {
  if (p_.mesh.degree(Axis::data) == 1) return;
  const Duration timeout = timeout_of(p_.mesh);
  comm::Communicator g = p_.mesh.group(Axis::data);
  g.allreduce(values, {.op = comm::Op::sum, .timeout = timeout}).wait(Deadline::after(timeout * 2));
}

int Plan::data_rank() const { return p_.aggregation ? p_.aggregation->replica() : p_.mesh.coord(Axis::data); }

int Plan::data_world() const { return p_.aggregation ? p_.aggregation->replicas() : p_.mesh.degree(Axis::data); }

bool Plan::is_leader() const {
  if (p_.aggregation && p_.aggregation->member() >= 0) return p_.aggregation->member() == 0;
  return data_rank() == 0 && p_.mesh.coord(Axis::tensor) == 0 && p_.mesh.coord(Axis::pipeline) == 0 &&
         p_.mesh.coord(Axis::context) == 0;
}

bool Plan::writes_checkpoints() const {
  // Context ranks hold the same parameters as their data replica: one writes.
  return (data_rank() == 0 && p_.mesh.coord(Axis::context) == 0) || (p_.aggregation && p_.aggregation->member() >= 0);
}

std::string Plan::shard_name() const {
  if (p_.mesh.degree(Axis::tensor) == 1 && p_.mesh.degree(Axis::pipeline) == 1) return "";
  return fmt::format("t{}-p{}", p_.mesh.coord(Axis::tensor), p_.mesh.coord(Axis::pipeline));
}

nlohmann::json Plan::state_dict() const {
  return {{"aggregation", p_.aggregation ? p_.aggregation->state_dict() : nlohmann::json::object()}};
}

void Plan::load_state_dict(const nlohmann::json& state) {
  if (p_.aggregation) p_.aggregation->load_state_dict(state.value("aggregation", nlohmann::json::object()));
}

void Plan::agree(std::vector<double>& values) const {
  const comm::Communicator& world = p_.mesh.world();
  if (p_.aggregation || !world.valid() || world.size() == 1) return;
  const Duration timeout = timeout_of(p_.mesh);
  comm::Communicator(world).broadcast(values, {.root = 0, .timeout = timeout}).wait(Deadline::after(timeout * 2));
}

std::vector<double> Plan::gather_world(double value) const {
  const comm::Communicator& world = p_.mesh.world();
  if (p_.aggregation || !world.valid() || world.size() == 1) return {value};
  std::vector<double> mine{value}, all(static_cast<size_t>(world.size()));
  const Duration timeout = timeout_of(p_.mesh);
  comm::Communicator(world).allgather(mine, all, {.timeout = timeout}).wait(Deadline::after(timeout * 2));
  return all;
}

int Plan::world_rank() const {
  const comm::Communicator& world = p_.mesh.world();
  return world.valid() ? world.rank() : 0;
}

std::string Plan::agree_on_run_id(const std::string& id) const {
  const comm::Communicator& world = p_.mesh.world();
  if (!world.valid() || world.size() == 1 || (p_.aggregation && p_.aggregation->member() >= 0)) return id;
  if (id.size() > 32) fail<ValueError>("run id '{}' is longer than 32 bytes", id);
  std::vector<uint8_t> bytes(33, 0);
  std::copy(id.begin(), id.end(), bytes.begin());
  const Duration timeout = timeout_of(p_.mesh);
  comm::Communicator(world).broadcast(bytes, {.root = 0, .timeout = timeout}).wait(Deadline::after(timeout * 2));
  return std::string(reinterpret_cast<const char*>(bytes.data()));
}

nn::NamedTensors Plan::model_state(const nn::Module& model) {
  if (p_.grad_sync) return p_.grad_sync->model_state(model);
  return p_.aggregation ? p_.aggregation->model_state(model) : model.state_dict();
}

void Plan::load_model_state(nn::Module& model, const nn::NamedTensors& state) {
  if (p_.grad_sync) {
    p_.grad_sync->load_model_state(model, state);
  } else {
    model.load_state_dict(state);
  }
}

optim::OptimizerState Plan::optimizer_state(const optim::Optimizer& optimizer) {
  return p_.grad_sync ? p_.grad_sync->optimizer_state(optimizer) : optimizer.state_dict();
}

void Plan::load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state) {
  if (p_.grad_sync) {
    p_.grad_sync->load_optimizer_state(optimizer, state);
  } else {
    optimizer.load_state_dict(state);
  }
}

}  // namespace braid::parallel
