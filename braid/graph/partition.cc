#include "braid/graph/partition.h"

#include <algorithm>
#include <map>
#include <set>

#include "braid/graph/executor.h"

namespace braid::graph {

namespace {

// The communicator a send or recv kernel talks through: the one of the
// partition this thread is running.
struct Channel {
  comm::Communicator* comm = nullptr;
  std::vector<comm::Work> pending;  // sends, waited for at the end of the run
  std::vector<Tensor> in_flight;    // what they read, kept alive until then
};
thread_local Channel* t_channel = nullptr;

Channel& channel(const char* op) {
  if (t_channel == nullptr) fail<ValueError>("{}: runs only inside run_partition (no communicator on this thread)", op);
  return *t_channel;
}

const op::OpDef& send_op() {
  static const op::OpDef& d = op::define({
      .name = "send", .family = "comm", .inputs = 1, .outputs = 0, .effect = op::Effect::io,
      .infer = [](std::span<const op::TensorMeta>, const op::Attrs&) { return std::vector<op::TensorMeta>{}; },
      .kernels = {{Device::cpu, {}, [](const op::Args& a) {
        Channel& c = channel("send");
        const Tensor t = a.inputs[0].contiguous();
        c.in_flight.push_back(t);
        c.pending.push_back(c.comm->send({t.raw_data(), static_cast<size_t>(t.numel()), t.dtype()},
                                         static_cast<int>(a.attrs.i("peer")), {static_cast<uint64_t>(a.attrs.i("tag"))}));
        return std::vector<Tensor>{};
      }}},
      .cost = [](std::span<const op::TensorMeta> in, std::span<const op::TensorMeta>, const op::Attrs&) {
        return op::Cost{0, static_cast<double>(numel(in[0].shape) * static_cast<int64_t>(itemsize(in[0].dtype))), 1};
      }});
  return d;
}

const op::OpDef& recv_op() {
  static const op::OpDef& d = op::define({
      .name = "recv", .family = "comm", .inputs = 0, .outputs = 1, .effect = op::Effect::io,
      .infer = [](std::span<const op::TensorMeta>, const op::Attrs& a) {
        return std::vector<op::TensorMeta>{{a.ints("shape"), static_cast<DType>(a.i("dtype"))}};
      },
      .kernels = {{Device::cpu, {}, [](const op::Args& a) {
        Channel& c = channel("recv");
        Tensor t = Tensor::empty(a.attrs.ints("shape"), static_cast<DType>(a.attrs.i("dtype")));
        c.comm->recv({t.raw_data(), static_cast<size_t>(t.numel()), t.dtype()}, static_cast<int>(a.attrs.i("peer")),
                     {static_cast<uint64_t>(a.attrs.i("tag"))})
            .wait(Deadline::after(c.comm->options().timeout));
        return std::vector<Tensor>{t};
      }}},
      .cost = [](std::span<const op::TensorMeta>, std::span<const op::TensorMeta> out, const op::Attrs&) {
        return op::Cost{0, static_cast<double>(numel(out[0].shape) * static_cast<int64_t>(itemsize(out[0].dtype))), 1};
      }});
  return d;
}

// The value a chain of in-place writes and views started from.
std::vector<int> roots(const Graph& g) {
  std::vector<int> root(g.values().size());
  for (size_t v = 0; v < root.size(); ++v) root[v] = static_cast<int>(v);
  for (const Node& n : g.nodes()) {
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      int source = -1;
      if (n.op->effect == op::Effect::inplace) source = n.inputs.at(static_cast<size_t>(n.op->mutates[i]));
      if (n.op->effect == op::Effect::view && i == 0) source = n.inputs.at(0);
      if (source >= 0) root[static_cast<size_t>(n.outputs[i])] = root[static_cast<size_t>(source)];
    }
  }
  return root;
}

}  // namespace

void place_state_updates(Graph& g) {
  const std::vector<int> root = roots(g);
  // The state a run updates (parameters, optimizer buffers): each lives on
  // the rank of its first reader, and every node that reads or writes it
  // moves there, so no rank ever reads a copy another rank has updated.
  std::set<int> state;
  for (const auto& [input, v] : g.updates()) state.insert(input);
  std::map<int, int> owner;
  for (const Node& n : g.nodes()) {
    for (int v : n.inputs) {
      if (v >= 0 && state.count(root[static_cast<size_t>(v)])) owner.emplace(root[static_cast<size_t>(v)], n.rank);
    }
  }
  for (Node& n : g.mutable_nodes()) {
    for (int v : n.inputs) {
      if (v < 0) continue;
      if (auto it = owner.find(root[static_cast<size_t>(v)]); it != owner.end()) {
        n.rank = it->second;
        break;
      }
    }
  }
}

void place_by_work(Graph& g, int ranks) {
  if (ranks < 1) fail<ValueError>("place_by_work: {} ranks", ranks);
  double total = 0;
  std::vector<double> work;
  for (const Node& n : g.nodes()) {
    work.push_back(op::cost_of(*n.op, input_metas(g, n), output_metas(g, n), n.attrs).flops);
    total += work.back();
  }
  double done = 0;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const int r = total > 0 ? std::min(ranks - 1, static_cast<int>(done / total * ranks)) : 0;
    g.mutable_nodes()[k].rank = r;
    done += work[k];
  }
  place_state_updates(g);
}

