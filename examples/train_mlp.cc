// The library API without the CLI: a Fashion-MNIST MLP trained for one epoch
// with SGD + momentum, a cosine schedule with warmup, and a checkpoint.
//   build/bin/train_mlp [out_dir]
#include <cstdio>

#include "braid/base/thread_pool.h"
#include "braid/data/fashion_mnist.h"
#include "braid/data/loader.h"
#include "braid/nn/activation.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/sequential.h"
#include "braid/optim/schedule.h"
#include "braid/optim/sgd.h"
#include "braid/train/callbacks_console.h"
#include "braid/train/trainer.h"

using namespace braid;

int main(int argc, char** argv) try {
  set_num_threads(available_cores());
  auto train_set = std::make_shared<data::FashionMnist>(data::FashionMnistOptions{.train = true});
  auto test_set = std::make_shared<data::FashionMnist>(data::FashionMnistOptions{.train = false});
  auto train = std::make_shared<data::Loader>(train_set, std::make_shared<data::ShuffledSampler>(train_set->size(), 0),
                                              data::LoaderOptions{.batch_size = 64});
  auto test = std::make_shared<data::Loader>(test_set, std::make_shared<data::SequentialSampler>(test_set->size()),
                                             data::LoaderOptions{.batch_size = 256});

  Generator init(/*seed=*/0);  // weights drawn from Philox: same values on every machine
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, 256, init), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 256, init), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 10, init)});

  auto sgd = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  auto schedule = optim::make_schedule(
      {.name = "cosine", .base_lr = 0.05, .total_steps = train->batches_per_epoch(), .warmup_steps = 100});
  train::Trainer trainer(model, std::move(sgd), std::move(schedule), nn::cross_entropy_loss, train, test,
                         {.epochs = 1, .log_every = 200, .out_dir = argc > 1 ? argv[1] : "runs/train_mlp"});
  trainer.add_callback(std::make_shared<train::ConsoleReporter>(train::console_mode("auto", stdout)));
  const train::TrainSummary s = trainer.fit();
  std::printf("test accuracy %.4f after %lld steps\n", s.last_eval.top1, static_cast<long long>(s.steps));
  return 0;
} catch (const braid::Error& e) {
  std::fprintf(stderr, "train_mlp: %s\n", e.what());
  return 1;
}
