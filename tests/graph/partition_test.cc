// Partitioned steps: a captured step of the MLP, CNN and character
// transformer cut over 2 and 3 ranks (layers placed as pipeline stages, or
// by work), run by threads over the in-process transport, gives the eager
// parameters after K steps exactly.
#include <gtest/gtest.h>

#include "braid/graph/partition.h"
#include "braid/graph/step.h"
#include "braid/ops/ops.h"
#include "braid/optim/sgd.h"
#include "models.h"
#include "tests/comm/collectives_util.h"

namespace braid::graph {
namespace {

using namespace testing;

std::unique_ptr<optim::Optimizer> sgd(const nn::Module& model) {
  return std::make_unique<optim::SGD>(model.parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
}

void check(const ModelCase& m, int ranks, bool by_work) {
  SCOPED_TRACE(std::string(m.name) + " on " + std::to_string(ranks) + (by_work ? " ranks by work" : " stages"));
  constexpr int kSteps = 4;
  settle_autotuner(m);
  auto eager = build(m);
  auto eager_opt = sgd(*eager);
  for (int s = 0; s < kSteps; ++s) eager_step(*eager, *eager_opt, m, s);

  // Every rank holds a replica that has taken steps 0 and 1; rank 0's step 1
  // is the captured one.
  std::vector<std::shared_ptr<nn::Sequential>> replicas;
  std::vector<std::unique_ptr<optim::Optimizer>> opts;
  std::vector<std::vector<Tensor>> bindings(static_cast<size_t>(ranks));
  Graph g;
  for (int r = 0; r < ranks; ++r) {
    replicas.push_back(build(m));
    opts.push_back(sgd(*replicas.back()));
    eager_step(*replicas.back(), *opts.back(), m, 0);
    auto [x, y] = batch(m, 1);
    if (r == 0) {
      g = capture_staged_step(*replicas[0], *opts[0], loss_of, x, y, stages_by_parameters(*replicas[0], ranks), &bindings[0]);
      if (by_work) place_by_work(g, ranks);
    } else {
      eager_step(*replicas.back(), *opts.back(), m, 1);
      std::vector<Tensor>& b = bindings[static_cast<size_t>(r)];
      b = {x, y};
      for (const auto& [name, p] : replicas.back()->named_parameters()) b.push_back(p);
      for (const auto& [name, t] : opts.back()->state_dict().tensors) b.push_back(t);
      b.push_back(opts.back()->scalars());
    }
  }
  const std::vector<RankGraph> parts = partition(g, ranks);
  int sends = 0;
  for (const RankGraph& p : parts) sends += p.sends;
  EXPECT_GT(sends, 0);
  comm::testing::run_world(ranks, [&](int r, comm::Communicator& comm) {
    for (int s = 2; s < kSteps; ++s) {
      auto [x, y] = batch(m, s);
      std::vector<Tensor>& b = bindings[static_cast<size_t>(r)];
      b[0] = x;
      b[1] = y;
      opts[static_cast<size_t>(r)]->refresh_scalars();
      run_partition(parts[static_cast<size_t>(r)], comm, b);
      opts[static_cast<size_t>(r)]->count_step();
    }
  });
  // Each parameter as its owner rank left it: the rank whose graph updates it.
  const auto want = eager->named_parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    int owner = -1;
    for (const RankGraph& p : parts) {
      for (const auto& [in, v] : p.graph.updates()) {
        if (p.graph.value(in).name == want[i].first) owner = p.rank;
      }
    }
    ASSERT_GE(owner, 0) << want[i].first << " is updated on no rank";
    const Tensor got = replicas[static_cast<size_t>(owner)]->named_parameters()[i].second;
    EXPECT_EQ(got.to_vector<float>(), want[i].second.to_vector<float>()) << want[i].first << " on rank " << owner;
  }
}

TEST(Partition, StagedStepsOverTwoAndThreeRanksEqualEagerSteps) {
  PinnedKernels pinned;
  for (const ModelCase& m : kModels) {
    for (int ranks : {2, 3}) check(m, ranks, false);
  }
}

TEST(Partition, StepsPlacedByWorkEqualEagerSteps) {
  PinnedKernels pinned;
  for (const ModelCase& m : kModels) check(m, 2, true);
}

TEST(Partition, AParameterReadAwayFromItsUpdateIsRefused) {
  Graph g;
  const int p = g.add_input("w", {{3}, DType::f32});
  const int d = g.add_input("d", {{3}, DType::f32});
  const int read = g.nodes()[static_cast<size_t>(g.add_node(op::find("neg"), {}, {p}))].outputs[0];
  g.mutable_nodes()[0].rank = 1;
  const int k = g.add_node(op::find("accumulate_"), {}, {p, d});
  g.add_update(p, g.nodes()[static_cast<size_t>(k)].outputs[0]);
  g.add_output("y", read);
  EXPECT_THROW(partition(g, 2), ValueError);
}

}  // namespace
}  // namespace braid::graph
