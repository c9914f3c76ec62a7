// `braid launch`: torchrun-like. Runs N ranks of a program on this node with
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
// BRAID_TOKEN set; node 0 also hosts the rendezvous Store. When a rank fails
// the others are stopped, a summary names the rank that failed first, and the
// whole group is restarted up to --max-restarts times (BRAID_RESTART tells the
// ranks which attempt they are in, and namespaces their store keys).
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/comm/store/server.h"
#include "tools/braid/commands.h"
#include "tools/braid/launch_group.h"

namespace braid::cli {

namespace {

struct LaunchOptions {
  int nproc = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int max_restarts = 0;
  double stop_grace_s = 3.0;
  std::vector<std::string> program;
};

int launch(const LaunchOptions& o) {
  if (o.program.empty()) fail<ConfigError>("braid launch: no program given (braid launch -n 2 -- PROGRAM ARGS)");
  if (o.nproc < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes)
    fail<ConfigError>("braid launch: need -n >= 1, --nnodes >= 1 and 0 <= --node-rank < --nnodes");
  std::string token;
  if (const char* t = std::getenv("BRAID_TOKEN"); t && *t) {
    token = t;
  } else if (o.nnodes > 1) {
    fail<ConfigError>("braid launch: with --nnodes > 1 set BRAID_TOKEN to the same secret on every node");
  } else {
    std::array<std::byte, 16> raw;
    random_bytes(raw);
    token = to_hex(raw);
  }
  if (o.nnodes > 1 && o.master_port == 0)
    fail<ConfigError>("braid launch: with --nnodes > 1 give --master-addr and --master-port");

  // Node 0 serves the store: on loopback for one node, on the master address
  // (which must be this host's) for several.
  std::unique_ptr<comm::StoreServer> server;
  int port = o.master_port;
  if (o.node_rank == 0) {
    server = std::make_unique<comm::StoreServer>(comm::StoreServerOptions{
        .host = o.nnodes > 1 ? o.master_addr : "127.0.0.1", .port = o.master_port, .token = token});
    port = server->port();
  }

  GroupSpec spec;
  spec.argv = o.program;
  spec.nproc = o.nproc;
  spec.world_size = o.nproc * o.nnodes;
  spec.first_rank = o.node_rank * o.nproc;
  spec.node_rank = o.node_rank;
  spec.stop_grace = std::chrono::milliseconds(static_cast<int64_t>(o.stop_grace_s * 1000));
  for (int attempt = 0;; ++attempt) {
    spec.env = {{"MASTER_ADDR", o.nnodes > 1 ? o.master_addr : "127.0.0.1"},
                {"MASTER_PORT", std::to_string(port)},
                {"BRAID_TOKEN", token},
                {"BRAID_RESTART", std::to_string(attempt)}};
    GroupResult r = run_group(spec);
    if (r.ok) return 0;
    std::fprintf(stderr, "%s\n", describe_failure(r).c_str());
    if (r.interrupted || attempt >= o.max_restarts) return r.exit_code == 0 ? 1 : r.exit_code;
    std::fprintf(stderr, "braid launch: restarting the group (restart %d of %d)\n", attempt + 1,
                 o.max_restarts);
  }
}

}  // namespace

void add_launch(CLI::App& app) {
  auto opts = std::make_shared<LaunchOptions>();
  auto* cmd = app.add_subcommand("launch", "Run N ranks of a program (like torchrun)");
  cmd->add_option("-n,--nproc-per-node", opts->nproc, "Ranks on this node")->required();
  cmd->add_option("--nnodes", opts->nnodes, "Nodes in the job");
  cmd->add_option("--node-rank", opts->node_rank, "This node's index (0 hosts the store)");
  cmd->add_option("--master-addr", opts->master_addr, "Address of node 0 (store host)");
  cmd->add_option("--master-port", opts->master_port, "Store port (0: any free port, one node only)");
  cmd->add_option("--max-restarts", opts->max_restarts, "Restart the whole group this many times on failure");
  cmd->add_option("--stop-grace", opts->stop_grace_s, "Seconds between SIGTERM and SIGKILL when stopping ranks");
  cmd->add_option("program", opts->program, "PROGRAM ARGS (after --)")->required();
  cmd->callback([opts] { exit_code = launch(*opts); });
}

}  // namespace braid::cli
