// Where a process learns its place in the job: torchrun/`braid launch`
// variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), Open MPI's OMPI_COMM_WORLD_*, or Slurm's SLURM_*, in that
// order, so one program runs unchanged under `braid launch`, `mpirun` or
// `srun`. Under Slurm the store's address, port and the token are derived
// from the step (slurm.h) unless MASTER_ADDR, MASTER_PORT or BRAID_TOKEN say
// otherwise; under mpirun rank 0 shares them over MPI (bootstrap.h). braid's
// own knobs: BRAID_TOKEN (shared secret), BRAID_HOST (address
// this rank's tcp transport listens on), BRAID_TCP_STREAMS (tcp connections
// per peer, 1..16), BRAID_RESTART (restart count, set by `braid launch`),
// BRAID_PS_SERVERS (servers in a parameter-server job).
#pragma once

#include <string>

#include "braid/comm/store/store.h"
#include "braid/comm/transport/registry.h"

namespace braid::comm {

struct Env {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string token{};
  std::string host = "127.0.0.1";
  int tcp_streams = 1;
  int restart = 0;
  // Parameter-server jobs (`braid launch --servers S`): ranks 0..S-1 are
  // servers, the rest workers. 0 in other jobs.
  int ps_servers = 0;
  // "launch" (RANK/WORLD_SIZE), "mpirun", "slurm" or "single" (nothing set).
  std::string source = "single";
  // What the environment set explicitly: these always win over what a
  // bootstrap would derive or receive from rank 0.
  bool token_given = false;
  bool master_addr_given = false;
  bool master_port_given = false;
  bool host_given = false;  // BRAID_HOST
};

// Reads the process environment; throws ConfigError naming the variable when
// a value is malformed or out of range, and when RANK/WORLD_SIZE contradict
// mpirun's own rank and size (a stale export, or a launcher under mpirun).
Env read_env();

// Store client options for this process (connects to MASTER_ADDR:MASTER_PORT).
StoreOptions store_options(const Env& env);
// Transport options for this process; store keys are namespaced by restart so
// a restarted group never reads the previous attempt's addresses.
TransportOptions transport_options(const Env& env);

}  // namespace braid::comm
