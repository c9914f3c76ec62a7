// The trainer under parallel.fault_tolerance = replica (trainer.h,
// docs/fault_tolerance.md): each step's gradient averaged over the replica
// group's current members, the state a member sends a replacement (or a
// survivor left behind), and the step boundary where replacements come in.
#include <algorithm>

#include "braid/base/safetensors.h"
#include "braid/parallel/fault_tolerance/replica_group.h"
#include "braid/train/checkpoint.h"
#include "braid/train/trainer.h"

namespace braid::train {

namespace {

constexpr const char* kModel = "model/";
constexpr const char* kOptim = "optim/";

Tensor to_tensor(const safetensors::TensorData& d, const std::string& name) {
  Tensor t = Tensor::empty(d.shape, dtype_from_safetensors(d.dtype, name));
  if (t.nbytes() != d.data.size()) fail<IoError>("replica state: {} has {} bytes for its shape", name, d.data.size());
  std::copy(d.data.begin(), d.data.end(), static_cast<std::byte*>(t.raw_data()));
  return t;
}

}  // namespace

void Trainer::set_replicas(std::shared_ptr<parallel::fault_tolerance::ReplicaGroup> group) {
  replicas_ = std::move(group);
  replicas_->set_state_io([this] { return replica_state(); },
                          [this](std::span<const std::byte> bytes) { load_replica_state(bytes); });
}

bool Trainer::average_over_replicas() {
  // One flat f32 buffer for the whole model: one all-reduce a step, which a
  // failure interrupts and the survivors redo from this replica's own copy.
  size_t n = 0;
  for (const Tensor& p : params_) n += static_cast<size_t>(p.numel());
  replica_grad_.assign(n, 0.0f);
  size_t at = 0;
  for (const Tensor& p : params_) {
    const Tensor g = p.grad();
    if (g.defined()) {
      const Tensor c = g.to(Device::cpu).to(DType::f32).contiguous();
      std::copy(c.data<float>(), c.data<float>() + c.numel(), replica_grad_.begin() + static_cast<ptrdiff_t>(at));
    }
    at += static_cast<size_t>(p.numel());
  }
  if (replicas_->average(replica_grad_, step_) == parallel::fault_tolerance::ReplicaGroup::Outcome::replaced) {
    return false;
  }
  at = 0;
  for (const Tensor& p : params_) {
    const auto begin = replica_grad_.begin() + static_cast<ptrdiff_t>(at);
    const Tensor mean =
        Tensor::from_vector(std::vector<float>(begin, begin + p.numel()), p.shape()).to(p.device());
    if (Tensor g = p.grad(); g.defined()) {
      g.copy_from(mean);
    } else {
      p.set_grad(mean);  // unused here, used by another replica
    }
    at += static_cast<size_t>(p.numel());
  }
  return true;
}

std::vector<std::byte> Trainer::replica_state() const {
  std::map<std::string, safetensors::TensorRef> refs;
  std::vector<Tensor> keep;  // host copies alive until serialised
  auto add = [&](const std::string& name, const Tensor& t) {
    Tensor c = t.to(Device::cpu).contiguous();
    keep.push_back(c);
    refs[name] = {safetensors_dtype(c.dtype()), c.shape(), {static_cast<const std::byte*>(c.raw_data()), c.nbytes()}};
  };
  for (const auto& [name, t] : model_->state_dict()) add(kModel + name, t);
  const optim::OptimizerState opt = optimizer_->state_dict();
  for (const auto& [name, t] : opt.tensors) add(kOptim + name, t);
  const Generator::State rng = gen_->state();
  nlohmann::json meta = {{"step", step_}, {"epoch", epoch_}, {"batch", batch_},
                         {"rng", {rng.seed, rng.stream, rng.offset}}, {"optimizer", opt.scalars},
                         {"lr_factor", lr_factor_}, {"run_id", run_id_}};
  if (o_.batch_schedule) meta["batch_schedule"] = o_.batch_schedule->state_dict();
  if (scaler_) meta["loss_scaler"] = scaler_->state_dict();
  return safetensors::serialize(refs, {{"braid.replica_state", meta.dump()}});
}

void Trainer::load_replica_state(std::span<const std::byte> bytes) {
  const safetensors::File f = safetensors::parse(bytes, "replica state");
  const auto m = f.metadata.find("braid.replica_state");
  if (m == f.metadata.end()) fail<IoError>("replica state: no braid.replica_state metadata");
  const nlohmann::json meta = nlohmann::json::parse(m->second);
  nn::NamedTensors model;
  optim::OptimizerState opt{.tensors = {}, .scalars = meta.at("optimizer")};
  for (const auto& [name, d] : f.tensors) {
    if (name.starts_with(kModel)) model.emplace_back(name.substr(6), to_tensor(d, name));
    if (name.starts_with(kOptim)) opt.tensors.emplace_back(name.substr(6), to_tensor(d, name));
  }
  model_->load_state_dict(model);
  optimizer_->load_state_dict(opt);
  step_ = meta.at("step").get<int64_t>();
  epoch_ = meta.at("epoch").get<int64_t>();
  batch_ = meta.at("batch").get<int64_t>();
  const auto rng = meta.at("rng").get<std::vector<uint64_t>>();
  gen_->set_state({rng.at(0), rng.at(1), rng.at(2)});
  lr_factor_ = meta.at("lr_factor").get<double>();
  run_id_ = meta.at("run_id").get<std::string>();
  if (o_.batch_schedule && meta.contains("batch_schedule")) o_.batch_schedule->load_state_dict(meta["batch_schedule"]);
  if (scaler_ && meta.contains("loss_scaler")) scaler_->load_state_dict(meta["loss_scaler"]);
}

std::optional<std::pair<int64_t, int64_t>> Trainer::join_replicas() {
  if (!replicas_->join()) {
    for (auto& cb : callbacks_) {
      cb->on_message(fmt::format("replica {}: the replicas finished training before admitting it", replicas_->slot()));
    }
    return std::nullopt;
  }
  for (auto& cb : callbacks_) {
    cb->on_message(fmt::format("replica {} joined at step {} (epoch {}, batch {}) with a member's state",
                               replicas_->slot(), step_, epoch_ + 1, batch_));
  }
  at_replica_boundary(epoch_, batch_);  // reports the admission
  return std::pair{epoch_, batch_};
}

void Trainer::at_replica_boundary(int64_t epoch, int64_t batch) {
  // The position a replacement admitted here starts from.
  epoch_ = epoch, batch_ = batch;
  replicas_->at_step_boundary(step_);
  for (const parallel::fault_tolerance::MembershipChange& c : replicas_->take_changes()) {
    const nlohmann::json j = {{"membership_epoch", c.epoch}, {"step", c.step}, {"members", c.members},
                              {"left", c.left}, {"joined", c.joined}, {"seconds", c.seconds},
                              {"source", c.source}, {"received", c.received}, {"reason", c.reason},
                              {"slot", replicas_->slot()}};
    for (auto& cb : callbacks_) {
      cb->on_membership(j);
      cb->on_message("replicas: " + c.describe());
    }
  }
}

}  // namespace braid::train
