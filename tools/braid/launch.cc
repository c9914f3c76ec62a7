// `braid launch`: torchrun-like. Runs N ranks of a program on this node with
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
// BRAID_TOKEN set; node 0 also hosts the rendezvous Store. When a rank fails
// the others are stopped, a summary names the rank that failed first, and the
// whole group is restarted up to --max-restarts times (BRAID_RESTART tells the
// ranks which attempt they are in, and namespaces their store keys).
//
// Parameter-server jobs (--servers S --workers W, launch_ps.h): servers run
// the server program (default: this binary's `ps server`), workers PROGRAM;
// with --nnodes each node gives its own counts. A failed worker is reported
// and the rest go on (the servers decide whether training can); a failed
// server stops and restarts this node's group as above. The job succeeds when
// every server and worker 0 succeed.
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/comm/store/server.h"
#include "braid/comm/store/store.h"
#include "tools/braid/commands.h"
#include "tools/braid/launch_group.h"
#include "tools/braid/launch_ps.h"

namespace braid::cli {

namespace {

struct LaunchOptions {
  int nproc = 1;
  bool nproc_given = false;
  int servers = 0;  // parameter-server job when servers or workers given
  int workers = 0;
  bool ps = false;
  std::string server_program;  // "": this binary's `ps server`
  std::vector<std::string> server_args;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int max_restarts = 0;
  int replace = 0;
  double stop_grace_s = 3.0;
  double finish_grace_s = 300.0;
  std::vector<std::string> program;
};

void check_ps_options(const LaunchOptions& o) {
  if (o.ps && o.nproc_given)
    fail<ConfigError>("braid launch: give either -n (all ranks run PROGRAM) or --servers and --workers "
                      "(a parameter-server job), not both");
  if (!o.ps && !o.nproc_given)
    fail<ConfigError>("braid launch: give -n N (N ranks of PROGRAM) or --servers S --workers W "
                      "(a parameter-server job)");
  if (!o.ps && (!o.server_program.empty() || !o.server_args.empty()))
    fail<ConfigError>("braid launch: --server-program and --server-arg need --servers and --workers");
  if (o.ps && o.nnodes == 1 && (o.servers < 1 || o.workers < 1))
    fail<ConfigError>("braid launch: a parameter-server job needs --servers >= 1 and --workers >= 1 (got {} and {})",
                      o.servers, o.workers);
  if (o.ps && o.nnodes > 1 && (o.servers < 0 || o.workers < 0 || o.servers + o.workers < 1))
    fail<ConfigError>("braid launch: node {} needs --servers >= 0 and --workers >= 0, at least one rank (got {} and {})",
                      o.node_rank, o.servers, o.workers);
}

// `mpirun -n 2 braid launch -n 4 -- prog` would start two unrelated groups of
// four ranks, each with its own store, both writing the same output: refuse
// at once. One launcher per node (--nnodes) is fine. (Slurm is not checked:
// a batch script's own environment carries the allocation's SLURM_NTASKS, and
// running braid launch there, once, is the normal use.)
void check_not_one_of_many(const LaunchOptions& o) {
  const char* v = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!v || std::atoi(v) <= 1 || o.nnodes > 1) return;
  fail<ConfigError>("braid launch: running as one of {} mpirun ranks, each would start its own group of ranks; "
                    "run the program directly under mpirun (braid reads its rank variables: mpirun -n N PROGRAM), "
                    "or start one braid launch per node with --nnodes and --node-rank",
                    v);
}

int launch(const LaunchOptions& o) {
  if (o.program.empty()) fail<ConfigError>("braid launch: no program given (braid launch -n 2 -- PROGRAM ARGS)");
  check_ps_options(o);
  check_not_one_of_many(o);
  const int nproc = o.ps ? o.servers + o.workers : o.nproc;
  if (nproc < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes)
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
  spec.nproc = nproc;
  spec.world_size = nproc * o.nnodes;
  spec.first_rank = o.node_rank * nproc;
  PsLayout layout;
  if (o.ps) {
    if (o.nnodes == 1) {
      layout = single_node_layout(o.servers, o.workers);
    } else {
      comm::Store store({.host = o.master_addr, .port = port, .token = token,
                         .who = fmt::format("braid launch (node {})", o.node_rank)});
      layout = exchange_layout(store, o.node_rank, o.nnodes, o.servers, o.workers);
    }
    add_ps_ranks(layout, {.server_program = o.server_program, .server_args = o.server_args}, spec);
    spec.drain = o.nnodes == 1;
  }
  spec.node_rank = o.node_rank;
  spec.stop_grace = std::chrono::milliseconds(static_cast<int64_t>(o.stop_grace_s * 1000));
  spec.finish_grace = std::chrono::milliseconds(static_cast<int64_t>(o.finish_grace_s * 1000));
  spec.replacements = o.replace;
  for (int attempt = 0;; ++attempt) {
    spec.env = {{"MASTER_ADDR", o.nnodes > 1 ? o.master_addr : "127.0.0.1"},
                {"MASTER_PORT", std::to_string(port)},
                {"BRAID_TOKEN", token},
                {"BRAID_RESTART", std::to_string(attempt)}};
    GroupResult r = run_group(spec);
    if (r.ok) {
      if (const std::string named = describe_stragglers(r); !named.empty()) std::fprintf(stderr, "%s\n", named.c_str() + 1);
      return o.ps ? finish_ps(layout, spec, r) : 0;
    }
    std::fprintf(stderr, "%s\n", describe_failure(r).c_str());
    if (r.interrupted || attempt >= o.max_restarts) return r.exit_code == 0 ? 1 : r.exit_code;
    std::fprintf(stderr, "braid launch: restarting the group (restart %d of %d)\n", attempt + 1,
                 o.max_restarts);
  }
}

}  // namespace

