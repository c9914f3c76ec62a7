// Data parallelism over all-reduce, as PyTorch DDP does it: every rank keeps
// the whole model and trains on its own shard of the data. During backward,
// gradients are averaged across ranks in ~1 MiB buckets, each bucket's
// all-reduce starting as soon as its gradients are final, so communication
// overlaps the rest of backward; every rank then takes the same step.
//   build/bin/braid launch -n 2 -- build/bin/data_parallel [steps]
// It also runs alone (a group of one) and, unchanged, under mpirun or srun
// (rank 0 makes the secret and serves the rendezvous; docs/communication.md):
//   mpirun -n 2 build/bin/data_parallel
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "fashion_mlp.h"

using namespace braid;

int main(int argc, char** argv) try {
  const int64_t max_steps = argc > 1 ? std::atoll(argv[1]) : 0;  // 0: one epoch
  // Joins the job the launcher described in the environment (RANK, WORLD_SIZE,
  // MASTER_ADDR, ...): shared memory between processes of one host, tcp across hosts.
  auto group = parallel::ProcessGroup::join({});
  comm::Communicator& comm = group->comm();
  set_num_threads(std::max(1, available_cores() / group->env().local_size));  // ranks of a host share its cores

  // 64 examples per rank and step: the global batch is 64 x world.
  auto [train, test] = example::fashion_mnist(comm.rank(), comm.size(), 64);
  auto model = example::make_mlp(/*seed=*/0);
  auto sgd = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  train::Trainer trainer(model, std::move(sgd), /*schedule: constant lr*/ nullptr, nn::cross_entropy_loss, train,
                         test, {.epochs = 1, .max_steps = max_steps, .log_every = 100, .checkpoints = false});
  // A plan on a mesh of `world` replicas whose gradients are averaged in
  // buckets during backward. Before the first step it checks that all ranks
  // train the same model (an error names the rank that differs) and
  // broadcasts rank 0's weights.
  parallel::PlanParts parts;
  parts.mesh = parallel::Mesh::build(comm, {});
  parts.grad_sync = std::make_unique<parallel::BucketedAllreduce>(parts.mesh.group(parallel::Axis::data));
  trainer.set_plan(std::make_shared<parallel::Plan>(std::move(parts)));
  if (comm.rank() == 0) trainer.add_callback(std::make_shared<train::ConsoleReporter>(train::console_mode("lines", stdout)));
  const train::TrainSummary s = trainer.fit();
  std::printf("rank %d of %d over %s: trained %lld steps: final loss %.4f, test accuracy %.4f\n", comm.rank(),
              comm.size(), group->transport_name().c_str(), static_cast<long long>(s.steps), s.final_loss,
              s.last_eval.top1);
  return 0;
} catch (const braid::Error& e) {  // a lost peer or a timeout names the rank and the operation
  std::fprintf(stderr, "data_parallel: %s\n", e.what());
  return 1;
}
