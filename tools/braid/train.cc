// `braid train CONFIG [--set key=value ...]`: trains the model a config file
// describes (see docs/training.md and examples/configs/).
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "braid/base/log.h"
#include "braid/base/thread_pool.h"
#include "braid/train/callbacks_console.h"
#include "braid/train/memory_plan.h"
#include "braid/train/metrics.h"
#include "braid/train/sparse_training.h"
#include "braid/train/trainer_setup.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

void run_sparse(const train::Config& config, const std::string& summary_json) {
  const train::SparseSummary s = train::train_sparse(config, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  if (!s.leader) return;
  std::printf("sparse_linear: %lld steps in %.1f s, %.0f samples/s per worker (%d workers), %lld table rows pulled\n",
              static_cast<long long>(s.steps), s.train_seconds, s.samples_per_s, s.workers,
              static_cast<long long>(s.rows_pulled));
  if (s.has_eval) std::printf("test: loss %.4f, top-1 %.4f\n", s.test_loss, s.test_top1);
  if (!summary_json.empty()) {
    nlohmann::json j = {{"steps", s.steps}, {"train_seconds", s.train_seconds}, {"samples_per_s", s.samples_per_s},
                        {"world", s.workers}, {"global_samples_per_s", s.samples_per_s * s.workers},
                        {"rows_pulled", s.rows_pulled}};
    if (s.has_eval) j["eval"] = {{"loss", s.test_loss}, {"top1", s.test_top1}};
    std::ofstream(summary_json) << j.dump(2) << "\n";
  }
}

}  // namespace

void add_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "train a model from a TOML config");
  struct Args {
    std::string config;
    std::vector<std::string> sets;
    std::string summary_json;
    bool dry_run = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("config", args->config, "TOML config file (examples/configs/*.toml)")->required();
  cmd->add_option("--set", args->sets, "override a key: --set train.epochs=2 (repeatable)");
  cmd->add_option("--summary-json", args->summary_json, "write the run's summary (samples/s, accuracy) as JSON here");
  cmd->add_flag("--dry-run", args->dry_run,
                "build everything the config describes (data, model, plan, optimizer; joining the job when launched), "
                "refuse any key the run would not use, then stop before the first step");
  cmd->callback([args] {
    train::Config config = train::load_config(args->config, args->sets);
    if (config.get_string("model.name") == "sparse_linear") {
      if (args->dry_run) {
        fail<ConfigError>("braid train --dry-run: model.name = sparse_linear reads its keys while it joins its "
                          "parameter servers; run it under braid launch --servers S --workers W instead");
      }
      run_sparse(config, args->summary_json);
      return;
    }
    if (config.get_string("parallel.strategy") == "ensemble") {
      train_ensemble(config, args->summary_json, args->dry_run);
      return;
    }
    train::TrainingRun run = train::make_training_run(config);
    config.refuse_unread("braid train");
    if (args->dry_run) {
      if (run.leader) {
        std::printf("dry run: model %s, %lld parameters%s; plan %s; every key set is used\n",
                    config.get_string("model.name").c_str(), static_cast<long long>(run.model->num_parameters()),
                    run.trainer->plan().shard_name().empty() ? "" : " on this rank's shard",
                    run.trainer->plan().describe().c_str());
      }
      // Every rank's own memory (its shard, its stage), docs/memory.md.
      const parallel::Plan& plan = run.trainer->plan();
      const int stages = plan.mesh().degree(parallel::Axis::pipeline);
      train::MemoryShape shape = train::memory_shape(config, plan.mesh().coord(parallel::Axis::pipeline), stages);
      shape.data = plan.data_world();
      const train::MemoryPlan memory = train::plan_memory(*run.model, shape);
      std::printf("memory plan of rank %d (pipeline stage %d of %d):\n%s", run.group ? run.group->comm().rank() : 0,
                  plan.mesh().coord(parallel::Axis::pipeline), stages, memory.table().c_str());
      return;
    }
    if (!run.leader) {
      // Rank 0 reports for the group; the others evaluate only where rank 0's
      // evaluation needs them (an asynchronous worker trains on instead).
      if (!run.trainer->plan().evaluation_is_collective()) run.trainer->skip_evaluations();
      run.trainer->fit();
      return;
    }
    run.trainer->add_callback(
        std::make_shared<train::MetricsLogger>(train::MetricsOptions{.out_dir = run.out_dir}));
    run.trainer->add_callback(std::make_shared<train::ConsoleReporter>(train::console_mode(run.progress, stdout)));
    std::printf("model %s: %lld parameters%s; %lld training / %lld test examples; %d threads\n",
                config.get_string("model.name").c_str(), static_cast<long long>(run.model->num_parameters()),
                run.trainer->plan().shard_name().empty() ? "" : " on this rank's shard",
                static_cast<long long>(run.train_examples), static_cast<long long>(run.test_examples), num_threads());
    const train::TrainSummary s = run.trainer->fit();
    // Workers (parameter servers do not read data); each replica (data
    // rank) trains on its own samples, the ranks of one replica on the same.
    const int servers = run.group ? run.group->env().ps_servers : 0;
    const int world = run.group ? run.group->comm().size() - servers : 1;
    const int replicas = run.trainer->plan().data_world();
    if (world > 1 || servers > 0) {
      std::printf("group of %d workers%s over %s: %.0f samples/s in all\n", world,
                  servers > 0 ? fmt::format(" and {} parameter server{}", servers, servers > 1 ? "s" : "").c_str() : "",
                  run.group->transport_name().c_str(), s.samples_per_s * replicas);
    }
    if (!args->summary_json.empty()) {
      nlohmann::json j = {{"steps", s.steps}, {"epochs", s.epochs}, {"train_seconds", s.train_seconds},
                          {"samples_per_s", s.samples_per_s}, {"final_loss", s.final_loss},
                          {"threads", num_threads()}, {"last_checkpoint", s.last_checkpoint},
                          {"world", world}, {"replicas", replicas},
                          {"global_samples_per_s", s.samples_per_s * replicas}};
      if (s.has_eval) j["eval"] = {{"loss", s.last_eval.loss}, {"top1", s.last_eval.top1}, {"top5", s.last_eval.top5}};
      if (const nlohmann::json a = run.trainer->plan().aggregation_stats(); !a.empty()) j["aggregation"] = a;
      std::ofstream(args->summary_json) << j.dump(2) << "\n";
    }
  });
}

}  // namespace braid::cli
