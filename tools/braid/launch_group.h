// One attempt of `braid launch`: start the local ranks, relay their output
// line by line with a "[rank R]" prefix, and stop them all within seconds when
// one fails (launch.cc adds the store, the token and the restarts).
//
// Parameter-server jobs (launch.cc, --servers/--workers) give each rank its own
// program, environment and role through GroupSpec::ranks. A rank marked
// `may_fail` (a worker) is reported when it fails but does not stop the group;
// once every such rank has ended, the others (the servers) get --stop-grace to
// exit by themselves before they are stopped; once every server has ended,
// the workers still running get GroupSpec::finish_grace.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace braid::cli {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Per-local-rank settings; see GroupSpec::ranks.
struct RankSpec {
  std::vector<std::string> argv;  // empty: GroupSpec::argv
  EnvList env;                    // added after GroupSpec::env
  std::string role;               // "server", "worker", or "" (named in messages)
  bool may_fail = false;          // its failure is reported, the group goes on
  int rank = -1;                  // global rank; -1: GroupSpec::first_rank + local rank
};

// How a `may_fail` rank failed (handed to GroupSpec::on_tolerated_failure).
struct RankFailure {
  int rank = -1;
  std::string role;
  std::string how;             // "exited with code 7", "killed by signal 9 (Killed)"
  double after = 0;            // seconds from start
  std::deque<std::string> tail;  // its last lines of output
};

struct GroupSpec {
  std::vector<std::string> argv;  // program and its arguments
  int nproc = 1;                  // ranks on this node
  int first_rank = 0;             // global rank of local rank 0
  int world_size = 1;
  int node_rank = 0;
  // Extra environment for every rank (RANK etc. are added per rank).
  EnvList env;
  // Empty (plain jobs: every rank runs argv, any failure stops the group), or
  // one entry per local rank.
  std::vector<RankSpec> ranks;
  // Called, while the others keep running, when a `may_fail` rank fails.
  std::function<void(const RankFailure&)> on_tolerated_failure;
  // After a failure, SIGTERM the others; SIGKILL what is left after this. Also
  // how long the other ranks may outlive the last `may_fail` rank before they
  // are sent SIGTERM (when `drain`).
  std::chrono::milliseconds stop_grace{3000};
  // Stop the other ranks once every `may_fail` rank has ended. Off when this
  // node's workers are not all of the job's (servers serve other nodes too).
  bool drain = true;
  // Once the job's outcome is decided without the ranks still running (every
  // server on this node ended; in a plain job, every other rank exited 0),
  // each of them gets this long to end by itself (rank 0 may write a last
  // checkpoint or evaluate after the others left), or stop_grace when it is
  // seen stopped (SIGSTOP: it cannot end by itself); then it is named and
  // stopped. Before, a stopped parameter-server worker kept the launcher
  // waiting for ever. In a plain job such a rank fails the job.
  std::chrono::milliseconds finish_grace{300000};
  size_t tail_lines = 10;  // lines of output kept per rank for the summary
  // Plain jobs under parallel.fault_tolerance = replica (`--replace N`): a
  // rank that fails is started again, with BRAID_REPLICA_JOIN=1, while the
  // others go on (they drop it and admit its replacement), up to this many
  // times in all; past them a failure stops the group as usual.
  int replacements = 0;
};

struct GroupResult {
  bool ok = true;            // no rank failed, except `may_fail` ones
  int failed_rank = -1;      // the rank that failed first
  std::string failed_role;   // its RankSpec::role
  std::string how;           // "exited with code 3", "killed by signal 9 (Killed)"
  int exit_code = 0;         // what `braid launch` should exit with
  double failed_after = 0;   // seconds from start to the first failure
  std::deque<std::string> tail;  // its last lines of output
  std::vector<int> stopped;  // ranks we had to stop
  bool interrupted = false;  // launch itself got SIGINT/SIGTERM
  // Parameter-server jobs:
  std::vector<int> tolerated;  // `may_fail` ranks that failed, in order
  bool drained = false;        // `stopped` were stopped because they outlived the
                               // last `may_fail` rank by stop_grace, not after a failure
  bool drained_stopped = false;  // ... at once, as they were stopped (SIGSTOP) and could not exit
  // Ranks still running past their deadline once the outcome was decided
  // without them (GroupSpec::finish_grace); they were named and stopped.
  std::vector<int> overdue;
  std::vector<int> replaced;  // ranks started again (GroupSpec::replacements), in order
  std::vector<int> exit_codes;  // per local rank: code, or 128+signal
  // "straggler: rank 1 works ..." lines the ranks printed (train/straggler.h).
  std::vector<std::string> stragglers;
};

GroupResult run_group(const GroupSpec& spec);

// The summary printed after a failed attempt.
std::string describe_failure(const GroupResult& r);

// "\nbraid launch: stragglers named during the run:\n  straggler: rank 1 ..." (empty for none).
std::string describe_stragglers(const GroupResult& r);

// "\nlast lines of rank R:\n  | ..." (empty for no lines).
std::string describe_tail(int rank, const std::deque<std::string>& tail);

}  // namespace braid::cli
