// Hybrid plans on in-process ranks: every product of two axes (data x
// tensor, data x pipeline, tensor x pipeline) and all three, against one
// process with the whole model and the whole batch.
#include <gtest/gtest.h>

#include <set>

#include "tests/parallel/model_parallel_util.h"

namespace braid::parallel {
namespace {

using namespace testing;

struct Case {
  MeshShape mesh;
  bool tokens;
  int microbatches = 2;
};

class Hybrid : public ::testing::TestWithParam<Case> {};

// 3 SGD steps on a batch of 8 rows (each replica its half) under the whole
// plan, every rank's parameters (or slices) against the whole model's (f32,
// sums in other orders: 2e-5), and the first step's global gradient norm.
TEST_P(Hybrid, EqualsOneProcess) {
  const Case c = GetParam();
  const int world = c.mesh.data * c.mesh.tensor * c.mesh.pipeline;
  const int64_t heads = c.mesh.tensor % 3 == 0 ? 3 : 2;  // heads the degree divides
  auto build = [&] { return c.tokens ? char_transformer(5, heads) : mlp(5); };
  double norm = 0;
  const Params expected = train_single(build(), c.tokens, 3, 8, 0.1, &norm);
  const auto got = train_planned(world, {.strategy = "auto", .mesh = c.mesh, .microbatches = c.microbatches}, build,
                                 c.tokens, 3, 8, 0.1);
  std::set<std::string> seen;
  for (int r = 0; r < world; ++r) {
    for (const auto& [name, v] : got[static_cast<size_t>(r)].params) seen.insert(name);
    expect_matches_whole(got[static_cast<size_t>(r)], expected, 2e-5, "rank " + std::to_string(r));
    // The global norm for clipping: every rank's plan sums its shards' parts
    // to the whole model's norm (each element once).
    EXPECT_NEAR(got[static_cast<size_t>(r)].first_grad_norm, norm, 1e-5 * norm) << "rank " << r;
  }
  EXPECT_EQ(seen.size(), expected.size()) << "some parameter is on no rank";
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, Hybrid,
    ::testing::Values(Case{{.data = 2, .tensor = 2, .pipeline = 1}, false}, Case{{.data = 2, .tensor = 2, .pipeline = 1}, true},
                      Case{{.data = 2, .tensor = 1, .pipeline = 2}, false}, Case{{.data = 2, .tensor = 1, .pipeline = 2}, true},
                      Case{{.data = 1, .tensor = 2, .pipeline = 2}, false}, Case{{.data = 1, .tensor = 3, .pipeline = 2}, true},
                      Case{{.data = 2, .tensor = 2, .pipeline = 2}, true, 4}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return fmt::format("D{}_T{}_P{}_{}", i.param.mesh.data, i.param.mesh.tensor, i.param.mesh.pipeline,
                         i.param.tokens ? "transformer" : "mlp");
    });

}  // namespace
}  // namespace braid::parallel
