// Trainer: saving a checkpoint and resuming from one (trainer.h).
#include <algorithm>
#include <filesystem>

#include "braid/base/abridge.h"
#include "braid/base/digest.h"
#include "braid/train/checkpoint.h"
#include "braid/train/checkpoint_manifest.h"
#include "braid/train/checkpoint_reshard.h"
#include "braid/train/checkpoint_shards.h"
#include "braid/train/trainer.h"

namespace braid::train {

namespace fs = std::filesystem;

std::string Trainer::save(int64_t epoch, int64_t batch_in_epoch) {
  if (o_.sharded_checkpoints) return save_sharded(epoch, batch_in_epoch);
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

void Trainer::check_sharded_plan() const {
  if (!o_.sharded_checkpoints || !plan_->aggregation()) return;
  // Replicas that train apart hold different models: no replica's share is
  // the others'.
  fail<ConfigError>("train.checkpoint_format = sharded needs data replicas that stay equal (allreduce or ZeRO, with "
                    "tensor and pipeline axes); this plan ({}) trains them apart: use train.checkpoint_format = whole",
                    plan_->describe());
}

std::string Trainer::save_sharded(int64_t epoch, int64_t batch_in_epoch) {
  report_saves(false);
  check_sharded_plan();
  if (save_session_.empty()) {
    std::byte nonce[8];
    random_bytes(nonce);
    save_session_ = plan_->agree_on_run_id(to_hex(nonce));  // collective: every rank saves
  }
  const int rank = plan_->world_rank(), data_rank = plan_->data_rank();
  if (!writer_) {
    writer_ = std::make_unique<ShardWriter>(ShardWriterOptions{
        .dir = o_.out_dir, .world = plan_->mesh().size(), .async = o_.checkpoint_async, .keep = o_.keep_checkpoints,
        .timeout = o_.checkpoint_timeout});
  }
  ShardSave s;
  s.tensors = rank_pieces(*plan_, *model_, *optimizer_);  // collective on the data axis (a codec's memory)
  const optim::OptimizerState local = optimizer_->state_dict();
  const std::string shard = plan_->shard_name();
  std::vector<std::string> params;
  for (const auto& [name, t] : model_->named_parameters()) params.push_back(name);
  std::vector<std::string> state;
  for (const auto& [name, t] : model_->state_dict()) state.push_back(name);
  s.index = {.rank = rank, .session = save_session_, .step = step_, .shard = shard, .data_rank = data_rank,
             .params = params, .state = state, .rng = gen_->state()};
  if (rank == 0) {
    s.manifest = {.step = step_, .epoch = epoch, .batch = batch_in_epoch, .world = plan_->mesh().size(),
                  .session = save_session_, .layout = plan_->describe(), .optimizer = local.scalars,
                  .config = o_.config, .extra = {{"plan", plan_->state_dict()}, {"run_id", run_id_}}};
    if (o_.batch_schedule) s.manifest.extra["batch_schedule"] = o_.batch_schedule->state_dict();
    if (scaler_) s.manifest.extra["loss_scaler"] = scaler_->state_dict();
    if (const std::string sync = plan_->grad_sync_name(); sync.starts_with("zero-")) {
      s.manifest.extra["zero"] = {{"stage", std::stoi(sync.substr(5))}, {"data_world", plan_->data_world()}};
    }
    // An earlier attempt's manifest of this step must not commit this save's
    // half-written shards.
    std::error_code ec;
    fs::remove(fs::path(checkpoint_stem(o_.out_dir, step_)) / "manifest.json", ec);
  }
  writer_->save(std::move(s));
  if (!o_.checkpoint_async) report_saves(false);
  return checkpoint_stem(o_.out_dir, step_);
}

void Trainer::report_saves(bool wait) {
  if (!writer_) return;
  for (const SaveOutcome& o : writer_->finished(wait)) {
    if (!o.error.empty()) {
      const std::string line = fmt::format("checkpoint of step {} failed, training goes on{}: {}", o.step,
                                           last_checkpoint_.empty() ? "" : " (the last complete one is " + last_checkpoint_ + ")",
                                           o.error);
      for (auto& cb : callbacks_) cb->on_message(line);
      continue;
    }
    last_checkpoint_ = o.stem;
    const std::string line = fmt::format(
        "checkpoint {}: the step loop stalled {:.1f} ms (staging {:.1f} MB of this rank's shard), written in {:.1f} ms{}",
        o.stem, 1e3 * o.stall_s, static_cast<double>(o.bytes) / 1e6, 1e3 * o.write_s,
        o_.checkpoint_async ? " in the background" : "");
    for (auto& cb : callbacks_) {
      cb->on_message(line);
      cb->on_checkpoint(o.stem, o.step);
    }
  }
}

std::string Trainer::checkpoint_dir() const {
  const std::string shard = plan_->shard_name();
  return shard.empty() ? o_.out_dir : o_.out_dir + "/shard-" + shard;
}

Resume parse_resume(const std::string& text) {
  if (text == "auto") return Resume::automatic;
  if (text == "never") return Resume::never;
  if (text == "always") return Resume::always;
  fail<ConfigError>("train.resume = \"{}\" is not one of auto, never, always (the bools it once took are refused: "
                    "true is now auto, or always to fail without a usable checkpoint; false is never)",
                    abridge(text));
}

namespace {

// Every checkpoint file in `out_dir` and its shard folders, relative to it:
// complete-looking ones by their sidecar, tensor files left without one (a
// write cut short) too, since either would be overwritten.
std::vector<std::string> checkpoint_files(const std::string& out_dir) {
  std::vector<std::string> found;
  std::vector<std::string> folders = {""};
  for (const std::string& s : shard_folders(out_dir)) folders.push_back(s + "/");
  for (const std::string& f : folders) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out_dir + "/" + f, ec)) {
      const std::string n = e.path().filename().string();
      if (!n.starts_with("ckpt-")) continue;
      if (n.ends_with(".json") || (n.ends_with(".safetensors") && !fs::exists(fs::path(e.path()).replace_extension(".json")))) {
        found.push_back(f + n);
      }
    }
  }
  for (int64_t step : sharded_folders(out_dir)) found.push_back(fs::path(checkpoint_stem("", step)).filename().string() + "/");
  std::sort(found.begin(), found.end());
  return found;
}

