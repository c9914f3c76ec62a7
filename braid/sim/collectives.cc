// The public collectives, the chooser, and the all-reduces built from the
// others (hierarchical) or with no messages of braid's own (shared memory);
// the direct star and the pairwise all-to-all, which are a loop each.
#include "braid/sim/collectives.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "braid/base/error.h"
#include "braid/comm/cost_model.h"
#include "braid/sim/collective_moves.h"

namespace braid::sim {

// ---- Moves -------------------------------------------------------------------

namespace {
constexpr size_t kMaxAfter = 4;  // a rank's After beyond this becomes a join
}  // namespace

Moves::Moves(Simulator& sim, std::vector<int> group, const CollectiveArgs& args, std::string name)
    : sim_(sim),
      group_(std::move(group)),
      args_(args),
      name_(std::move(name)),
      gamma_(args.reduce ? sim.cluster().intra.gamma : 0.0) {}

TaskId Moves::send(int i, int j, double bytes, const After& after, const std::string& name) {
  After deps = after;
  TaskId& last = channel_.try_emplace(int64_t{i} * size() + j, -1).first->second;
  if (last >= 0 && std::find(deps.begin(), deps.end(), last) == deps.end()) deps.push_back(last);
  return last = sim_.transfer(group_[i], group_[j], bytes, std::move(deps), {"net", name});
}

After Moves::reduce(int i, double bytes, After at, const std::string& name) {
  if (gamma_ == 0) return at;
  return {sim_.compute(group_[i], bytes * gamma_, std::move(at), {"comm", name}, args_.stream)};
}

void Moves::wait(After& at, TaskId t) const {
  if (std::find(at.begin(), at.end(), t) != at.end()) return;
  at.push_back(t);
  if (at.size() > kMaxAfter) at = {sim_.join(std::move(at), {"join", name_})};
}

TaskId Moves::done(const After& at) const { return at.size() == 1 ? at[0] : sim_.join(at, {"join", name_}); }

// ---- direct and pairwise -------------------------------------------------------

// direct.cc: every rank sends its vector to rank 0, which adds them in rank
// order as they arrive and sends the sum back to each. The p-1 messages each
// way share rank 0's link: 2 alpha + 2 (p-1) n beta on idealised links (the
// latencies overlap; comm/cost_model.cc counts 2 (p-1) of them).
std::vector<After> direct_allreduce(Moves& m, std::vector<After> at) {
  const int p = m.size();
  if (p == 1) return at;
  const std::string up = m.name("up"), down = m.name("down");
  std::vector<TaskId> sent(p);
  for (int i = 1; i < p; ++i) sent[i] = m.send(i, 0, m.bytes(), at[i], up);
  for (int i = 1; i < p; ++i) {
    m.wait(at[0], sent[i]);
    at[0] = m.reduce(0, m.bytes(), std::move(at[0]), up);
  }
  const After reduced = at[0];
  for (int i = 1; i < p; ++i) {
    const TaskId back = m.send(0, i, m.bytes(), reduced, down);
    m.wait(at[0], back);
    at[i] = {sent[i], back};
  }
  return at;
}

// direct.cc: in round k each rank sends its block for rank + k and receives
// the one from rank - k (n/p bytes each way): (p-1) (alpha + n/p beta).
std::vector<After> pairwise_alltoall(Moves& m, std::vector<After> at) {
  const int p = m.size();
  const double block = m.bytes() / p;
  std::vector<TaskId> sent(p);
  for (int k = 1; k < p; ++k) {
    const std::string name = m.name(fmt::format("round {}", k));
    for (int i = 0; i < p; ++i) sent[i] = m.send(i, (i + k) % p, block, at[i], name);
    for (int i = 0; i < p; ++i) at[i] = {sent[i], sent[(i - k + p) % p]};
  }
  return at;
}

// ---- checks and entry points -----------------------------------------------------

namespace {

int hosts_spanned(const Cluster& c, const std::vector<int>& group) {
  std::vector<int> hosts;
  for (int r : group) hosts.push_back(c.host_of(r));
  std::sort(hosts.begin(), hosts.end());
  return static_cast<int>(std::unique(hosts.begin(), hosts.end()) - hosts.begin());
}

void check(const Simulator& sim, const CollectiveArgs& a, const char* op) {
  const int ranks = sim.cluster().ranks;
  if (a.group.empty()) fail<ValueError>("braid sim: {} \"{}\" over an empty group", op, a.name);
  std::vector<int> sorted = a.group;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0 || sorted.back() >= ranks) {
    fail<ValueError>("braid sim: {} \"{}\" over ranks {} of {}", op, a.name, fmt::join(a.group, ","), ranks);
  }
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    fail<ValueError>("braid sim: {} \"{}\" lists a rank twice ({})", op, a.name, fmt::join(a.group, ","));
  }
  if (!std::isfinite(a.bytes) || a.bytes < 0) fail<ValueError>("braid sim: {} \"{}\" of {} bytes", op, a.name, a.bytes);
  if (!a.ready.empty() && a.ready.size() != a.group.size()) {
    fail<ValueError>("braid sim: {} \"{}\": {} ready tasks for {} ranks", op, a.name, a.ready.size(), a.group.size());
  }
}

