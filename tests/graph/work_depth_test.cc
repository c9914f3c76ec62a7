// Work-Depth figures of small hand-built graphs against their closed forms.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/graph/work_depth.h"

namespace braid::graph {
namespace {

// A balanced tree of scalar additions over n inputs: W = n - 1, D = ceil(log2 n).
Graph reduction_tree(int n) {
  Graph g;
  std::vector<int> level;
  for (int i = 0; i < n; ++i) level.push_back(g.add_input("x" + std::to_string(i), {{}, DType::f32}));
  const op::OpDef& add = op::find("add");
  while (level.size() > 1) {
    std::vector<int> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      next.push_back(g.nodes()[static_cast<size_t>(g.add_node(add, {}, {level[i], level[i + 1]}))].outputs[0]);
    }
    if (level.size() % 2) next.push_back(level.back());
    level = next;
  }
  g.add_output("sum", level[0]);
  return g;
}

TEST(WorkDepth, AReductionOfNValuesHasWorkNMinusOneAndDepthLog2N) {
  for (int n : {1, 2, 3, 5, 8, 13, 64, 100}) {
    const WorkDepth wd = work_depth(reduction_tree(n));
    EXPECT_EQ(wd.work, n - 1) << n;
    EXPECT_EQ(wd.depth, n == 1 ? 0 : std::ceil(std::log2(n))) << n;
    EXPECT_EQ(wd.families.count("elementwise"), n > 1 ? 1u : 0u);
  }
}

TEST(WorkDepth, AChainIsAsDeepAsItIsLongAndBrentsBoundHolds) {
  Graph g;
  int v = g.add_input("x", {{4}, DType::f32});
  for (int i = 0; i < 10; ++i) v = g.nodes()[static_cast<size_t>(g.add_node(op::find("neg"), {}, {v}))].outputs[0];
  const WorkDepth wd = work_depth(g);
  EXPECT_EQ(wd.work, 40);  // 10 maps over 4 elements
  EXPECT_EQ(wd.depth, 10);
  EXPECT_EQ(wd.parallelism(), 4);
  EXPECT_EQ(wd.steps_bound(4), 20);
  EXPECT_NE(to_text(wd).find("W = 40"), std::string::npos);
}

TEST(WorkDepth, SumToCountsItsAdditionsAndTheirTreeDepth) {
  Graph g;
  const int x = g.add_input("x", {{8, 4}, DType::f32});
  g.add_node(op::find("sum_to"), {{"shape", std::vector<int64_t>{1, 4}}}, {x});
  const WorkDepth wd = work_depth(g);
  EXPECT_EQ(wd.depth, 3);  // 8 rows into one: log2 8
}

}  // namespace
}  // namespace braid::graph
