// Joining the job: from the environment (`braid launch`, mpirun or srun) to a
// Communicator over the right transport (comm/bootstrap.h does the joining).
#pragma once

#include <memory>
#include <string>

#include "braid/comm/bootstrap.h"
#include "braid/comm/communicator.h"
#include "braid/comm/env.h"

namespace braid::parallel {

struct ProcessGroupOptions {
  // "auto" (shm when every rank is on this host, else tcp), "tcp", "shm", "mpi".
  std::string transport = "auto";
  // tcp connections per peer; 0: BRAID_TCP_STREAMS, else 1.
  int tcp_streams = 0;
  // tcp, shm: bound on a peer's early messages (bytes; comm/transport/transport.h); 0: the default.
  size_t max_message = 0;
  Duration timeout = std::chrono::seconds(300);  // per collective
  Duration join_timeout = std::chrono::seconds(60);
  // Where the communicators dump their histories when a collective fails
  // (comm::CommOptions::history_dir); empty: nowhere.
  std::string history_dir{};
};

class ProcessGroup {
 public:
  // Reads the environment and connects to every peer. A single process (no
  // launcher variables) gets a one-rank group without sockets.
  static std::unique_ptr<ProcessGroup> join(const ProcessGroupOptions& options);

  const comm::Env& env() const { return joined_.env; }
  comm::Communicator& comm() { return comm_; }
  // The transport under comm() (parameter-server clients and servers talk over it directly).
  std::shared_ptr<comm::Transport> transport() { return joined_.transport; }
  // The rendezvous store (null for a single process or the mpi transport).
  comm::Store* store() { return joined_.store.get(); }
  const std::string& transport_name() const { return joined_.transport_name; }

 private:
  comm::Joined joined_;
  comm::Communicator comm_;
};

}  // namespace braid::parallel
