// A discrete-event simulator of one or more training steps on P ranks
// (docs/sim.md). A step is a graph of tasks:
//
//   compute   seconds of work on one of a rank's streams (0: the training
//             thread; 1: the communication thread; more as the caller likes).
//             A stream runs its tasks one at a time in the order they were
//             added, each once its dependencies are done.
//   transfer  bytes from one rank to another: once its dependencies are done
//             the message waits its route's latency (alpha), then streams
//             through the links of its route, sharing each link's bandwidth
//             equally with the other messages on it at that moment; one its
//             receiver had been waiting for so long that it fell asleep also
//             waits the wake-up (see transfer()).
//   join      takes no time (or, as a delay, a fixed time and nothing else);
//             done when its dependencies are.
//
// Compute also shares: a host's running compute tasks that ask for more
// threads than it has cores all slow down in proportion (processor sharing).
//
// Everything is deterministic: equal times are broken by task id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/sim/cluster.h"

namespace braid::sim {

using TaskId = int32_t;

enum class TaskKind : uint8_t { compute, transfer, join };

// What a task is, for the breakdown and the trace: its category is one of
// "forward", "backward", "optimizer", "compute" (anything else on a compute
// stream), "comm" (reductions, codecs on the communication stream), "net"
// (transfers); the name is what the trace shows ("allreduce #3 ring step 2").
struct Label {
  std::string category;
  std::string name;
};

struct TaskTimes {
  double ready = 0;  // all dependencies done
  double start = 0;  // began (compute: got its stream; transfer: began streaming after alpha)
  double end = 0;
};

// Where each rank's training stream (stream 0) spent the simulated time.
struct RankBreakdown {
  double end = 0;          // when its last task ended
  double compute = 0;      // stream 0 busy
  double exposed_comm = 0; // stream 0 idle, waiting on a transfer or communication-stream work
  double waits = 0;        // stream 0 idle, waiting on another rank's compute (pipeline bubbles, stragglers)
};

struct SimResult {
  double makespan = 0;  // the last task's end
  std::vector<RankBreakdown> ranks;
  int64_t tasks = 0, events = 0;
};

class Simulator {
 public:
  explicit Simulator(Cluster cluster);
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  TaskId compute(int rank, double seconds, std::vector<TaskId> after, Label label, int stream = 0,
                 double threads = 1);
  // `awaited`: the receiver's training stream (stream 0) waits for this
  // message by itself (a pipeline's activation, a parameter server's push or
  // reply) rather than through a collective's communication thread. Such a
  // thread polls for Cluster::poll seconds, then sleeps: a message that
  // arrives after the receiver's stream 0 has been idle longer than that also
  // waits the cluster's wake-up latency before it counts as done.
  TaskId transfer(int src, int dst, double bytes, std::vector<TaskId> after, Label label, bool awaited = false);
  TaskId join(std::vector<TaskId> after, Label label = {"join", ""});
  // Done `seconds` after its dependencies, using nothing meanwhile: a rank
  // that starts late. Its time counts as a wait in the breakdown.
  TaskId delay(double seconds, std::vector<TaskId> after, Label label = {"join", "delay"});

  // Plays every task (again, from time 0, when called twice). A dependency
  // names an earlier task and a stream runs its tasks in the order they were
  // added, so the graph cannot hold a cycle: every task runs.
  SimResult run();

  // After run(); IndexError for an id that was never returned.
  const TaskTimes& times(TaskId id) const;
  const Cluster& cluster() const { return cluster_; }
  int64_t size() const;

  // Chrome trace-event JSON in the layout of braid's measured timelines
  // (base/trace.h): a process per rank, a thread per stream, transfers on a
  // "net" row of their sender; times in microseconds from `origin` seconds.
  nlohmann::json to_trace(double origin = 0) const;

 private:
  struct Impl;
  Cluster cluster_;
  std::unique_ptr<Impl> impl_;  // tasks, dependency lists, labels, times (engine_impl.h)
};

}  // namespace braid::sim