std::vector<RankGraph> partition(const Graph& g, int ranks) {
  const size_t nv = g.values().size();
  // Which other ranks read each result.
  std::vector<std::set<int>> readers(nv);
  for (const Node& n : g.nodes()) {
    if (n.rank < 0 || n.rank >= ranks) fail<ValueError>("partition: node {} is on rank {} of {}", n.op->name, n.rank, ranks);
    for (int v : n.inputs) {
      if (v >= 0 && g.value(v).kind == ValueKind::result) readers[static_cast<size_t>(v)].insert(n.rank);
    }
  }
  // An input updated on one rank and read on another would be stale there
  // from the second run on: refuse it.
  const std::vector<int> root = roots(g);
  for (const auto& [input, v] : g.updates()) {
    const int owner = g.producer(v)->rank;
    for (const Node& n : g.nodes()) {
      for (int u : n.inputs) {
        if (u >= 0 && root[static_cast<size_t>(u)] == input && n.rank != owner) {
          fail<ValueError>("partition: '{}' is updated on rank {} but {} reads it on rank {}; place its readers with it",
                           g.value(input).name, owner, n.op->name, n.rank);
        }
      }
    }
  }
  std::vector<RankGraph> parts(static_cast<size_t>(ranks));
  std::vector<std::vector<int>> map(static_cast<size_t>(ranks), std::vector<int>(nv, -1));
  for (int r = 0; r < ranks; ++r) {
    parts[static_cast<size_t>(r)].rank = r;
    for (int id : g.inputs()) map[static_cast<size_t>(r)][static_cast<size_t>(id)] = parts[static_cast<size_t>(r)].graph.add_input(g.value(id).name, g.value(id).meta);
  }
  auto local = [&](int r, int v) {
    if (v < 0) return -1;
    int& m = map[static_cast<size_t>(r)][static_cast<size_t>(v)];
    if (m >= 0) return m;
    RankGraph& part = parts[static_cast<size_t>(r)];
    const Value& val = g.value(v);
    if (val.kind == ValueKind::constant) {
      m = part.graph.add_constant(g.constants().at(v), val.name);
    } else {
      // Produced on another rank: received just before its first reader here.
      const int from = g.nodes()[static_cast<size_t>(val.producer)].rank;
      const int index = part.graph.add_node(recv_op(), {{"peer", int64_t{from}}, {"tag", int64_t{v}},
                                                        {"shape", val.meta.shape}, {"dtype", static_cast<int64_t>(val.meta.dtype)}},
                                            {});
      part.graph.mutable_nodes()[static_cast<size_t>(index)].rank = r;
      m = part.graph.nodes()[static_cast<size_t>(index)].outputs[0];
      ++part.recvs;
    }
    return m;
  };
  for (const Node& n : g.nodes()) {
    RankGraph& part = parts[static_cast<size_t>(n.rank)];
    std::vector<int> in;
    for (int v : n.inputs) in.push_back(local(n.rank, v));
    const int index = part.graph.add_node(*n.op, n.attrs, in);
    part.graph.mutable_nodes()[static_cast<size_t>(index)].rank = n.rank;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const int v = n.outputs[i];
      const int made = part.graph.nodes()[static_cast<size_t>(index)].outputs[i];
      map[static_cast<size_t>(n.rank)][static_cast<size_t>(v)] = made;
      // Sent as soon as it exists to every other rank that reads it.
      for (int to : readers[static_cast<size_t>(v)]) {
        if (to == n.rank) continue;
        const int s = part.graph.add_node(send_op(), {{"peer", int64_t{to}}, {"tag", int64_t{v}}}, {made});
        part.graph.mutable_nodes()[static_cast<size_t>(s)].rank = n.rank;
        ++part.sends;
        part.bytes_sent += numel(g.value(v).meta.shape) * static_cast<int64_t>(itemsize(g.value(v).meta.dtype));
      }
    }
  }
  auto owner = [&](int v) { return g.producer(v) ? g.producer(v)->rank : 0; };
  for (const auto& [name, v] : g.outputs()) {
    const int r = owner(v);
    parts[static_cast<size_t>(r)].graph.add_output(name, local(r, v));
  }
  for (const auto& [input, v] : g.updates()) {
    const int r = owner(v);
    parts[static_cast<size_t>(r)].graph.add_update(local(r, input), local(r, v));
  }
  for (RankGraph& part : parts) part.graph.validate();
  return parts;
}

std::vector<std::pair<std::string, Tensor>> run_partition(const RankGraph& part, comm::Communicator& comm,
                                                          const std::vector<Tensor>& inputs) {
  if (comm.rank() != part.rank) fail<ValueError>("run_partition: the graph is rank {}'s, the communicator is rank {}", part.rank, comm.rank());
  Channel c{&comm, {}, {}};
  t_channel = &c;
  struct Reset {
    ~Reset() { t_channel = nullptr; }
  } reset;
  Executor exec(part.graph);
  std::vector<Tensor> out = exec.run(inputs);
  comm::wait_all(c.pending, Deadline::after(comm.options().timeout));
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < out.size(); ++i) named.emplace_back(part.graph.outputs()[i].first, out[i]);
  return named;
}

}  // namespace braid::graph
