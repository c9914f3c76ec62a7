// Training in one process: the Fashion-MNIST MLP of fashion_mlp.h with SGD +
// momentum, a cosine schedule with warmup, evaluation and a checkpoint.
//   build/bin/train_mlp [steps [out_dir]]      (no steps, or 0: one epoch, 938 steps)
#include <cstdio>
#include <cstdlib>

#include "fashion_mlp.h"

using namespace braid;

int main(int argc, char** argv) try {
  const int64_t max_steps = argc > 1 ? std::atoll(argv[1]) : 0;
  const std::string out_dir = argc > 2 ? argv[2] : "runs/train_mlp";
  set_num_threads(available_cores());  // the intra-op pool: GEMMs and elementwise kernels

  auto [train, test] = example::fashion_mnist(/*rank=*/0, /*world=*/1, /*batch_size=*/64);
  auto model = example::make_mlp(/*seed=*/0);
  const int64_t steps = max_steps > 0 ? max_steps : train->batches_per_epoch();
  auto sgd = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  auto schedule = optim::make_schedule(
      {.name = "cosine", .base_lr = 0.05, .total_steps = steps, .warmup_steps = std::min<int64_t>(100, steps / 10)});
  // Checkpoints (safetensors + JSON sidecar) go to out_dir at the end of the
  // epoch, or of the run when max_steps cuts it short.
  train::Trainer trainer(model, std::move(sgd), std::move(schedule), nn::cross_entropy_loss, train, test,
                         {.epochs = 1, .max_steps = max_steps, .log_every = 200, .out_dir = out_dir});
  trainer.add_callback(std::make_shared<train::ConsoleReporter>(train::console_mode("auto", stdout)));
  const train::TrainSummary s = trainer.fit();
  std::printf("trained %lld steps: final loss %.4f, test accuracy %.4f, checkpoint %s\n",
              static_cast<long long>(s.steps), s.final_loss, s.last_eval.top1, s.last_checkpoint.c_str());
  return 0;
} catch (const braid::Error& e) {  // bad data, bad options: a message and exit code 1, never an abort
  std::fprintf(stderr, "train_mlp: %s\n", e.what());
  return 1;
}
