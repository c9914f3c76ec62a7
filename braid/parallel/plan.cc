#include "braid/parallel/plan.h"

#include <cmath>

#include "braid/optim/clip.h"

namespace braid::parallel {

namespace {

// Sum of `values` over a mesh axis's group (in place); nothing for one rank.
void sum_over(const Mesh& mesh, Axis axis, std::vector<double>& values, Duration timeout) {
  if (mesh.degree(axis) == 1) return;
  const comm::Communicator& g = mesh.group(axis);
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
  return fmt::format("{}; schedule {}; grad sync {}; aggregation {}", p_.mesh.describe(), p_.schedule->name(),
                     p_.grad_sync ? p_.grad_sync->name() : "none",
                     p_.aggregation ? p_.aggregation->name() : "none");
}

void Plan::setup(nn::Module& model, const nlohmann::json& description) {
  params_.clear();
  for (auto& [name, tensor] : model.named_parameters()) params_.push_back({name, tensor});
  std::vector<NamedParameter> buffers;
  for (auto& [name, tensor] : model.named_buffers()) buffers.push_back({name, tensor});
  if (p_.grad_sync) {
    p_.grad_sync->setup(params_, buffers, description);
    connect_grad_hooks(*p_.grad_sync, params_);
  }
  if (p_.aggregation) p_.aggregation->setup(params_, description);
}

double Plan::forward_backward(nn::Module& model, const nn::LossFn& loss, const Tensor& input, const Tensor& target) {
  GradSync* sync = p_.grad_sync.get();
  return p_.schedule->run(model, loss, input, target, [sync](bool on) {
    if (sync) sync->set_sync(on);
  });
}

void Plan::finish_gradients() {
  if (p_.grad_sync) p_.grad_sync->finish();
}

double Plan::grad_norm() const {
  // Every element once: a slice counts on its rank; a tensor replicated
  // across the tensor axis counts on tensor rank 0; pipeline stages hold
  // disjoint parameters. Data-axis replicas hold the same (combined)
  // gradients, so the data axis takes no part.
  std::vector<double> sq{0.0};
  const bool first_tensor_rank = p_.mesh.coord(Axis::tensor) == 0;
  std::vector<Tensor> counted;
  for (const auto& p : params_) {
    const auto it = p_.shards.find(p.name);
    if ((it != p_.shards.end() && it->second.dim >= 0) || first_tensor_rank) counted.push_back(p.tensor);
  }
  const double local = optim::grad_norm(counted);
  sq[0] = local * local;
  const Duration timeout = timeout_of(p_.mesh);
  sum_over(p_.mesh, Axis::tensor, sq, timeout);
  sum_over(p_.mesh, Axis::pipeline, sq, timeout);
  return std::sqrt(sq[0]);
}

double Plan::clip_grad_norm(double max_norm) const {
  std::vector<Tensor> all;
  for (const auto& p : params_) all.push_back(p.tensor);
  if (p_.mesh.degree(Axis::tensor) == 1 && p_.mesh.degree(Axis::pipeline) == 1) {
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
  Tensor out = p_.schedule->evaluate(model, input);
  if (out.defined() && p_.full_output) out = p_.full_output(out);
  return out;
}

bool Plan::ends_model() const { return p_.schedule->ends_model(); }

void Plan::share_from_model_end(std::vector<double>& values) const {
  if (p_.mesh.degree(Axis::pipeline) == 1) return;
  const Duration timeout = timeout_of(p_.mesh);
  comm::Communicator g = p_.mesh.group(Axis::pipeline);
  g.broadcast(values, {.root = g.size() - 1, .timeout = timeout}).wait(Deadline::after(timeout * 2));
}

int Plan::data_rank() const { return p_.aggregation ? p_.aggregation->replica() : p_.mesh.coord(Axis::data); }

int Plan::data_world() const { return p_.aggregation ? p_.aggregation->replicas() : p_.mesh.degree(Axis::data); }

bool Plan::is_leader() const {
  return data_rank() == 0 && p_.mesh.coord(Axis::tensor) == 0 && p_.mesh.coord(Axis::pipeline) == 0;
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

}  // namespace braid::parallel
