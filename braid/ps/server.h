// A parameter server: owns one shard of the model (shard.h) and serves the
// workers' pushes and pulls over a Transport, applying the job's consistency
// model (config.h). Servers are transport ranks 0..S-1, workers S..S+W-1.
//
// One thread per worker reads that worker's requests, so a slow worker never
// delays another's pull; the shard is updated under one lock. The first
// worker's hello carries the job's PsConfig; in a resumed or restarted job
// (PsConfig::resume) a server with a checkpoint of its shard in
// ps.checkpoint_dir continues from it instead of the initial weights; without
// one, it builds its shard from the checkpoints another number of servers
// wrote there (shard_reshard.h).
//
// Never hangs: a worker that dies is noticed through the transport, and one
// that goes silent for `timeout` is noticed by the clock. Under asp, ssp and
// softsync the others go on without it (logged); under bsp that is an error
// naming the worker unless backup workers cover it, and a clock that waits
// longer than `timeout` is an error naming the workers it waits for.
#pragma once

#include <chrono>
#include <memory>

#include "braid/base/deadline.h"
#include "braid/comm/transport/transport.h"

namespace braid::ps {

struct ServerOptions {
  int servers = 1;
  int workers = 1;
  Duration timeout = std::chrono::seconds(300);
  // Bounds on what workers' requests may make the server allocate (bytes):
  // the shard (dense range and sparse rows, each with its updater state) and
  // one request's payload or reply. A request past them is refused with the
  // reason and its worker dropped (docs/reliability.md, "Hostile bytes").
  uint64_t max_shard_bytes = uint64_t{64} << 30;
  uint64_t max_message = uint64_t{4} << 30;
};

struct ServerStats {
  int64_t updates = 0;        // dense updates applied
  int64_t gradients = 0;      // dense gradients received
  int64_t dropped = 0;        // late gradients dropped (bsp with backup workers), and clocks only dead workers pushed to
  int64_t max_staleness = 0;  // most updates between a worker's pull and its push
  int64_t clock = 0;
  int64_t recovered_version = -1;  // the checkpoint's update count, -1 when none was loaded
  std::vector<int> gone;           // workers (by index) that died, or went silent for a while
};

class Server {
 public:
  Server(comm::Transport& transport, ServerOptions options);
  ~Server();

  // Serves until every worker has said done or is gone. Throws when the job
  // cannot go on.
  void run();
  ServerStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid::ps
