#include "braid/graph/dot.h"

#include <fmt/format.h>

namespace braid::graph {

namespace {

// Light fills that stay readable with black text; ranks beyond wrap around.
constexpr const char* kRankColours[] = {"#cfe2f3", "#fce5cd", "#d9ead3", "#ead1dc", "#fff2cc", "#d0e0e3", "#f4cccc", "#d9d2e9"};

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";  // dot's line break
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string edge_label(const Value& v) { return fmt::format("{} {}", name(v.meta.dtype), to_string(v.meta.shape)); }

}  // namespace

std::string to_dot(const Graph& g) {
  std::string out = "digraph step {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
                    "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#666666\"];\n";
  for (int id : g.inputs()) {
    out += fmt::format("  v{} [shape=ellipse, label={}];\n", id, quoted(g.value(id).name));
  }
  for (const auto& [id, t] : g.constants()) {
    out += fmt::format("  v{} [shape=ellipse, style=dashed, label={}];\n", id,
                       quoted(g.value(id).name.empty() ? "const " + to_string(g.value(id).meta.shape) : g.value(id).name));
  }
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node& n = g.nodes()[k];
    const std::string attrs = n.attrs.to_string();
    const std::string label = n.op->name + (attrs.empty() || attrs.size() > 40 ? "" : "\n" + attrs);
    const char* colour = kRankColours[static_cast<size_t>(n.rank) % std::size(kRankColours)];
    out += fmt::format("  n{} [shape=box, style=filled, fillcolor=\"{}\", label={}];\n", k, colour, quoted(label));
  }
  // Where each value comes from: an input/constant node or its producer.
  auto source = [&](int v) {
    const Value& val = g.value(v);
    return val.kind == ValueKind::result ? fmt::format("n{}", val.producer) : fmt::format("v{}", v);
  };
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    for (int v : g.nodes()[k].inputs) {
      if (v < 0) continue;
      const Node* p = g.producer(v);
      const bool crosses = p != nullptr && p->rank != g.nodes()[k].rank;
      out += fmt::format("  {} -> n{} [label={}{}];\n", source(v), k, quoted(edge_label(g.value(v))),
                         crosses ? ", color=\"#cc0000\", penwidth=2" : "");
    }
  }
  for (const auto& [name, v] : g.outputs()) {
    out += fmt::format("  out_{} [shape=plaintext, label={}];\n  {} -> out_{};\n", v, quoted(name), source(v), v);
  }
  return out + "}\n";
}

}  // namespace braid::graph
