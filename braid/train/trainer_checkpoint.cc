// Trainer: saving a checkpoint and resuming from one (trainer.h).
#include "braid/train/checkpoint.h"
#include "braid/train/checkpoint_reshard.h"
#include "braid/train/trainer.h"

namespace braid::train {

std::string Trainer::save(int64_t epoch, int64_t batch_in_epoch) {
  Checkpoint c;
  // Whole tensors whatever the plan splits (collective on the data axis under ZeRO).
  c.model = plan_->model_state(*model_);
  c.optimizer = plan_->optimizer_state(*optimizer_);
  c.plan = plan_->rank_state();  // every data rank's codec memory (collective)
  const std::string dir = checkpoint_dir();
  if (!plan_->writes_checkpoints()) {
    last_checkpoint_ = checkpoint_stem(dir, step_);
    return last_checkpoint_;
  }
  c.step = step_;
  c.epoch = epoch;
  c.batch = batch_in_epoch;
  c.rng = gen_->state();
  c.config = o_.config;
  nlohmann::json order = nlohmann::json::array();  // numbers the optimizer's buffers
  for (const auto& [name, t] : model_->named_parameters()) order.push_back(name);
  c.extra = {{"plan", plan_->state_dict()}, {"run_id", run_id_}, {"params", order}};
  if (o_.batch_schedule) c.extra["batch_schedule"] = o_.batch_schedule->state_dict();
  if (scaler_) c.extra["loss_scaler"] = scaler_->state_dict();
  if (const std::string sync = plan_->grad_sync_name(); sync.starts_with("zero-")) {
    c.extra["zero"] = {{"stage", std::stoi(sync.substr(5))}, {"data_world", plan_->data_world()}};
  }
  if (!plan_->shard_name().empty()) {
    c.extra["shard"] = {{"name", plan_->shard_name()}, {"mesh", plan_->mesh().describe()},
                        {"tensor", plan_->mesh().degree(parallel::Axis::tensor)},
                        {"pipeline", plan_->mesh().degree(parallel::Axis::pipeline)},
                        {"specs", parallel::to_json(plan_->shards())}, {"params", order}};
  }
  save_checkpoint(dir, c);
  prune_checkpoints(dir, o_.keep_checkpoints);
  last_checkpoint_ = checkpoint_stem(dir, step_);
  for (auto& cb : callbacks_) cb->on_checkpoint(last_checkpoint_, step_);
  return last_checkpoint_;
}

std::string Trainer::checkpoint_dir() const {
  const std::string shard = plan_->shard_name();
  return shard.empty() ? o_.out_dir : o_.out_dir + "/shard-" + shard;
}

std::pair<int64_t, int64_t> Trainer::resume() {
  std::vector<std::string> skipped, notes;
  // Whatever plan wrote the checkpoint, this rank takes its own part of it.
  RankPart part{.shard = plan_->shard_name(), .state = model_->state_dict(), .param_order = {},
                .specs = plan_->shards()};
  for (const auto& [name, t] : model_->named_parameters()) part.param_order.push_back(name);
  std::optional<Checkpoint> c = load_for_part(o_.out_dir, part, &notes, &skipped);
  for (const std::string& n : notes) {
    for (auto& cb : callbacks_) cb->on_message(n);
  }
  for (const std::string& s : skipped) {
    for (auto& cb : callbacks_) cb->on_message("skipping unusable checkpoint: " + s);
  }
  if (!c) {
    for (auto& cb : callbacks_) cb->on_message("resume: no checkpoint in " + checkpoint_dir() + ", starting from scratch");
    return {0, 0};
  }
  try {
    plan_->load_model_state(*model_, c->model);
    plan_->load_optimizer_state(*optimizer_, c->optimizer);
    plan_->load_rank_state(c->plan);
    run_id_ = c->extra.value("run_id", run_id_);
    gen_->set_state(c->rng);
    plan_->load_state_dict(c->extra.value("plan", nlohmann::json::object()));
    if (o_.batch_schedule && c->extra.contains("batch_schedule")) {
      o_.batch_schedule->load_state_dict(c->extra["batch_schedule"]);
    }
    if (scaler_ && c->extra.contains("loss_scaler")) scaler_->load_state_dict(c->extra["loss_scaler"]);
  } catch (const nlohmann::json::exception& e) {
    // The sidecar's own fields were checked when it was read; the states of
    // the optimizer, the plan and the batch schedule are theirs to read.
    fail<IoError>("checkpoint {}: a saved state is malformed: {}", checkpoint_stem(checkpoint_dir(), c->step),
                  e.what());
  }
  step_ = c->step;
  last_checkpoint_ = checkpoint_stem(checkpoint_dir(), c->step);
  for (auto& cb : callbacks_) {
    cb->on_message(fmt::format("resumed from {} (step {}, epoch {}, batch {})", last_checkpoint_, c->step, c->epoch + 1,
                               c->batch));
  }
  return {c->epoch, c->batch};
}

}  // namespace braid::train
