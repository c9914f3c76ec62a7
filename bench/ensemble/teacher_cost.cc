// What a distillation teacher costs, precomputed or online. Run under the
// launcher that trained the members, on their finished run:
//
//   braid launch -n K -- build/bin/teacher_cost CONFIG --set parallel.strategy=ensemble
//       --set train.out_dir=RUN [--set ...] [--reps 3]     (one line)
//
// Each member resumes its last checkpoint, then the soft targets for the
// whole training set are computed two ways, --reps times each, alternating:
//   precomputed  forward passes of 256 rows, one all-reduce of N x C
//                probabilities (what braid train does, once per distillation)
//   online       forward passes of train.batch_size rows, one all-reduce per
//                batch (what computing the targets during the student's steps
//                costs, every epoch, without the student's own work)
// Member 0 prints one JSON object: the median seconds of each, per epoch.
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "braid/base/median.h"
#include "braid/train/distill.h"
#include "braid/train/ensemble.h"
#include "braid/train/trainer_setup.h"

namespace {

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"teacher_cost: soft targets precomputed vs per batch"};
  std::string config_path;
  std::vector<std::string> sets;
  int reps = 3;
  app.add_option("config", config_path)->required();
  app.add_option("--set", sets);
  app.add_option("--reps", reps);
  CLI11_PARSE(app, argc, argv);
  try {
    using namespace braid;
    train::Config c = train::load_config(config_path, sets);
    c.set_value("train.resume", std::string("always"), "teacher_cost");
    c.set_value("distill.epochs", int64_t{0}, "teacher_cost");
    train::TrainingRun run = train::make_training_run(c);
    run.trainer->fit();  // resumes the finished member: no step left
    const double t = c.get_float("distill.temperature");
    const int64_t batch = c.get_int("train.batch_size");
    const int workers = static_cast<int>(c.get_int("data.workers"));
    std::vector<double> pre, online, pre_ar, online_ar;
    int64_t online_allreduces = 0;
    for (int r = 0; r < reps; ++r) {
      for (int way = 0; way < 2; ++way) {
        const bool per_batch = (way + r) % 2 == 1;  // alternate which runs first
        const train::TeacherTargets x = train::teacher_soft_targets(
            *run.trainer, run.train_data,
            {.temperature = t, .batch_size = per_batch ? batch : 256, .workers = workers,
             .rows_per_allreduce = per_batch ? batch : 0});
        (per_batch ? online : pre).push_back(x.forward_seconds + x.allreduce_seconds);
        (per_batch ? online_ar : pre_ar).push_back(x.allreduce_seconds);
        if (per_batch) online_allreduces = x.allreduces;
      }
    }
    if (!run.leader) return 0;
    const nlohmann::json j = {{"members", train::ensemble_of(*run.trainer).members()},
                              {"examples", run.train_data->size()},
                              {"batch_size", batch},
                              {"reps", reps},
                              {"precomputed_seconds", upper_median(pre)},
                              {"precomputed_allreduce_seconds", upper_median(pre_ar)},
                              {"online_seconds_per_epoch", upper_median(online)},
                              {"online_allreduce_seconds_per_epoch", upper_median(online_ar)},
                              {"online_allreduces_per_epoch", online_allreduces}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "teacher_cost: %s\n", e.what());
    return 1;
  }
}
