// Passes in isolation on small graphs, every pass (and simplify) preserving
// the results of randomized graphs bit for bit, and the liveness plan of a
// chain against its closed form.
#include <gtest/gtest.h>

#include "braid/base/rng.h"
#include "braid/graph/executor.h"
#include "braid/graph/fuse.h"
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

TEST(Passes, ACloneWrittenAfterTheSourcesLastReadWritesTheSource) {
  Graph g;
  const int x = g.add_input("x", {{3}, DType::f32});
  const int e = node_out(g, "exp", {x});
  const int c = node_out(g, "clone", {e});
  const int early = node_out(g, "neg", {e});  // reads e before the write
  g.add_output("y", node_out(g, "accumulate_", {c, x}));
  g.add_output("n", early);
  const Graph d = elide_copies(g);
  EXPECT_EQ(d.nodes().size(), g.nodes().size() - 1);
  // A reader after the write keeps the copy.
  Graph h;
  const int hx = h.add_input("x", {{3}, DType::f32});
  const int he = node_out(h, "exp", {hx});
  const int hc = node_out(h, "clone", {he});
  h.add_output("y", node_out(h, "accumulate_", {hc, hx}));
  h.add_output("n", node_out(h, "neg", {he}));
  EXPECT_EQ(elide_copies(h).nodes().size(), h.nodes().size());
  const Tensor in = Tensor::from_vector<float>({0.5f, -1, 2}, {3});
  for (const Graph* k : {&g, &h}) {
    const std::vector<Tensor> want = run(*k, {in}), got = run(elide_copies(*k), {in});
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>());
  }
}

TEST(Fuse, CopyAndAccumulateBecomeOneAdd) {
  Graph g;
  const int x = g.add_input("x", {{4}, DType::f32}), y = g.add_input("y", {{4}, DType::f32});
  const int c = node_out(g, "clone", {x});
  g.add_output("s", node_out(g, "accumulate_", {c, y}));
  const Graph f = fuse(g);
  ASSERT_EQ(f.nodes().size(), 1u);
  EXPECT_EQ(f.nodes()[0].op->name, "add");
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {4}), b = Tensor::from_vector<float>({0.5f, 0.25f, -3, 8}, {4});
  EXPECT_EQ(run(f, {a, b})[0].to_vector<float>(), run(g, {a, b})[0].to_vector<float>());
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Fuse, SliceGradientsTilingADimensionBecomeOneConcat) {
  Graph g;
  const int q = g.add_input("q", {{1, 2}, DType::f32}), k = g.add_input("k", {{2, 2}, DType::f32});
  auto back = [&](int v, int64_t start, int64_t end) {
    return node_out(g, "slice_backward", {v},
                    {{"dim", int64_t{0}}, {"start", start}, {"end", end}, {"step", int64_t{1}}, {"shape", Shape{3, 2}}});
  };
  g.add_output("g", node_out(g, "accumulate_", {back(k, 1, 3), back(q, 0, 1)}));
  const Graph f = fuse(g);
  ASSERT_EQ(f.nodes().size(), 1u);
  EXPECT_EQ(f.nodes()[0].op->name, "concat");
  const Tensor a = Tensor::from_vector<float>({1, 2}, {1, 2}), b = Tensor::from_vector<float>({3, 4, 5, 6}, {2, 2});
  EXPECT_EQ(run(f, {a, b})[0].to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Slices that leave a gap (a row of zeros) are not a concat.
  Graph h;
  const int hq = h.add_input("q", {{1, 2}, DType::f32});
  const op::Attrs at{{"dim", int64_t{0}}, {"step", int64_t{1}}, {"shape", Shape{3, 2}}};
  op::Attrs first = at, last = at;
  first.set("start", int64_t{0});
  first.set("end", int64_t{1});
  last.set("start", int64_t{2});
  last.set("end", int64_t{3});
  h.add_output("g", node_out(h, "accumulate_", {node_out(h, "slice_backward", {hq}, first),
                                               node_out(h, "slice_backward", {hq}, last)}));
  EXPECT_EQ(fuse(h).nodes().size(), h.nodes().size());
}

TEST(Passes, IdentityViewsGo) {
  Graph g;
  const int x = g.add_input("x", {{2, 3}, DType::f32});
  const int r = node_out(g, "reshape", {x}, {{"shape", Shape{2, 3}}});
  const int p = node_out(g, "permute", {r}, {{"dims", Shape{0, 1}}});
  const int t = node_out(g, "permute", {p}, {{"dims", Shape{1, 0}}});
  g.add_output("y", node_out(g, "neg", {t}));
  const Graph e = elide_identity_views(g);
  EXPECT_EQ(e.nodes().size(), 2u);
  const Tensor in = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(run(e, {in})[0].to_vector<float>(), run(g, {in})[0].to_vector<float>());
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
    const uint64_t kind = gen.next_u64() % 7;
    int v;
    if (kind == 4) {  // a gradient summed into a copy (copies, fusion)
      const int x = pick();
      v = node_out(g, "accumulate_", {node_out(g, "clone", {x}), node_out(g, "neg", {x})});
    } else if (kind == 5) {  // reshapes and a permute that change nothing
      const int x = pick();
      const Shape& shape = g.value(x).meta.shape;
      v = node_out(g, "abs", {node_out(g, "reshape", {x}, {{"shape", shape}})});
      if (shape.size() == 2) v = node_out(g, "permute", {v}, {{"dims", Shape{0, 1}}});
    } else if (kind == 6) {  // slice gradients that tile rows 0..3 of a [3, 4] value (fusion)
      int x = pick();
      if (g.value(x).meta.shape != Shape{3, 4}) x = pool[0];
      auto piece = [&](int64_t start, int64_t end) {
        const op::Attrs at{{"dim", int64_t{0}}, {"start", start}, {"end", end}, {"step", int64_t{1}}};
        op::Attrs back = at;
        back.set("shape", Shape{3, 4});
        return node_out(g, "slice_backward", {node_out(g, "exp", {node_out(g, "slice", {x}, at)})}, back);
      };
      v = node_out(g, "accumulate_", {node_out(g, "accumulate_", {piece(1, 2), piece(0, 1)}), piece(2, 3)});
    } else if (kind == 0) {
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
  size_t fused = 0, views = 0;  // nodes the fusion and identity-view passes removed, over all seeds
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const Graph g = random_graph(seed);
    fused += g.nodes().size() - fuse(g).nodes().size();
    views += g.nodes().size() - elide_identity_views(g).nodes().size();
    Tensor a = Tensor::empty({3, 4}), b = Tensor::empty({4});
    for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = static_cast<float>(gen.uniform_f64()) - 0.5f;
    for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = static_cast<float>(gen.uniform_f64()) - 0.5f;
    const std::vector<Tensor> want = run(g, {a, b});
    std::vector<PassReport> report;
    for (const Graph& p : {eliminate_dead_code(g), eliminate_common_subexpressions(g), fold_constants(g),
                           elide_copies(g), elide_identity_views(g), fuse(g), simplify(g, &report)}) {
      const std::vector<Tensor> got = run(p, {a, b});
      for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << seed;
      EXPECT_LE(p.nodes().size(), g.nodes().size());
    }
  }
  EXPECT_GT(fused, 0u);
  EXPECT_GT(views, 0u);
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
