#include "braid/graph/memory.h"

#include <algorithm>

namespace braid::graph {

MemoryPlan plan_memory(const Graph& g) {
  const size_t nv = g.values().size();
  // Each result's buffer: its own, or (views, in-place results) its source's.
  std::vector<int> buffer(nv);
  for (size_t v = 0; v < nv; ++v) buffer[v] = static_cast<int>(v);
  for (const Node& n : g.nodes()) {
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      int source = -1;
      if (n.op->effect == op::Effect::view && i == 0) source = n.inputs.at(0);
      if (n.op->effect == op::Effect::inplace) source = n.inputs.at(static_cast<size_t>(n.op->mutates[i]));
      if (source >= 0) buffer[static_cast<size_t>(n.outputs[i])] = buffer[static_cast<size_t>(source)];
    }
  }
  // A buffer dies after the last node that reads any value on it; kept
  // values (outputs, updates) keep theirs to the end.
  const int end = static_cast<int>(g.nodes().size());
  std::vector<int> last(nv, -1);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    for (int v : g.nodes()[k].inputs) {
      if (v >= 0) last[static_cast<size_t>(buffer[static_cast<size_t>(v)])] = static_cast<int>(k);
    }
  }
  for (const auto& [name, v] : g.outputs()) last[static_cast<size_t>(buffer[static_cast<size_t>(v)])] = end;
  for (const auto& [in, v] : g.updates()) last[static_cast<size_t>(buffer[static_cast<size_t>(v)])] = end;

  MemoryPlan plan;
  std::vector<int64_t> freed_after(g.nodes().size() + 1, 0);
  int64_t live = 0;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node& n = g.nodes()[k];
    for (int v : n.outputs) {
      if (buffer[static_cast<size_t>(v)] != v) continue;  // shares a buffer
      const Value& val = g.value(v);
      const int64_t bytes = val.meta.absent ? 0 : numel(val.meta.shape) * static_cast<int64_t>(itemsize(val.meta.dtype));
      live += bytes;
      plan.total_bytes += bytes;
      // Never read: dies at once (after its node, like the executor drops it).
      const int dies = std::max(last[static_cast<size_t>(v)], static_cast<int>(k));
      freed_after[static_cast<size_t>(dies)] += bytes;
    }
    if (live > plan.peak_bytes) {
      plan.peak_bytes = live;
      plan.peak_node = static_cast<int>(k);
    }
    live -= freed_after[k];
    plan.live_bytes.push_back(live);
  }
  return plan;
}

}  // namespace braid::graph
