#include "braid/comm/env.h"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "braid/base/error.h"
#include "braid/comm/slurm.h"
#include "braid/comm/transport/tcp.h"

namespace braid::comm {

namespace {

const char* get(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int get_int(const char* name, int fallback) {
  const char* v = get(name);
  if (!v) return fallback;
  int out = 0;
  std::string_view s(v);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || p != s.data() + s.size())
    fail<ConfigError>("environment variable {}='{}' is not an integer", name, v);
  return out;
}

// The first of several spellings Slurm versions use (SLURM_JOB_ID, SLURM_JOBID).
const char* first_of(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = get(n)) return v;
  return nullptr;
}

// RANK/WORLD_SIZE beside mpirun's own variables: fine when they agree (a
// wrapper script copied them), a fast error when mpirun started several ranks
// and they do not, because ranks that disagree on who they are would wait
// for each other until a timeout. (One mpirun rank running `braid launch -n
// N` hands its children RANK/WORLD_SIZE of their own: those win.)
void check_against_mpirun(Env& e) {
  if (!get("OMPI_COMM_WORLD_RANK")) return;
  const int mpi_rank = get_int("OMPI_COMM_WORLD_RANK", 0), mpi_size = get_int("OMPI_COMM_WORLD_SIZE", 1);
  if (mpi_size == 1 && e.size > 1) return;
  if (mpi_rank == e.rank && mpi_size == e.size) {
    e.source = "mpirun";  // nobody else serves a store: bootstrap over MPI
    return;
  }
  fail<ConfigError>("RANK={} WORLD_SIZE={} contradict mpirun's OMPI_COMM_WORLD_RANK={} OMPI_COMM_WORLD_SIZE={}: "
                    "unset RANK and WORLD_SIZE when running under mpirun (mpirun numbers the ranks), and do "
                    "not run `braid launch` as several mpirun ranks",
                    e.rank, e.size, mpi_rank, mpi_size);
}

// Slurm: ranks on this node from SLURM_STEP_TASKS_PER_NODE ("2(x3),1") at
// SLURM_NODEID; the store on the step's first host (loopback when the step
// has one host), a port and a token derived from the step's identity.
void read_slurm(Env& e) {
  const char* list = first_of({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  const std::vector<std::string> hosts = list ? expand_hostlist(list) : std::vector<std::string>{};
  if (const char* tpn = first_of({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})) {
    const std::vector<int> per_node = expand_tasks_per_node(tpn);
    const int node = get_int("SLURM_NODEID", 0);
    if (node < 0 || node >= static_cast<int>(per_node.size()))
      fail<ConfigError>("SLURM_NODEID={} is outside the {} nodes of tasks per node '{}'", node, per_node.size(),
                        tpn);
    e.local_size = per_node[node];
  } else {
    e.local_size = get_int("SLURM_NTASKS_PER_NODE", hosts.size() == 1 ? e.size : 1);
  }
  if (e.size == 1) return;
  const char* job = first_of({"SLURM_JOB_ID", "SLURM_JOBID"});
  const char* step = first_of({"SLURM_STEP_ID", "SLURM_STEPID"});
  // Without a host list or a job id there is nothing to derive from: the
  // defaults stay, and joining says what to set (bootstrap.h).
  if (!e.master_addr_given && !hosts.empty()) e.master_addr = hosts.size() == 1 ? "127.0.0.1" : hosts[0];
  if (!e.master_port_given && job) e.master_port = derived_port(job, step ? step : "");
  if (!e.token_given && job) e.token = derived_token(job, step ? step : "", ::getuid());
}

}  // namespace

Env read_env() {
  Env e;
  if (get("RANK") || get("WORLD_SIZE")) {
    e.source = "launch";
    e.rank = get_int("RANK", 0);
    e.size = get_int("WORLD_SIZE", 1);
    e.local_rank = get_int("LOCAL_RANK", e.rank);
    e.local_size = get_int("LOCAL_WORLD_SIZE", e.size);
    check_against_mpirun(e);
  } else if (get("OMPI_COMM_WORLD_RANK")) {
    e.source = "mpirun";
    e.rank = get_int("OMPI_COMM_WORLD_RANK", 0);
    e.size = get_int("OMPI_COMM_WORLD_SIZE", 1);
    e.local_rank = get_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    e.local_size = get_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (get("SLURM_PROCID")) {
    e.source = "slurm";
    e.rank = get_int("SLURM_PROCID", 0);
    e.size = get_int(get("SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS", 1);
    e.local_rank = get_int("SLURM_LOCALID", 0);
  }
  if (e.size < 1) fail<ConfigError>("world size {} < 1 (from {})", e.size, e.source);
  if (e.rank < 0 || e.rank >= e.size)
    fail<ConfigError>("rank {} is outside world size {} (from {})", e.rank, e.size, e.source);
  if (const char* a = get("MASTER_ADDR")) e.master_addr = a, e.master_addr_given = true;
  e.master_port_given = get("MASTER_PORT") != nullptr;
  e.master_port = get_int("MASTER_PORT", e.master_port);
  if (e.master_port <= 0 || e.master_port > 65535)
    fail<ConfigError>("MASTER_PORT={} is not a TCP port", e.master_port);
  if (const char* t = get("BRAID_TOKEN")) e.token = t, e.token_given = true;
  if (const char* h = get("BRAID_HOST")) e.host = h, e.host_given = true;
  if (e.source == "slurm") read_slurm(e);
  e.tcp_streams = get_int("BRAID_TCP_STREAMS", 1);
  if (e.tcp_streams < 1 || e.tcp_streams > kMaxTcpStreams)
    fail<ConfigError>("BRAID_TCP_STREAMS={} is outside 1..{} (tcp connections per peer)", e.tcp_streams,
                      kMaxTcpStreams);
  e.restart = get_int("BRAID_RESTART", 0);
  e.ps_servers = get_int("BRAID_PS_SERVERS", 0);
  if (e.ps_servers < 0 || (e.ps_servers > 0 && e.ps_servers >= e.size))
    fail<ConfigError>("BRAID_PS_SERVERS={} leaves no worker in a world of {} ranks", e.ps_servers, e.size);
  return e;
}

StoreOptions store_options(const Env& env) {
  return {.host = env.master_addr, .port = env.master_port, .token = env.token,
          .who = fmt::format("rank {}", env.rank)};
}

TransportOptions transport_options(const Env& env) {
  return {.rank = env.rank, .size = env.size, .token = env.token,
          .prefix = fmt::format("braid/restart{}", env.restart), .host = env.host,
          .tcp_streams = env.tcp_streams};
}

}  // namespace braid::comm
