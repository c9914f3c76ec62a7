#include "braid/graph/work_depth.h"

#include <fmt/format.h>

#include <algorithm>

namespace braid::graph {

WorkDepth work_depth(const Graph& graph) {
  WorkDepth wd;
  std::vector<double> ready(graph.values().size(), 0.0);  // when each value is available
  for (const Node& n : graph.nodes()) {
    const op::Cost c = op::cost_of(*n.op, input_metas(graph, n), output_metas(graph, n), n.attrs);
    double start = 0;
    for (int v : n.inputs) {
      if (v >= 0) start = std::max(start, ready[static_cast<size_t>(v)]);
    }
    for (int v : n.outputs) ready[static_cast<size_t>(v)] = start + c.depth;
    wd.depth = std::max(wd.depth, start + c.depth);
    wd.work += c.flops;
    wd.bytes += c.bytes;
    ++wd.nodes;
    FamilyFigures& f = wd.families[n.op->family];
    f.work += c.flops;
    f.bytes += c.bytes;
    ++f.nodes;
  }
  return wd;
}

std::string to_text(const WorkDepth& wd, const std::vector<int>& processors) {
  std::string out = fmt::format("{:<14} {:>7} {:>14} {:>7} {:>14}\n", "family", "nodes", "work", "share", "bytes");
  std::vector<std::pair<std::string, FamilyFigures>> rows(wd.families.begin(), wd.families.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.work > b.second.work; });
  for (const auto& [family, f] : rows) {
    out += fmt::format("{:<14} {:>7} {:>14.4g} {:>6.1f}% {:>14.4g}\n", family, f.nodes, f.work,
                       wd.work > 0 ? 100.0 * f.work / wd.work : 0.0, f.bytes);
  }
  out += fmt::format("W = {:.4g} operations, D = {:.4g} steps, W/D = {:.4g} (average parallelism)\n", wd.work, wd.depth,
                     wd.parallelism());
  for (int p : processors) {
    out += fmt::format("  p = {:<4} T_p <= W/p + D = {:.4g} steps (speedup >= {:.3g})\n", p, wd.steps_bound(p),
                       wd.steps_bound(p) > 0 ? wd.steps_bound(1) / wd.steps_bound(p) : 0.0);
  }
  return out;
}

}  // namespace braid::graph