void check_root(const CollectiveArgs& a, int root, const char* op) {
  if (root < 0 || root >= static_cast<int>(a.group.size())) {
    fail<ValueError>("braid sim: {} \"{}\" from root {} of a group of {}", op, a.name, root, a.group.size());
  }
}

std::vector<After> inputs(const CollectiveArgs& a) {
  std::vector<After> in(a.group.size());
  if (!a.ready.empty())
    for (size_t i = 0; i < in.size(); ++i) in[i] = {a.ready[i]};
  return in;
}

std::vector<TaskId> finish(const Moves& m, const std::vector<After>& out) {
  std::vector<TaskId> ids;
  ids.reserve(out.size());
  for (const After& a : out) ids.push_back(m.done(a));
  return ids;
}

std::vector<After> run_allreduce(Moves& m, comm::Algorithm a, std::vector<After> in);

// communicator_split.cc: reduce to each host's first rank (binomial), an
// all-reduce among those leaders (the algorithm their communicator picks),
// then a binomial broadcast inside each host. With one host, or one rank per
// host, a ring instead.
std::vector<After> hierarchical_allreduce(Moves& m, std::vector<After> in) {
  const Cluster& c = m.sim().cluster();
  const int p = m.size();
  std::vector<std::vector<int>> local;  // group ranks per host, hosts in order of first member
  std::vector<int> host_index;
  for (int i = 0; i < p; ++i) {
    const int h = c.host_of(m.group()[i]);
    auto it = std::find(host_index.begin(), host_index.end(), h);
    if (it == host_index.end()) {
      host_index.push_back(h);
      local.emplace_back();
      it = host_index.end() - 1;
    }
    local[it - host_index.begin()].push_back(i);
  }
  const int hosts = static_cast<int>(local.size());
  if (hosts == 1 || hosts == p) return ring_allreduce(m, std::move(in));

  auto world = [&](const std::vector<int>& members) {
    std::vector<int> w;
    for (int i : members) w.push_back(m.group()[i]);
    return w;
  };
  std::vector<After> out(p);
  std::vector<int> leaders;
  std::vector<After> leader_in;
  for (const std::vector<int>& members : local) {
    Moves sub(m.sim(), world(members), m.args(), m.name("intra reduce"));
    std::vector<After> sub_in;
    for (int i : members) sub_in.push_back(std::move(in[i]));
    std::vector<After> reduced = binomial_reduce(sub, std::move(sub_in), 0);
    for (size_t k = 0; k < members.size(); ++k) out[members[k]] = std::move(reduced[k]);
    leaders.push_back(members[0]);
    leader_in.push_back(out[members[0]]);
  }
  const comm::Algorithm between =
      comm::choose_allreduce(hosts, static_cast<size_t>(m.bytes()), c.intra, c.inter, hosts);
  Moves lead(m.sim(), world(leaders), m.args(), m.name(fmt::format("leaders {}", comm::name(between))));
  std::vector<After> summed = run_allreduce(lead, between, std::move(leader_in));
  for (int h = 0; h < hosts; ++h) out[leaders[h]] = std::move(summed[h]);
  for (const std::vector<int>& members : local) {
    Moves sub(m.sim(), world(members), m.args(), m.name("intra broadcast"));
    std::vector<After> sub_in;
    for (int i : members) sub_in.push_back(std::move(out[i]));
    std::vector<After> got = binomial_broadcast(sub, std::move(sub_in), 0);
    for (size_t k = 0; k < members.size(); ++k) out[members[k]] = std::move(got[k]);
  }
  return out;
}

