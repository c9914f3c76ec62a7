// Parameter-server jobs under `braid launch`: the layout of servers and
// workers over the nodes, and their programs (launch_ps.h).
#include "tools/braid/launch_ps.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "braid/base/error.h"
#include "braid/comm/store/rendezvous.h"
#include "braid/comm/store/store.h"
#include "tools/braid/commands.h"

namespace braid::cli {

PsLayout single_node_layout(int servers, int workers) {
  return {.servers = servers, .workers = workers, .local_servers = servers, .local_workers = workers,
          .first_server = 0, .first_worker = servers};
}

PsLayout exchange_layout(comm::Store& store, int node_rank, int nnodes, int local_servers, int local_workers) {
  std::vector<std::string> all;
  try {
    all = comm::exchange(store, "launch/ps_layout", node_rank, nnodes,
                         fmt::format("{} {}", local_servers, local_workers), store.deadline());
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("braid launch: node {} waited for the other nodes' --servers/--workers counts and some never "
                       "came (start one braid launch per node, with the same --nnodes, --master-addr, --master-port "
                       "and BRAID_TOKEN; node numbers are --node-rank): {}",
                       node_rank, e.what());
  }
  // Node 0's launcher serves the store: it waits (briefly) until every node
  // has read the counts, so that a job refused below is refused on every node
  // with the same reason rather than with a closed connection.
  store.add("launch/ps_layout_read", 1);
  if (node_rank == 0) {
    const Deadline read_by = Deadline::after(std::chrono::seconds(30));
    while (store.add("launch/ps_layout_read", 0) < nnodes && !read_by.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  PsLayout l{.local_servers = local_servers, .local_workers = local_workers};
  std::vector<std::pair<int, int>> counts;
  for (int node = 0; node < nnodes; ++node) {
    int s = -1, w = -1, used = 0;
    const bool parsed = std::sscanf(all[node].c_str(), "%d %d%n", &s, &w, &used) == 2 &&
                        static_cast<size_t>(used) == all[node].size();
    if (!parsed || s < 0 || w < 0) fail<PeerError>("braid launch: node {} published the counts '{}'", node, all[node]);
    counts.emplace_back(s, w);
    l.servers += s, l.workers += w;
  }
  if (l.servers < 1 || l.workers < 1) {
    std::vector<std::string> per_node;
    for (int node = 0; node < nnodes; ++node)
      per_node.push_back(fmt::format("node {}: {} + {}", node, counts[node].first, counts[node].second));
    fail<ConfigError>("braid launch: the job has {} servers and {} workers over its {} nodes ({}); it needs at least "
                      "one of each",
                      l.servers, l.workers, nnodes, fmt::join(per_node, ", "));
  }
  for (int node = 0; node < node_rank; ++node) l.first_server += counts[node].first;
  l.first_worker = l.servers;
  for (int node = 0; node < node_rank; ++node) l.first_worker += counts[node].second;
  return l;
}

void add_ps_ranks(const PsLayout& layout, const PsPrograms& programs, GroupSpec& spec) {
  std::vector<std::string> server_argv;
  if (programs.server_program.empty()) {
    server_argv = {self_exe(), "ps", "server"};
  } else {
    server_argv = {programs.server_program};
  }
  server_argv.insert(server_argv.end(), programs.server_args.begin(), programs.server_args.end());
  spec.nproc = layout.local_servers + layout.local_workers;
  spec.world_size = layout.servers + layout.workers;
  spec.ranks.clear();
  for (int i = 0; i < spec.nproc; ++i) {
    const bool server = i < layout.local_servers;
    spec.ranks.push_back({.argv = server ? server_argv : std::vector<std::string>{},
                          .env = {{"BRAID_PS_SERVERS", std::to_string(layout.servers)},
                                  {"BRAID_ROLE", server ? "server" : "worker"}},
                          .role = server ? "server" : "worker",
                          .may_fail = !server,
                          .rank = server ? layout.first_server + i : layout.first_worker + i - layout.local_servers});
  }
  spec.on_tolerated_failure = [](const RankFailure& f) {
    std::fprintf(stderr, "braid launch: %s rank %d %s after %.1f s; the servers decide whether training goes on%s\n",
                 f.role.c_str(), f.rank, f.how.c_str(), f.after, describe_tail(f.rank, f.tail).c_str());
    std::fflush(stderr);
  };
}

int finish_ps(const PsLayout& layout, const GroupSpec& spec, const GroupResult& r) {
  if (r.drained && r.drained_stopped)
    std::fprintf(stderr, "braid launch: ranks [%s] were stopped (SIGSTOP or a debugger) when the last worker ended; "
                 "stopped them\n", fmt::format("{}", fmt::join(r.stopped, ", ")).c_str());
  else if (r.drained)
    std::fprintf(stderr, "braid launch: ranks [%s] were still running %.1f s after the last worker ended; stopped them\n",
                 fmt::format("{}", fmt::join(r.stopped, ", ")).c_str(), spec.stop_grace.count() / 1000.0);
  if (!r.tolerated.empty())
    std::fprintf(stderr, "braid launch: training finished without workers [%s]\n",
                 fmt::format("{}", fmt::join(r.tolerated, ", ")).c_str());
  const bool worker0_here = layout.first_worker == layout.servers && layout.local_workers > 0;
  if (worker0_here) {
    if (r.exit_codes.at(static_cast<size_t>(layout.local_servers)) == 0) return 0;
    std::fprintf(stderr, "braid launch: worker 0 (rank %d) did not succeed; exiting with 1\n", layout.servers);
    return 1;
  }
  // Another node's launcher judges worker 0; this one fails only when none of
  // its own workers succeeded.
  if (layout.local_workers == 0 || r.tolerated.size() < static_cast<size_t>(layout.local_workers)) return 0;
  std::fprintf(stderr, "braid launch: no worker of this node succeeded; exiting with 1\n");
  return 1;
}

}  // namespace braid::cli
