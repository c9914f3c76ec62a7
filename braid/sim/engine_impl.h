// The Simulator's tasks, shared by engine.cc (adding tasks, the breakdown,
// the trace) and engine_play.cc (the event loop). Kept small per task: a
// 1024-rank ring all-reduce is three million tasks.
#pragma once

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "braid/sim/engine.h"

namespace braid::sim {

// Trace row of a rank's transfers (after its streams 0..kNetTid-1; streams
// from kNetTid on are shown one row further down).
inline constexpr int kNetTid = 100;

struct TaskTable {
  struct Task {
    double amount = 0;        // compute: seconds; transfer: bytes; join: its delay, seconds
    int32_t rank = -1;        // compute: its rank; transfer: the sender; join: -1
    int32_t peer = 0;         // compute: its stream; transfer: the receiver
    int32_t label = 0;        // index into labels
    TaskId stream_prev = -1;  // compute: the task before it on its stream, -1 if none
    float threads = 1;        // compute: cores it can keep busy
    TaskKind kind = TaskKind::join;
    bool awaited = false;     // transfer: the receiver's stream 0 waits for it (Simulator::transfer)
  };

  std::vector<Task> tasks;
  std::vector<TaskTimes> times;
  // Dependencies as one flat list: task t's are deps[dep_begin[t] .. dep_begin[t+1]).
  std::vector<int64_t> dep_begin{0};
  std::vector<TaskId> deps;
  std::vector<std::vector<TaskId>> stream_last;  // [rank][stream]: the last compute task added, -1 if none

  // Labels are interned: collectives give thousands of messages one name.
  std::vector<Label> labels;
  std::unordered_map<std::string, int32_t> label_ids;  // category '\x1f' name -> index

  std::span<const TaskId> deps_of(TaskId t) const {
    return {deps.data() + dep_begin[static_cast<size_t>(t)],
            static_cast<size_t>(dep_begin[static_cast<size_t>(t) + 1] - dep_begin[static_cast<size_t>(t)])};
  }
  const Label& label_of(TaskId t) const { return labels[static_cast<size_t>(tasks[static_cast<size_t>(t)].label)]; }
};

// Plays every task of `t` on `cluster` from time 0, filling t.times; returns
// the number of events handled.
int64_t play(TaskTable& t, const Cluster& cluster);

}  // namespace braid::sim
