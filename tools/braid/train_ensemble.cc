// `braid train` under parallel.strategy = ensemble (docs/aggregation.md):
// every rank trains its own member without communicating, then the members
// are scored alone and as an ensemble (their mean softmax probabilities),
// and with distill.epochs > 0 one student is distilled from them on the
// same ranks, data parallel. Member 0 reports for the job.
#include <cstdio>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "braid/train/callbacks_console.h"
#include "braid/train/distill.h"
#include "braid/train/ensemble.h"
#include "braid/train/metrics.h"
#include "braid/train/trainer_setup.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void add_reporters(train::Trainer& trainer, const train::Config& config, const std::string& out_dir) {
  trainer.add_callback(std::make_shared<train::MetricsLogger>(train::MetricsOptions{.out_dir = out_dir}));
  trainer.add_callback(
      std::make_shared<train::ConsoleReporter>(train::console_mode(config.get_string("train.progress"), stdout)));
}

nlohmann::json eval_json(const train::EvalMetrics& e) {
  return {{"loss", e.loss}, {"top1", e.top1}, {"top5", e.top5}, {"examples", e.examples}};
}

// The student on the members' ranks, data parallel, on the teacher's soft
// targets; its figures as JSON.
nlohmann::json distill(const train::Config& config, const train::DistillPlan& plan, train::TrainingRun& members, int k) {
  const double t = plan.temperature, alpha = plan.alpha;
  const train::TeacherTargets teacher = train::teacher_soft_targets(
      *members.trainer, members.train_data,
      {.temperature = t, .batch_size = 256, .workers = static_cast<int>(config.get_int("data.workers"))});
  const double mb = static_cast<double>(teacher.probs.numel()) * 4 / 1e6;
  if (members.leader) {
    say(fmt::format("distill: teacher soft targets at T = {:g} for {} training examples: forward {:.2f} s, {} "
                    "all-reduce of {:.2f} MB in {:.3f} s; teacher top-1 on the training set {:.4f}",
                    t, teacher.probs.size(0), teacher.forward_seconds, teacher.allreduces, mb,
                    teacher.allreduce_seconds, teacher.top1));
  }
  const train::Config& sc = plan.student;
  train::TrainingRun student = train::make_training_run(
      sc, {.group = std::move(members.group),
           .train_data = [&](std::shared_ptr<const data::Dataset> d) -> std::shared_ptr<const data::Dataset> {
             return std::make_shared<train::SoftTargets>(std::move(d), teacher.probs);
           },
           .loss = train::soft_target_loss(t, alpha)});
  const std::string model = fmt::format("{}{}", sc.get_string("model.name"),
                                        sc.get_string("model.name") == "mlp"
                                            ? fmt::format(" hidden {}", sc.get_int("model.hidden")) : "");
  if (student.leader) {
    add_reporters(*student.trainer, sc, sc.get_string("train.out_dir"));
    say(fmt::format("distill: student {} ({} parameters), {} epochs at alpha {:g}, data parallel over {} rank{} "
                    "with {} examples each per step; checkpoints in {}",
                    model, student.model->num_parameters(), sc.get_int("train.epochs"), alpha, k, k > 1 ? "s" : "",
                    sc.get_int("train.batch_size"), sc.get_string("train.out_dir")));
  }
  train::TrainSummary s = student.trainer->fit();
  if (!s.has_eval) s.last_eval = student.trainer->evaluate();  // a resumed, finished student
  if (student.leader) {
    say(fmt::format("student {}: test top-1 {:.4f}, loss {:.4f} after {} steps", model, s.last_eval.top1,
                    s.last_eval.loss, s.steps));
  }
  members.group = std::move(student.group);  // the job outlives both trainers
  return {{"model", sc.get_string("model.name")},
          {"hidden", sc.get_int("model.hidden")},
          {"parameters", student.model->num_parameters()},
          {"temperature", t},
          {"alpha", alpha},
          {"steps", s.steps},
          {"train_seconds", s.train_seconds},
          {"eval", eval_json(s.last_eval)},
          {"last_checkpoint", s.last_checkpoint},
          {"teacher", {{"examples", teacher.probs.size(0)}, {"top1_train", teacher.top1},
                       {"forward_seconds", teacher.forward_seconds},
                       {"allreduce_seconds", teacher.allreduce_seconds}, {"allreduces", teacher.allreduces},
                       {"megabytes", mb}}}};
}

}  // namespace

void train_ensemble(const train::Config& config, const std::string& summary_json, bool dry_run) {
  train::TrainingRun run = train::make_training_run(config);
  if (!run.test_loader) fail<ConfigError>("parallel.strategy = ensemble scores its members on a test set; "
                                          "data.name = {} gives none", config.get_string("data.name"));
  parallel::Ensemble& ensemble = train::ensemble_of(*run.trainer);
  const int k = ensemble.members();
  const bool shard = config.get_string("ensemble.data") == "shard";
  std::optional<train::DistillPlan> student;
  if (config.get_int("distill.epochs") > 0) student = train::distill_plan(config, k);
  config.refuse_unread("braid train");
  if (dry_run) return;
  if (run.leader) {
    add_reporters(*run.trainer, config, train::member_config(config, 0).get_string("train.out_dir"));
    say(fmt::format("ensemble: {} member{}, one per rank, each on {} (seed {} + member); checkpoints in {}/member-k; "
                    "member 0 reports",
                    k, k > 1 ? "s" : "", shard ? "its 1/K shard of the training set" : "the whole training set",
                    config.get_int("train.seed"), config.get_string("train.out_dir")));
  }
  const train::TrainSummary own = run.trainer->fit();
  const train::EnsembleFigures f = train::evaluate_ensemble(*run.trainer, *run.test_loader);
  nlohmann::json members = nlohmann::json::array();
  for (size_t m = 0; m < f.member_top1.size(); ++m) {
    members.push_back({{"member", m}, {"top1", f.member_top1[m]}, {"loss", f.member_loss[m]}});
    if (run.leader) {
      say(fmt::format("ensemble member {}: test top-1 {:.4f}, loss {:.4f}", m, f.member_top1[m], f.member_loss[m]));
    }
  }
  if (run.leader) {
    say(fmt::format("ensemble of {} members: test top-1 {:.4f}, loss {:.4f}; mean member top-1 {:.4f} ({:+.2f} "
                    "points), best member {:.4f}",
                    k, f.top1, f.loss, f.mean_member_top1(), 100 * (f.top1 - f.mean_member_top1()),
                    f.best_member_top1()));
  }
  nlohmann::json j = {{"steps", own.steps},
                      {"train_seconds", own.train_seconds},
                      {"samples_per_s", own.samples_per_s},
                      {"world", k},
                      {"ensemble", {{"members", members},
                                    {"top1", f.top1},
                                    {"loss", f.loss},
                                    {"mean_member_top1", f.mean_member_top1()},
                                    {"best_member_top1", f.best_member_top1()},
                                    {"examples", f.examples},
                                    {"seconds", f.seconds}}}};
  if (student) j["student"] = distill(config, *student, run, k);
  j["aggregation"] = ensemble.stats();
  if (run.leader && !summary_json.empty()) std::ofstream(summary_json) << j.dump(2) << "\n";
}

}  // namespace braid::cli