// "a, b, c" of at most `max` names, "and N more" after.
std::string some_of(const std::vector<std::string>& names, size_t max = 4) {
  std::vector<std::string> shown(names.begin(), names.begin() + static_cast<ptrdiff_t>(std::min(max, names.size())));
  std::string text = fmt::format("{}", fmt::join(shown, ", "));
  if (names.size() > max) text += fmt::format(" and {} more", names.size() - max);
  return text;
}

}  // namespace

std::pair<int64_t, int64_t> Trainer::resume() {
  if (o_.checkpoints) check_sharded_plan();  // before the first step, not at the first save
  if (o_.resume == Resume::never) {
    // A run that writes checkpoints would replace these step by step.
    if (const auto files = o_.checkpoints ? checkpoint_files(o_.out_dir) : std::vector<std::string>{};
        !files.empty()) {
      fail<ConfigError>("train.resume = never, but train.out_dir {} holds checkpoints of an earlier run ({}), which "
                        "this run would overwrite: continue from them with train.resume = auto, or choose another "
                        "train.out_dir", o_.out_dir, some_of(files));
    }
    return {0, 0};
  }
  std::vector<std::string> skipped, notes;
  // Whatever plan wrote the checkpoint, this rank takes its own part of it.
  RankPart part{.shard = plan_->shard_name(), .state = model_->state_dict(), .param_order = {},
                .specs = plan_->shards()};
  for (const auto& [name, t] : model_->named_parameters()) part.param_order.push_back(name);
  part.layout = plan_->describe();
  part.data_rank = plan_->data_rank();
  const std::vector<std::pair<int64_t, int64_t>> runs = plan_->optimizer_parameter_runs();
  const std::vector<std::string> run_names = plan_->optimizer_parameter_names(*model_);
  for (size_t j = 0; j < runs.size(); ++j) part.optimizer_runs[run_names[j]].push_back(runs[j]);
  const char* mode = o_.resume == Resume::always ? "always" : "auto";
  std::optional<Checkpoint> c;
  try {
    c = load_for_part(o_.out_dir, part, &notes, &skipped);
  } catch (const IoError& e) {
    // A checkpoint that reads but does not fit this run (another model): the
    // folder is an earlier run's, and this one must not write over it.
    fail<IoError>("train.resume = {}: train.out_dir {} holds a checkpoint this run cannot continue from: {} (choose "
                  "another train.out_dir for a new run)", mode, o_.out_dir, e.what());
  }
  for (const std::string& n : notes) {
    for (auto& cb : callbacks_) cb->on_message(n);
  }
  if (!c) {
    std::vector<std::string> why = skipped;  // "<file>: <reason>"
    for (const std::string& f : checkpoint_files(o_.out_dir)) {
      if (f.ends_with(".safetensors")) why.push_back(fmt::format("{}/{}: no sidecar (a write cut short)", o_.out_dir, f));
    }
    if (o_.resume == Resume::always) {
      if (why.empty()) fail<IoError>("train.resume = always, but train.out_dir {} holds no checkpoint", o_.out_dir);
      fail<IoError>("train.resume = always, but no checkpoint in {} is usable: {}", o_.out_dir, fmt::join(why, "; "));
    }
    if (!why.empty()) {
      const std::string line = fmt::format(
          "resume: no usable checkpoint in {} ({}); starting from scratch (train.resume = auto), and this run's "
          "checkpoints will replace those of the same steps", checkpoint_dir(), fmt::join(why, "; "));
      for (auto& cb : callbacks_) cb->on_message(line);
    }
    return {0, 0};
  }
  for (const std::string& s : skipped) {
    for (auto& cb : callbacks_) cb->on_message("skipping unusable checkpoint: " + s);
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
  // A sharded step is one folder for the whole job; a whole one is this shard's.
  const bool sharded = fs::exists(fs::path(checkpoint_stem(o_.out_dir, c->step)) / "manifest.json");
  last_checkpoint_ = checkpoint_stem(sharded ? o_.out_dir : checkpoint_dir(), c->step);
  for (auto& cb : callbacks_) {
    cb->on_message(fmt::format("resumed from {} (step {}, epoch {}, batch {})", last_checkpoint_, c->step, c->epoch + 1,
                               c->batch));
  }
  return {c->epoch, c->batch};
}

}  // namespace braid::train