std::string self_exe() {
  std::array<char, 4096> buf{};
  ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) fail<IoError>("braid launch: readlink /proc/self/exe: {}", std::strerror(errno));
  return std::string(buf.data(), static_cast<size_t>(n));
}

void add_launch(CLI::App& app) {
  auto opts = std::make_shared<LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch", "Run N ranks of a program (like torchrun), or a parameter-server job (--servers/--workers)");
  auto* nproc = cmd->add_option("-n,--nproc-per-node", opts->nproc, "Ranks on this node (plain jobs)");
  auto* servers = cmd->add_option("--servers", opts->servers,
                                  "Parameter-server job: servers on this node; the job's servers, node by node, are its first "
                                  "ranks");
  auto* workers = cmd->add_option("--workers", opts->workers,
                                  "Parameter-server job: workers (PROGRAM) on this node, numbered after every server; a failed "
                                  "worker does not stop the job, a failed server does");
  cmd->add_option("--server-program", opts->server_program,
                  "Executable the servers run (default: this braid binary, as `braid ps server`)");
  // One value per occurrence, appended as parsed: a vector option would also
  // swallow the `--` before PROGRAM (CLI11 2.1).
  cmd->add_option_function<std::string>(
         "--server-arg", [opts](const std::string& a) { opts->server_args.push_back(a); },
         "One more argument for the server program (repeatable, taken as is: --server-arg -c)")
      ->trigger_on_parse()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--nnodes", opts->nnodes, "Nodes in the job");
  cmd->add_option("--node-rank", opts->node_rank, "This node's index (0 hosts the store)");
  cmd->add_option("--master-addr", opts->master_addr, "Address of node 0 (store host)");
  cmd->add_option("--master-port", opts->master_port, "Store port (0: any free port, one node only)");
  cmd->add_option("--max-restarts", opts->max_restarts, "Restart the whole group this many times on failure (parameter-server jobs: when a server fails)");
  cmd->add_option("--replace", opts->replace,
                  "Start a failed rank again as a joining replica, this many times in all, while the others go on "
                  "(braid train with parallel.fault_tolerance = replica)");
  cmd->add_option("--stop-grace", opts->stop_grace_s,
                  "Seconds between SIGTERM and SIGKILL when stopping ranks; in a parameter-server job also how "
                  "long the servers may run on after the last worker ended before they get SIGTERM");
  cmd->add_option("--finish-grace", opts->finish_grace_s,
                  "Seconds a rank may run on once every other rank exited 0; then it is named and stopped, and "
                  "the job fails (parameter-server workers get --stop-grace once every server ended)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("program", opts->program, "PROGRAM ARGS (after --)")->required();
  cmd->callback([opts, nproc, servers, workers] {
    opts->nproc_given = nproc->count() > 0;
    opts->ps = servers->count() > 0 || workers->count() > 0;
    exit_code = launch(*opts);
  });
}

}  // namespace braid::cli
