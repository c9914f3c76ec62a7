// `braid graph CONFIG --ranks N [--place stages|work] [--run STEPS]`: the
// captured training step placed on N ranks and cut into one graph per rank,
// each cross-rank edge a send and a recv. Without --run it prints each
// rank's share (nodes, work, sends, bytes) and --dot draws the whole graph
// coloured by rank; with --run, under `braid launch -n N`, every process runs
// its rank's graph on the config's training data for STEPS steps, the
// partitions together computing exactly the whole step (docs/graph.md).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "braid/base/error.h"
#include "braid/base/median.h"
#include "braid/base/thread_pool.h"
#include "braid/graph/dot.h"
#include "braid/graph/partition.h"
#include "braid/graph/passes.h"
#include "braid/graph/step.h"
#include "braid/graph/work_depth.h"
#include "braid/train/config_data.h"
#include "braid/train/trainer_setup.h"
#include "tools/braid/graph_command.h"

namespace braid::cli {

namespace {


}  // namespace

void graph_partition(const train::Config& config, const GraphPartitionArgs& args) {
  auto group = args.run > 0 ? parallel::ProcessGroup::join(train::process_group_options(config)) : nullptr;
  const int world = group ? group->comm().size() : 1;
  const int rank = group ? group->comm().rank() : 0;
  const int ranks = args.ranks > 0 ? args.ranks : world;
  if (group && ranks != world) {
    fail<ConfigError>("braid graph --run: the step is cut into {} ranks but the job has {} processes "
                      "(braid launch -n {} -- braid graph ... --ranks {})", ranks, world, ranks, ranks);
  }
  if (args.place != "stages" && args.place != "work") {
    fail<ConfigError>("braid graph --place: 'stages' or 'work', got '{}'", args.place);
  }
  if (args.run > 0) set_num_threads(std::max(1, available_cores() / std::max(1, group->env().local_size)));

  // Every rank builds the same model from the same seed, reads the same
  // batches and captures the same step.
  train::ModelAndBatch m = train::model_and_batch(config);
  auto* model = dynamic_cast<nn::Sequential*>(m.model.get());
  if (model == nullptr) fail<ConfigError>("braid graph --ranks: the model is not sequential, so it has no stages");
  auto optimizer = train::make_optimizer(config, m.model->parameters());
  auto loader = train::make_train_loader(config, m.train);
  auto next = [&] {
    for (;;) {
      std::optional<data::Batch> b = loader->next();
      if (!b) {
        loader->start_epoch(0);
        continue;
      }
      if (b->size() == m.batch) return std::make_pair(b->input.clone(), b->target.clone());
    }
  };
  auto [x0, y0] = next();
  std::vector<Tensor> bindings;
  graph::Graph g = graph::capture_staged_step(*model, *optimizer, m.loss, x0, y0,
                                              graph::stages_by_parameters(*model, ranks), &bindings);
  if (args.place == "work") graph::place_by_work(g, ranks);
  g = graph::simplify(g);
  const std::vector<graph::RankGraph> parts = graph::partition(g, ranks);
  if (rank == 0) {
    std::printf("%s step on %d ranks (placed by %s): %zu nodes\n", config.get_string("model.name").c_str(), ranks,
                args.place.c_str(), g.nodes().size());
    std::printf("%6s %7s %12s %7s %7s %12s\n", "rank", "nodes", "work", "sends", "recvs", "bytes sent");
    for (const graph::RankGraph& p : parts) {
      std::printf("%6d %7zu %12.4g %7d %7d %12lld\n", p.rank, p.graph.nodes().size(), graph::work_depth(p.graph).work,
                  p.sends, p.recvs, static_cast<long long>(p.bytes_sent));
    }
    if (!args.dot.empty() || !args.svg.empty()) write_graph_picture(graph::to_dot(g), args.dot, args.svg);
  }
  if (args.run == 0) return;

  const graph::RankGraph& mine = parts[static_cast<size_t>(rank)];
  const bool has_loss = std::any_of(mine.graph.outputs().begin(), mine.graph.outputs().end(),
                                    [](const auto& o) { return o.first == "loss"; });
  std::vector<double> ms;
  if (rank == 0 && config.get_float("train.grad_clip") > 0) {
    std::printf("note: a captured step has no gradient clipping and a constant learning rate "
                "(train.grad_clip and optim.schedule are not applied)\n");
  }
  for (int64_t step = 0; step < args.run; ++step) {
    const auto t0 = std::chrono::steady_clock::now();  // the batch is part of the step, as in braid train
    auto [x, y] = next();
    bindings[0] = x;
    bindings[1] = y;
    optimizer->refresh_scalars();
    const auto outputs = graph::run_partition(mine, group->comm(), bindings);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    optimizer->count_step();
    for (const auto& [name, t] : outputs) {
      if (name == "loss" && (step % args.print_every == 0 || step + 1 == args.run)) {
        std::printf("step %lld loss %.4f\n", static_cast<long long>(step + 1), t.item());
        std::fflush(stdout);
      }
    }
  }
  if (has_loss) {
    std::printf("graph run: %d ranks, %lld steps, %.3f ms/step (median), batch %lld\n", ranks,
                static_cast<long long>(args.run), (ms.empty() ? 0 : upper_median(ms)), static_cast<long long>(m.batch));
  }
}

}  // namespace braid::cli
