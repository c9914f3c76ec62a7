// The parameter-server side of `braid launch` (--servers S --workers W):
// which global ranks this node's servers and workers get, their programs and
// environment, and the exit code of an attempt (launch.cc runs the attempts).
//
// One node: ranks 0..S-1 are servers, S..S+W-1 workers. Several nodes (one
// launcher each, --nnodes): each node says how many servers and workers it
// runs (zero of either is fine: a node of servers only, or of workers only),
// the launchers swap those counts through the store, and the job's servers
// are numbered first, node by node, then its workers, node by node. Every
// rank sees the job's totals (WORLD_SIZE, BRAID_PS_SERVERS) and its own node's
// count (LOCAL_WORLD_SIZE), as in a plain job.
#pragma once

#include <string>

#include "tools/braid/launch_group.h"

namespace braid::comm {
class Store;
}  // namespace braid::comm

namespace braid::cli {

struct PsLayout {
  int servers = 0, workers = 0;  // the job's
  int local_servers = 0, local_workers = 0;
  int first_server = 0;  // global rank of this node's first server
  int first_worker = 0;  // ... and first worker (worker 0 of the job is rank `servers`)
};

// A one-node job's layout.
PsLayout single_node_layout(int servers, int workers);

// Publishes this node's counts under the store and waits for every node's
// (TimeoutError naming the nodes that never published). ConfigError when the
// job would have no server or no worker.
PsLayout exchange_layout(comm::Store& store, int node_rank, int nnodes, int local_servers, int local_workers);

struct PsPrograms {
  std::string server_program;  // "": this binary's `ps server`
  std::vector<std::string> server_args;
};

// Fills spec.ranks (program, environment, role, global rank per local rank)
// and spec.world_size. Workers may fail without stopping the group.
void add_ps_ranks(const PsLayout& layout, const PsPrograms& programs, GroupSpec& spec);

// Exit code of an attempt in which no server failed: 1 when the job's worker
// 0 runs here and did not succeed, or when it runs elsewhere and none of this
// node's workers succeeded; else 0.
int finish_ps(const PsLayout& layout, const GroupSpec& spec, const GroupResult& r);

}  // namespace braid::cli
