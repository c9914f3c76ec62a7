// Joining a job from whichever launcher started this process: agree on the
// token and the rendezvous store, then build the process transport over it.
//
//   braid launch  the launcher serves the store and sets BRAID_TOKEN,
//                 MASTER_ADDR and MASTER_PORT.
//   mpirun        rank 0 makes a token (unless BRAID_TOKEN is set), serves the
//                 store on a free port (or MASTER_PORT) on loopback when every
//                 rank is on its host (else MASTER_ADDR or its BRAID_HOST), and
//                 broadcasts token, address and port over MPI. With all three
//                 variables set MPI is not needed.
//   srun          every task derives them from the step (env.h); rank 0
//                 serves the store.
// The mpi transport needs no store, so under mpirun it skips all this.
#pragma once

#include <memory>
#include <string>

#include "braid/base/deadline.h"
#include "braid/comm/env.h"
#include "braid/comm/store/server.h"
#include "braid/comm/store/store.h"
#include "braid/comm/transport/transport.h"

namespace braid::comm {

struct JoinOptions {
  // "auto" (shm when every rank is on this host, else tcp), "tcp", "shm", "mpi".
  std::string transport = "auto";
  // tcp connections per peer; 0: the environment's (BRAID_TCP_STREAMS, else 1).
  int tcp_streams = 0;
  // tcp, shm: bound on what a peer's early messages may make us buffer
  // (bytes; transport.h); 0: kDefaultMaxMessage.
  size_t max_message = 0;
  // Bound on each step of joining: the broadcast under mpirun, reaching the
  // store, and the transport's connections.
  Duration timeout = std::chrono::seconds(60);
};

// What a rank holds while it is part of the job. Declared in the order they
// are made, so they go in reverse: transport, store, server. (The mpi
// transport holds MPI itself; the bootstrap lets go of it when done.)
struct Joined {
  Env env;  // as agreed: token, master_addr and master_port are the ones in use
  std::string transport_name;  // "auto" resolved
  std::unique_ptr<StoreServer> server;    // rank 0's, when no launcher serves one
  std::unique_ptr<Store> store;           // null for the mpi transport
  std::shared_ptr<Transport> transport;
};

// Needs a world of 2 or more ranks. Throws ConfigError for a missing or
// contradictory setting (on every rank alike under mpirun), IoError when rank
// 0 cannot serve the store, TimeoutError naming the rank and the step that
// did not finish in time.
Joined join_job(const Env& env, const JoinOptions& options);

}  // namespace braid::comm
