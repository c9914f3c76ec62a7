// The Graphviz text of a graph placed on two ranks: nodes filled by rank,
// the one edge that crosses ranks drawn red, attributes on a second line.
#include <gtest/gtest.h>

#include "braid/graph/dot.h"

namespace braid::graph {
namespace {

TEST(Dot, RanksAreColouredAndCrossingEdgesRed) {
  Graph g;
  const int x = g.add_input("x", {{2, 3}, DType::f32});
  const int a = g.add_node(op::find("neg"), {}, {x});
  const int b = g.add_node(op::find("reshape"), {{"shape", Shape{3, 2}}}, {g.nodes()[0].outputs[0]});
  g.mutable_nodes()[static_cast<size_t>(b)].rank = 1;
  g.add_output("y", g.nodes()[static_cast<size_t>(b)].outputs[0]);
  const std::string dot = to_dot(g);
  EXPECT_NE(dot.find("n0 [shape=box, style=filled, fillcolor=\"#cfe2f3\", label=\"neg\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("fillcolor=\"#fce5cd\", label=\"reshape\\nshape=[3, 2]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> n1 [label=\"f32 [2, 3]\", color=\"#cc0000\", penwidth=2]"), std::string::npos) << dot;
  EXPECT_NE(dot.find(fmt::format("v{} -> n0 [label=\"f32 [2, 3]\"];", x)), std::string::npos) << dot;
  EXPECT_EQ(a, 0);
}

}  // namespace
}  // namespace braid::graph
