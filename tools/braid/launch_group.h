// One attempt of `braid launch`: start the local ranks, relay their output
// line by line with a "[rank R]" prefix, and stop them all within seconds when
// one fails (launch.cc adds the store, the token and the restarts).
#pragma once

#include <chrono>
#include <deque>
#include <string>
#include <vector>

namespace braid::cli {

struct GroupSpec {
  std::vector<std::string> argv;  // program and its arguments
  int nproc = 1;                  // ranks on this node
  int first_rank = 0;             // global rank of local rank 0
  int world_size = 1;
  int node_rank = 0;
  // Extra environment for every rank (RANK etc. are added per rank).
  std::vector<std::pair<std::string, std::string>> env;
  // After a failure, SIGTERM the others; SIGKILL what is left after this.
  std::chrono::milliseconds stop_grace{3000};
  size_t tail_lines = 10;  // lines of output kept per rank for the summary
};

struct GroupResult {
  bool ok = true;
  int failed_rank = -1;      // the rank that failed first
  std::string how;           // "exited with code 3", "killed by signal 9 (Killed)"
  int exit_code = 0;         // what `braid launch` should exit with
  double failed_after = 0;   // seconds from start to the first failure
  std::deque<std::string> tail;  // its last lines of output
  std::vector<int> stopped;  // ranks we had to stop
  bool interrupted = false;  // launch itself got SIGINT/SIGTERM
};

GroupResult run_group(const GroupSpec& spec);

// The summary printed after a failed attempt.
std::string describe_failure(const GroupResult& r);

}  // namespace braid::cli
