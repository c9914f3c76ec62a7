// Everything `braid train CONFIG` builds from a configuration: datasets and
// loaders (data.*), the model (model.*), the optimizer and its schedule
// (optim.*), and the Trainer (train.*). Benchmarks and examples reuse it so
// they run exactly what the CLI runs.
#pragma once

#include <functional>
#include <memory>

#include "braid/parallel/process_group.h"
#include "braid/parallel/plan_factory.h"
#include "braid/train/config.h"
#include "braid/train/models.h"
#include "braid/train/run_options.h"
#include "braid/train/trainer.h"

namespace braid::train {

struct TrainingRun {
  // The ranks of the job (parallel.strategy != none); outlives the trainer.
  std::unique_ptr<parallel::ProcessGroup> group;
  bool leader = true;  // rank 0: writes checkpoints and reports
  std::shared_ptr<Generator> generator;  // dropout etc.; checkpointed by the trainer
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<data::Loader> train_loader, test_loader;  // test may be null
  // data.validation > 0: the held-out end of the training set; else null.
  std::shared_ptr<data::Loader> validation_loader;
  // The examples trained on, in dataset order (after the data.validation
  // split; before any RunOptions::train_data wrapping).
  std::shared_ptr<const data::Dataset> train_data;
  std::unique_ptr<Trainer> trainer;
  int64_t train_examples = 0, test_examples = 0;
  // For the command's reporters: train.out_dir (metrics beside the
  // checkpoints) and train.progress, read here with every other key.
  std::string out_dir, progress;
};

// The model a config trains and the shape of one batch, without reading the
// data (the datasets are opened for their shapes only): what `braid graph`
// captures a step of.
struct ModelAndBatch {
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<const data::Dataset> train;  // the training set, opened
  data::ExampleSpec example;
  int64_t batch = 0;
  nn::LossFn loss;
};
ModelAndBatch model_and_batch(const Config& config);

// train.precision as the dtype products compute in (f32 or bf16).
DType train_precision(const Config& config);

// train.device as the device to train on: cpu, cuda:N, or for a bare "cuda"
// cuda:(local_rank mod the GPUs this process sees), so the ranks of one host
// spread over its GPUs. ConfigError naming the key and the reason when the
// text is not a device or the device is not available (braid built without
// CUDA, no GPU visible, index out of range).
Device train_device(const Config& config, int local_rank = 0);

// ConfigError unless train.device names the CPU: "train.device = cuda has no
// effect on `what`: `why`" (for the paths that only run or model the CPU).
void require_cpu_device(const Config& config, std::string_view what, std::string_view why);

// What a caller may hand make_training_run instead of letting it build it:
// a distilled student trains in the job its teachers joined, on soft targets.
struct RunOptions {
  std::unique_ptr<parallel::ProcessGroup> group{};  // null: join the job (unless parallel.strategy = none)
  // Wraps the training examples (after the data.validation split); null: none.
  std::function<std::shared_ptr<const data::Dataset>(std::shared_ptr<const data::Dataset>)> train_data{};
  nn::LossFn loss{};  // the training loss; null: cross-entropy (evaluation always uses cross-entropy)
  // Builds the model in place of model.* (one written in Python,
  // docs/python.md) from what the data says and the initialisation generator
  // (train.seed's, alike on every rank); null: build_model(config, ...).
  std::function<std::shared_ptr<nn::Module>(const ModelInfo& info, Generator& init)> build_model{};
};

// Builds the whole run. Applies train.threads to the intra-op pool. The model
// is moved to train.device before the plan and the optimizer see it, so its
// parameters, gradients and optimizer state live there; on a device the ranks
// first agree how collectives move device buffers (parallel.device_comm), and
// a plan the device does not run yet is refused by name (train/device_plans.h). Under
// parallel.strategy = ensemble, the run is member (world rank) k's:
// member_config(config, k) (train/ensemble.h), and with ensemble.data =
// shard its data shard cut by the run's own seed.
TrainingRun make_training_run(const Config& config, RunOptions options = {});

}  // namespace braid::train
