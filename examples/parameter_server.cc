// Training through parameter servers: the servers hold the weights and the
// optimizer; each worker trains on its shard of the data, pushes its
// gradients and pulls fresh weights every step. No worker waits for another
// unless the consistency model says so: bsp (here) is synchronous SGD, asp
// lets every worker run at its own pace, ssp bounds how far apart they drift.
//   build/bin/braid launch --servers 1 --workers 2 -- build/bin/parameter_server [steps]
// The launcher runs `braid ps server` as ranks 0..S-1 and this program as the
// workers; the servers learn the settings below from the first worker.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "fashion_mlp.h"

using namespace braid;

int main(int argc, char** argv) try {
  const int64_t max_steps = argc > 1 ? std::atoll(argv[1]) : 0;  // 0: one epoch
  auto group = parallel::ProcessGroup::join({});
  const int servers = group->env().ps_servers;
  if (servers < 1) fail<ConfigError>("no parameter servers: start with braid launch --servers S --workers W -- ...");
  const int worker = group->comm().rank() - servers, workers = group->comm().size() - servers;
  set_num_threads(std::max(1, available_cores() / std::max(1, group->env().local_size - servers)));

  auto [train, test] = example::fashion_mnist(worker, workers, 64);
  auto model = example::make_mlp(/*seed=*/0);
  // The servers' updater applies each push with the learning rate that comes
  // with it: the worker's optimizer only carries lr (and its schedule).
  auto sgd = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.05});
  train::Trainer trainer(model, std::move(sgd), nullptr, nn::cross_entropy_loss, train, test,
                         {.epochs = 1, .max_steps = max_steps, .log_every = 100, .checkpoints = false});
  // Worker 0 sends its initial weights; every worker pulls them before step 1.
  parallel::PlanParts parts;
  parts.aggregation = std::make_unique<parallel::ParameterServer>(
      group->transport(), parallel::ParameterServerOptions{.config = {.consistency = ps::Consistency::bsp,
                                                                      .updater = {.name = "momentum", .momentum = 0.9}},
                                                           .servers = servers});
  trainer.set_plan(std::make_shared<parallel::Plan>(std::move(parts)));
  if (worker == 0) trainer.add_callback(std::make_shared<train::ConsoleReporter>(train::console_mode("lines", stdout)));
  const train::TrainSummary s = trainer.fit();
  std::printf("worker %d of %d (%d servers): trained %lld steps: final loss %.4f, test accuracy %.4f\n", worker,
              workers, servers, static_cast<long long>(s.steps), s.final_loss, s.last_eval.top1);
  return 0;
} catch (const braid::Error& e) {  // a dead server or a worker refused for different settings
  std::fprintf(stderr, "parameter_server: %s\n", e.what());
  return 1;
}
