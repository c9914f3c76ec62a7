#include "braid/graph/serialize.h"

#include <fstream>
#include <sstream>

#include "braid/base/atomic_file.h"
#include "braid/base/json_number.h"

namespace braid::graph {

using nlohmann::json;

namespace {

json meta_json(const op::TensorMeta& m) { return {{"dtype", std::string(name(m.dtype))}, {"shape", m.shape}}; }

DType dtype_named(const std::string& s) {
  for (DType d : kAllDTypes) {
    if (name(d) == s) return d;
  }
  fail<ValueError>("graph file: unknown dtype '{}'", s);
}

op::TensorMeta meta_from(const json& j) { return {j.at("shape").get<Shape>(), dtype_named(j.at("dtype").get<std::string>())}; }

// Attribute values keep their type: integers, reals (always with a '.'),
// integer lists and strings are told apart by JSON's own types.
json attrs_json(const op::Attrs& attrs) {
  json out = json::array();
  for (const auto& [k, v] : attrs.items()) {
    json value;
    std::visit([&](const auto& x) { value = x; }, v);
    out.push_back({k, value});
  }
  return out;
}

op::Attrs attrs_from(const json& j) {
  op::Attrs attrs;
  for (const json& kv : j) {
    const std::string key = kv.at(0).get<std::string>();
    const json& v = kv.at(1);
    if (v.is_number_integer()) attrs.set(key, json_integer<int64_t>(v));
    else if (v.is_number_float()) attrs.set(key, v.get<double>());
    else if (v.is_array()) attrs.set(key, v.get<std::vector<int64_t>>());
    else if (v.is_string()) attrs.set(key, v.get<std::string>());
    else fail<ValueError>("graph file: attribute '{}' has an unsupported type", key);
  }
  return attrs;
}

}  // namespace

json to_json(const Graph& g) {
  json values = json::array();
  for (size_t id = 0; id < g.values().size(); ++id) {
    const Value& v = g.values()[id];
    json e = meta_json(v.meta);
    if (!v.name.empty()) e["name"] = v.name;
    if (v.kind == ValueKind::input) e["kind"] = "input";
    if (v.kind == ValueKind::constant) {
      e["kind"] = "constant";
      const Tensor& t = g.constants().at(static_cast<int>(id));
      if (!t.is_meta()) e["values"] = t.to_vector<double>();
    }
    values.push_back(std::move(e));
  }
  json nodes = json::array();
  for (const Node& n : g.nodes()) {
    json e = {{"op", n.op->name}, {"inputs", n.inputs}, {"outputs", n.outputs}};
    if (!n.attrs.items().empty()) e["attrs"] = attrs_json(n.attrs);
    if (n.rank != 0) e["rank"] = n.rank;
    nodes.push_back(std::move(e));
  }
  json outputs = json::array(), updates = json::array();
  for (const auto& [name, v] : g.outputs()) outputs.push_back({name, v});
  for (const auto& [in, v] : g.updates()) updates.push_back({in, v});
  return {{"format", "braid-graph-1"}, {"values", values}, {"nodes", nodes}, {"outputs", outputs}, {"updates", updates}};
}

Graph from_json(const json& j) {
  if (j.value("format", "") != "braid-graph-1") fail<ValueError>("graph file: not a braid graph (format braid-graph-1)");
  Graph g;
  const json& values = j.at("values");
  // Rebuild in id order: inputs and constants where they were, node results
  // as their nodes are added (add_node re-infers their shapes).
  size_t next_node = 0;
  const json& nodes = j.at("nodes");
  for (size_t id = 0; id < values.size(); ++id) {
    if (static_cast<int>(g.values().size()) > static_cast<int>(id)) continue;  // made by a node already
    const json& v = values[id];
    const std::string kind = v.value("kind", "");
    if (kind == "input") {
      g.add_input(v.at("name").get<std::string>(), meta_from(v));
    } else if (kind == "constant") {
      const op::TensorMeta m = meta_from(v);
      Tensor t = Tensor::empty(m.shape, m.dtype, v.contains("values") ? Device::cpu : Device::meta);
      if (v.contains("values")) {
        const auto data = v.at("values").get<std::vector<double>>();
        if (static_cast<int64_t>(data.size()) != t.numel()) fail<ValueError>("graph file: constant %{} has {} values for shape {}", id, data.size(), to_string(m.shape));
        t.copy_from(Tensor::from_vector<double>(data, m.shape));
      }
      g.add_constant(t, v.value("name", ""));
    } else {
      if (next_node >= nodes.size()) fail<ValueError>("graph file: value %{} has no node that makes it", id);
      const json& n = nodes[next_node];
      const op::OpDef& op = op::find(n.at("op").get<std::string>());
      const int index = g.add_node(op, n.contains("attrs") ? attrs_from(n.at("attrs")) : op::Attrs{},
                                   n.at("inputs").get<std::vector<int>>());
      const Node& made = g.nodes()[static_cast<size_t>(index)];
      if (made.outputs != n.at("outputs").get<std::vector<int>>()) {
        fail<ValueError>("graph file: node {} ({}) does not make the values the file says", next_node, op.name);
      }
      for (int out : made.outputs) {
        if (!(g.value(out).meta == meta_from(values.at(static_cast<size_t>(out))))) {
          fail<ValueError>("graph file: node {} ({}) infers {} {} for %{}, the file says otherwise", next_node, op.name,
                           name(g.value(out).meta.dtype), to_string(g.value(out).meta.shape), out);
        }
      }
      g.mutable_nodes()[static_cast<size_t>(index)].rank = json_integer_or(n, "rank", 0);
      ++next_node;
    }
  }
  for (const json& o : j.at("outputs")) g.add_output(o.at(0).get<std::string>(), json_integer<int>(o.at(1)));
  for (const json& u : j.at("updates")) g.add_update(json_integer<int>(u.at(0)), json_integer<int>(u.at(1)));
  g.validate();
  return g;
}

void save(const Graph& graph, const std::string& path) { write_file_atomic(path, to_json(graph).dump(1)); }

Graph load(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail<IoError>("graph: cannot read {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return from_json(json::parse(ss.str()));
  } catch (const json::exception& e) {
    fail<ValueError>("graph file {}: {}", path, e.what());
  }
}

}  // namespace braid::graph