// shared_memory.cc, as memory copies at the in-host bandwidth made by each
// rank's own communication thread (compute on args.stream, so the copies
// share the host's cores with the training threads, as they do; alpha
// stands for the arena's synchronisation):
// each rank copies its n bytes into its slot; once all have, each reduces
// its 1/p of the vector over the p-1 other slots ((p-1)/p n gamma); once
// all have, each copies the n bytes of the result out. One chunk: braid
// repeats this per arena chunk, two cache-line synchronisations (~1 us)
// each, which are left out. 2 (alpha + n beta) + (p-1)/p n gamma.
std::vector<After> shared_memory_allreduce(Moves& m, std::vector<After> at) {
  const int p = m.size();
  if (const int hosts = hosts_spanned(m.sim().cluster(), m.group()); hosts > 1) {
    fail<ValueError>("braid sim: the shared_memory all-reduce \"{}\" needs every rank on one host; its group spans {}",
                     m.args().name, hosts);
  }
  const std::string in = m.name("copy in"), reduce = m.name("reduce"), out = m.name("copy out");
  const comm::LinkCost& link = m.sim().cluster().intra;
  const double copy = link.alpha + m.bytes() * link.beta;
  auto copy_task = [&](int i, std::vector<TaskId> after, const std::string& name) {
    return m.sim().compute(m.group()[static_cast<size_t>(i)], copy, std::move(after), {"comm", name}, m.args().stream);
  };
  After copied;
  for (int i = 0; i < p; ++i) copied.push_back(copy_task(i, {m.done(at[i])}, in));
  const TaskId all_in = m.sim().join(copied, {"join", in});
  After reduced;
  for (int i = 0; i < p; ++i) {
    const After mine = m.reduce(i, m.bytes() * (p - 1) / p, {all_in}, reduce);
    reduced.insert(reduced.end(), mine.begin(), mine.end());
  }
  const TaskId all_reduced = m.sim().join(reduced, {"join", reduce});
  for (int i = 0; i < p; ++i) at[i] = {copy_task(i, {all_reduced}, out)};
  return at;
}

std::vector<After> run_allreduce(Moves& m, comm::Algorithm a, std::vector<After> in) {
  switch (a) {
    case comm::Algorithm::ring: return ring_allreduce(m, std::move(in));
    case comm::Algorithm::recursive_doubling: return recursive_doubling_allreduce(m, std::move(in));
    case comm::Algorithm::halving_doubling: return halving_doubling_allreduce(m, std::move(in));
    case comm::Algorithm::binary_tree: return binary_tree_allreduce(m, std::move(in));
    case comm::Algorithm::double_binary_tree: return double_binary_tree_allreduce(m, std::move(in));
    case comm::Algorithm::binary_blocks: return binary_blocks_allreduce(m, std::move(in));
    case comm::Algorithm::direct: return direct_allreduce(m, std::move(in));
    case comm::Algorithm::hierarchical: return hierarchical_allreduce(m, std::move(in));
    case comm::Algorithm::shared_memory: return shared_memory_allreduce(m, std::move(in));
    case comm::Algorithm::automatic:
      return run_allreduce(m, choose_allreduce(m.sim().cluster(), m.group(), m.bytes()), std::move(in));
  }
  fail<ValueError>("braid sim: all-reduce \"{}\": algorithm {}?", m.args().name, static_cast<int>(a));
}

}  // namespace

comm::Algorithm choose_allreduce(const Cluster& cluster, const std::vector<int>& group, double bytes) {
  if (cluster.shared_memory && group.size() > 1 && hosts_spanned(cluster, group) == 1) {
    return comm::Algorithm::shared_memory;
  }
  return comm::choose_allreduce(static_cast<int>(group.size()), static_cast<size_t>(bytes), cluster.intra,
                                cluster.inter, hosts_spanned(cluster, group));
}

std::vector<TaskId> allreduce(Simulator& sim, const CollectiveArgs& args, comm::Algorithm algorithm) {
  check(sim, args, "allreduce");
  if (algorithm == comm::Algorithm::automatic) algorithm = choose_allreduce(sim.cluster(), args.group, args.bytes);
  Moves m(sim, args.group, args, fmt::format("{} {}", args.name, comm::name(algorithm)));
  return finish(m, run_allreduce(m, algorithm, inputs(args)));
}

std::vector<TaskId> reduce_scatter(Simulator& sim, const CollectiveArgs& args) {
  check(sim, args, "reduce_scatter");
  Moves m(sim, args.group, args, args.name);
  return finish(m, ring_reduce_scatter(m, inputs(args)));
}

std::vector<TaskId> allgather(Simulator& sim, const CollectiveArgs& args) {
  check(sim, args, "allgather");
  Moves m(sim, args.group, args, args.name);
  return finish(m, ring_allgather(m, inputs(args)));
}

std::vector<TaskId> broadcast(Simulator& sim, const CollectiveArgs& args, int root) {
  check(sim, args, "broadcast");
  check_root(args, root, "broadcast");
  Moves m(sim, args.group, args, args.name);
  return finish(m, binomial_broadcast(m, inputs(args), root));
}

std::vector<TaskId> reduce(Simulator& sim, const CollectiveArgs& args, int root) {
  check(sim, args, "reduce");
  check_root(args, root, "reduce");
  Moves m(sim, args.group, args, args.name);
  return finish(m, binomial_reduce(m, inputs(args), root));
}

std::vector<TaskId> alltoall(Simulator& sim, const CollectiveArgs& args) {
  check(sim, args, "alltoall");
  Moves m(sim, args.group, args, args.name);
  return finish(m, pairwise_alltoall(m, inputs(args)));
}

}  // namespace braid::sim
