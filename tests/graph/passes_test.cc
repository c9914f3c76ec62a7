// Passes in isolation on small graphs, every pass (and simplify) preserving
// the results of randomized graphs bit for bit, and the liveness plan of a
// chain against its closed form.
#include <gtest/gtest.h>

#include "braid/base/rng.h"
#include "braid/graph/executor.h"
#include "braid/graph/memory.h"
#include "braid/graph/passes.h"

namespace braid::graph {
namespace {

int node_out(Graph& g, const char* op, std::vector<int> in, op::Attrs attrs = {}) {
  return g.nodes()[static_cast<size_t>(g.add_node(op::find(op), std::move(attrs), std::move(in)))].outputs[0];
}

std::vector<Tensor> run(const Graph& g, const std::vector<Tensor>& inputs) { return Executor(g).run(inputs); }

TEST(Passes, DeadCodeGoesAndResultsStay) {
  Graph g;
  const int x = g.add_input("x", {{4}, DType::f32});
  const int used = node_out(g, "exp", {x});
  node_out(g, "neg", {node_out(g, "abs", {x})});  // read by nothing
  g.add_output("y", used);
  const Graph d = eliminate_dead_code(g);
  EXPECT_EQ(d.nodes().size(), 1u);
  const Tensor in = Tensor::from_vector<float>({0.5f, -1, 2, 0}, {4});
  EXPECT_EQ(run(d, {in})[0].to_vector<float>(), run(g, {in})[0].to_vector<float>());
}

TEST(Passes, AnInPlaceWriteToAnInputIsNeverDead) {
  Graph g;
  const int a = g.add_input("a", {{3}, DType::f32});
  const int b = g.add_input("b", {{3}, DType::f32});
  g.add_node(op::find("accumulate_"), {}, {a, b});
  EXPECT_EQ(eliminate_dead_code(g).nodes().size(), 1u);
}

TEST(Passes, CommonSubexpressionsAreComputedOnce) {
  Graph g;
  const int x = g.add_input("x", {{4}, DType::f32});
  const int e1 = node_out(g, "exp", {x}), e2 = node_out(g, "exp", {x});
  const int s1 = node_out(g, "mul_scalar", {x}, {{"alpha", 2.0}}), s2 = node_out(g, "mul_scalar", {x}, {{"alpha", 3.0}});
  g.add_output("y", node_out(g, "add", {node_out(g, "add", {e1, e2}), node_out(g, "add", {s1, s2})}));
  const Graph c = eliminate_dead_code(eliminate_common_subexpressions(g));
  EXPECT_EQ(c.nodes().size(), g.nodes().size() - 1);  // one exp goes; the two scalings differ
  const Tensor in = Tensor::from_vector<float>({0.5f, -1, 2, 0}, {4});
  EXPECT_EQ(run(c, {in})[0].to_vector<float>(), run(g, {in})[0].to_vector<float>());
}

TEST(Passes, TwoClonesThatAreEachWrittenInPlaceStayTwo) {
  Graph g;
  const int x = g.add_input("x", {{2}, DType::f32});
  const int a = node_out(g, "clone", {x}), b = node_out(g, "clone", {x});
  const int a2 = node_out(g, "accumulate_", {a, x});
  g.add_output("a", a2);
  g.add_output("b", b);
  const Graph c = eliminate_common_subexpressions(g);
  EXPECT_EQ(c.nodes().size(), 3u);
  const Tensor in = Tensor::from_vector<float>({1, 2}, {2});
  const std::vector<Tensor> out = run(c, {in});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(Passes, AClonedFreshResultNobodyElseReadsIsNotCopied) {
  Graph g;
  const int x = g.add_input("x", {{3}, DType::f32});
  const int e = node_out(g, "exp", {x});
  const int c = node_out(g, "clone", {e});
  g.add_output("y", node_out(g, "accumulate_", {c, x}));
  const int kept = node_out(g, "clone", {x});  // an input: its copy stays
  g.add_output("z", kept);
  const Graph d = elide_copies(g);
  EXPECT_EQ(d.nodes().size(), g.nodes().size() - 1);
  const Tensor in = Tensor::from_vector<float>({0.5f, -1, 2}, {3});
  const std::vector<Tensor> want = run(g, {in}), got = run(d, {in});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>());
  EXPECT_EQ(in.to_vector<float>(), (std::vector<float>{0.5f, -1, 2}));  // the input was never written
}

TEST(Passes, ConstantsFoldUpToTheSizeLimit) {
  Graph g;
  const int x = g.add_input("x", {{2}, DType::f32});
  const int c = g.add_constant(Tensor::from_vector<float>({1, 2}, {2}));
  const int folded = node_out(g, "exp", {node_out(g, "neg", {c})});
  g.add_output("y", node_out(g, "mul", {x, folded}));
  const Graph f = eliminate_dead_code(fold_constants(g));
  EXPECT_EQ(f.nodes().size(), 1u);
  const Tensor in = Tensor::from_vector<float>({3, 4}, {2});
  EXPECT_EQ(run(f, {in})[0].to_vector<float>(), run(g, {in})[0].to_vector<float>());
  EXPECT_EQ(eliminate_dead_code(fold_constants(g, 1)).nodes().size(), 3u);  // [2] results exceed the limit
}

// A random graph of elementwise ops over two inputs and a constant, with
// repeated subexpressions and dead branches.
Graph random_graph(uint64_t seed) {
  Generator gen(seed);
  Graph g;
  std::vector<int> pool{g.add_input("a", {{3, 4}, DType::f32}), g.add_input("b", {{4}, DType::f32}),
                        g.add_constant(Tensor::from_vector<float>({0.5f, -0.25f, 1, 2}, {4}))};
  const char* unary[] = {"neg", "abs", "exp"};
  const char* binary[] = {"add", "sub", "mul", "maximum"};
  for (int i = 0; i < 24; ++i) {
    auto pick = [&] { return pool[gen.next_u64() % pool.size()]; };
    const uint64_t kind = gen.next_u64() % 4;
    int v;
    if (kind == 0) {
      v = node_out(g, unary[gen.next_u64() % 3], {pick()});
    } else if (kind == 1) {
      v = node_out(g, "mul_scalar", {pick()}, {{"alpha", (gen.next_u64() % 2) ? 0.5 : -0.75}});
    } else {
      v = node_out(g, binary[gen.next_u64() % 4], {pick(), pick()});
    }
    // Keep magnitudes small so exp chains stay finite.
    if (g.value(v).meta.shape == Shape{3, 4} || g.value(v).meta.shape == Shape{4}) v = node_out(g, "mul_scalar", {v}, {{"alpha", 0.25}});
    pool.push_back(v);
  }
  g.add_output("y", pool.back());
  g.add_output("z", pool[pool.size() / 2]);
  return g;
}

TEST(Passes, EveryPassPreservesRandomGraphsBitForBit) {
  Generator gen(9);
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const Graph g = random_graph(seed);
    Tensor a = Tensor::empty({3, 4}), b = Tensor::empty({4});
    for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = static_cast<float>(gen.uniform_f64()) - 0.5f;
    for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = static_cast<float>(gen.uniform_f64()) - 0.5f;
    const std::vector<Tensor> want = run(g, {a, b});
    std::vector<PassReport> report;
    for (const Graph& p : {eliminate_dead_code(g), eliminate_common_subexpressions(g), fold_constants(g),
                           elide_copies(g), simplify(g, &report)}) {
      const std::vector<Tensor> got = run(p, {a, b});
      for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << seed;
      EXPECT_LE(p.nodes().size(), g.nodes().size());
    }
  }
}

TEST(Memory, AChainKeepsTwoBuffersAliveAndAViewCostsNothing) {
  Graph g;
  int v = g.add_input("x", {{4}, DType::f32});  // 16 bytes
  for (int i = 0; i < 5; ++i) v = node_out(g, "neg", {v});
  g.add_output("y", v);
  MemoryPlan plan = plan_memory(g);
  EXPECT_EQ(plan.peak_bytes, 32);   // the input of a neg and its result
  EXPECT_EQ(plan.total_bytes, 80);  // five results with no reuse
  EXPECT_EQ(plan.live_bytes.back(), 16);  // the output
}

}  // namespace
}  // namespace braid::graph
