// Adding tasks, the per-rank breakdown and the trace; the event loop is in
// engine_play.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "braid/base/error.h"
#include "braid/sim/engine_impl.h"

namespace braid::sim {

struct Simulator::Impl {
  TaskTable t;
};

namespace {

void check_cluster(const Cluster& c) {
  auto positive = [](double x) { return std::isfinite(x) && x > 0; };
  auto link_ok = [&](const comm::LinkCost& l) {
    return positive(l.beta) && std::isfinite(l.alpha) && l.alpha >= 0 && std::isfinite(l.gamma) && l.gamma >= 0;
  };
  if (c.ranks < 1 || c.ranks_per_host < 1 || !positive(c.cores_per_host) || !link_ok(c.intra) || !link_ok(c.inter)) {
    fail<ValueError>("braid sim: bad cluster ({} ranks, {} per host, {} cores; links need alpha >= 0, beta > 0, "
                     "gamma >= 0)",
                     c.ranks, c.ranks_per_host, c.cores_per_host);
  }
  if (!c.slowdown.empty() && c.slowdown.size() != static_cast<size_t>(c.ranks)) {
    fail<ValueError>("braid sim: {} slowdowns for {} ranks", c.slowdown.size(), c.ranks);
  }
  for (double s : c.slowdown) {
    if (!positive(s)) fail<ValueError>("braid sim: a slowdown of {}", s);
  }
}

// The dependency of `id` that ended last (ties: the later task); -1 if none.
TaskId last_dependency(const TaskTable& t, TaskId id) {
  TaskId best = -1;
  for (TaskId d : t.deps_of(id)) {
    if (best < 0 || t.times[d].end >= t.times[best].end) best = d;
  }
  return best;
}

// Blames [from, to), an idle gap of `rank`'s stream 0 that ended when `cause`
// did, on what held it up, walking back along the chain of whatever ended
// last: the part of the gap during which a message was under way (latency
// included) or a communication stream was busy is exposed communication; the
// part during which another rank's training stream computed is a wait. So a
// pipeline bubble behind a forward pass and its activation message is a wait
// for the forward and exposed communication for the message.
void blame(const TaskTable& t, int rank, TaskId cause, double from, double to, RankBreakdown& b) {
  for (TaskId x = cause; x >= 0 && to > from;) {
    const TaskTable::Task& k = t.tasks[x];
    const TaskTimes& tt = t.times[x];
    if (k.kind == TaskKind::join) {
      if (k.amount > 0) {  // a delay: the rank started late
        const double delayed_from = std::max(from, tt.end - k.amount);
        b.waits += to - delayed_from;
        to = delayed_from;
      }
      x = last_dependency(t, x);
      continue;
    }
    const bool compute = k.kind == TaskKind::compute;
    const double busy_from = std::max(from, compute ? tt.start : tt.ready);
    const bool training_elsewhere = compute && k.peer == 0 && k.rank != rank;
    (training_elsewhere ? b.waits : b.exposed_comm) += to - busy_from;
    to = busy_from;
    // A compute task that started after it was ready waited for its stream.
    x = compute && tt.start > tt.ready ? k.stream_prev : last_dependency(t, x);
  }
}

// Appends a task of kind `k` after `after` (checked: each an existing task).
TaskId add(TaskTable& t, TaskTable::Task k, const std::vector<TaskId>& after, Label&& label) {
  const auto id = static_cast<TaskId>(t.tasks.size());
  for (TaskId d : after) {
    if (d < 0 || d >= id) {
      fail<ValueError>("braid sim: \"{}\" (task {}) waits on task {}, which does not exist yet", label.name, id, d);
    }
  }
  if (id == std::numeric_limits<TaskId>::max()) {
    fail<ValueError>("braid sim: more than {} tasks", std::numeric_limits<TaskId>::max());
  }
  // Consecutive tasks mostly share a label (one collective step on every rank).
  const Label* previous = t.tasks.empty() ? nullptr : &t.labels[t.tasks.back().label];
  if (previous && previous->category == label.category && previous->name == label.name) {
    k.label = t.tasks.back().label;
  } else {
    std::string key = label.category + '\x1f' + label.name;
    auto [it, fresh] = t.label_ids.try_emplace(std::move(key), static_cast<int32_t>(t.labels.size()));
    if (fresh) t.labels.push_back(std::move(label));
    k.label = it->second;
  }
  t.tasks.push_back(k);
  t.times.emplace_back();
  t.deps.insert(t.deps.end(), after.begin(), after.end());
  t.dep_begin.push_back(static_cast<int64_t>(t.deps.size()));
  return id;
}

// A stream's trace row: its number, past the net row from kNetTid on (a
// parameter server serves each worker on a stream of its own: W + 2 of them).
int stream_tid(int stream) { return stream < kNetTid ? stream : stream + 1; }

std::string thread_name(int tid) {
  if (tid == 0) return "train";
  if (tid == 1) return "comm";
  if (tid == kNetTid) return "net";
  return fmt::format("stream {}", tid < kNetTid ? tid : tid - 1);
}

}  // namespace

Simulator::Simulator(Cluster cluster) : cluster_(std::move(cluster)), impl_(std::make_unique<Impl>()) {
  check_cluster(cluster_);
  impl_->t.stream_last.resize(cluster_.ranks);
}
Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

TaskId Simulator::compute(int rank, double seconds, std::vector<TaskId> after, Label label, int stream,
                          double threads) {
  TaskTable& t = impl_->t;
  if (rank < 0 || rank >= cluster_.ranks) {
    fail<ValueError>("braid sim: compute \"{}\" on rank {} of {}", label.name, rank, cluster_.ranks);
  }
  if (!std::isfinite(seconds) || seconds < 0) {
    fail<ValueError>("braid sim: compute \"{}\" on rank {} takes {} seconds", label.name, rank, seconds);
  }
  if (stream < 0 || stream == std::numeric_limits<int>::max()) {
    fail<ValueError>("braid sim: compute \"{}\" on stream {} (streams are numbered from 0)", label.name, stream);
  }
  if (!std::isfinite(threads) || threads <= 0) {
    fail<ValueError>("braid sim: compute \"{}\" asks for {} threads", label.name, threads);
  }
  std::vector<TaskId>& last = t.stream_last[rank];
  if (static_cast<int>(last.size()) <= stream) last.resize(stream + 1, -1);
  const TaskId id = add(t,
                        {.amount = seconds, .rank = rank, .peer = stream, .stream_prev = last[stream],
                         .threads = static_cast<float>(threads), .kind = TaskKind::compute},
                        after, std::move(label));
  last[stream] = id;
  return id;
}

TaskId Simulator::transfer(int src, int dst, double bytes, std::vector<TaskId> after, Label label, bool awaited) {
  if (src < 0 || src >= cluster_.ranks || dst < 0 || dst >= cluster_.ranks) {
    fail<ValueError>("braid sim: transfer \"{}\" from rank {} to rank {} of {}", label.name, src, dst, cluster_.ranks);
  }
  if (!std::isfinite(bytes) || bytes < 0) {
    fail<ValueError>("braid sim: transfer \"{}\" of {} bytes", label.name, bytes);
  }
  return add(impl_->t, {.amount = bytes, .rank = src, .peer = dst, .kind = TaskKind::transfer, .awaited = awaited}, after,
             std::move(label));
}

TaskId Simulator::join(std::vector<TaskId> after, Label label) {
  return add(impl_->t, {.kind = TaskKind::join}, after, std::move(label));
}

TaskId Simulator::delay(double seconds, std::vector<TaskId> after, Label label) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) fail<ValueError>("braid sim: a delay of {} s", seconds);
  return add(impl_->t, {.amount = seconds, .kind = TaskKind::join}, after, std::move(label));
}

int64_t Simulator::size() const { return static_cast<int64_t>(impl_->t.tasks.size()); }

const TaskTimes& Simulator::times(TaskId id) const {
  if (id < 0 || id >= size()) fail<IndexError>("braid sim: no task {} (there are {})", id, size());
  return impl_->t.times[id];
}

SimResult Simulator::run() {
  TaskTable& t = impl_->t;
  SimResult r;
  r.tasks = size();
  r.events = play(t, cluster_);

  // Per rank: stream 0's busy time and the idle gaps before its tasks, each
  // blamed on what held its task up (blame()); the tail after its last
  // stream-0 task (to its last task, messages counted on the receiver) is
  // communication still in flight.
  r.ranks.assign(cluster_.ranks, {});
  std::vector<double> stream0_end(cluster_.ranks, 0);
  for (TaskId i = 0; i < size(); ++i) {
    const TaskTable::Task& k = t.tasks[i];
    const TaskTimes& tt = t.times[i];
    r.makespan = std::max(r.makespan, tt.end);
    if (k.kind == TaskKind::join) continue;
    RankBreakdown& b = r.ranks[k.kind == TaskKind::transfer ? k.peer : k.rank];
    b.end = std::max(b.end, tt.end);
    if (k.kind != TaskKind::compute || k.peer != 0) continue;
    b.compute += tt.end - tt.start;
    const double idle = tt.start - (k.stream_prev >= 0 ? t.times[k.stream_prev].end : 0.0);
    stream0_end[k.rank] = tt.end;
    if (idle > 0) blame(t, k.rank, last_dependency(t, i), tt.start - idle, tt.start, b);
  }
  for (int rank = 0; rank < cluster_.ranks; ++rank) r.ranks[rank].exposed_comm += r.ranks[rank].end - stream0_end[rank];
  return r;
}

nlohmann::json Simulator::to_trace(double origin) const {
  const TaskTable& t = impl_->t;
  auto us = [](double s) { return s * 1e6; };
  nlohmann::json events = nlohmann::json::array();
  // Rows each rank uses: its streams and, if it sends, its net row.
  std::vector<std::set<int>> rows(cluster_.ranks);  // tids
  for (const TaskTable::Task& k : t.tasks) {
    if (k.kind == TaskKind::compute) rows[k.rank].insert(stream_tid(k.peer));
    if (k.kind == TaskKind::transfer) rows[k.rank].insert(kNetTid);
  }
  for (int r = 0; r < cluster_.ranks; ++r) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"tid", 0},
                      {"args", {{"name", fmt::format("rank {}", r)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"tid", 0},
                      {"args", {{"sort_index", r}}}});
    for (int tid : rows[r]) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", tid},
                        {"args", {{"name", thread_name(tid)}}}});
    }
  }
  for (size_t i = 0; i < t.tasks.size(); ++i) {
    const TaskTable::Task& k = t.tasks[i];
    if (k.kind == TaskKind::join) continue;
    const TaskTimes& tt = t.times[i];
    const Label& l = t.labels[k.label];
    const bool net = k.kind == TaskKind::transfer;
    // A message's row shows it from when it was sent (latency included).
    const double from = net ? tt.ready : tt.start;
    nlohmann::json e{{"ph", "X"},           {"cat", l.category},          {"name", l.name},
                     {"pid", k.rank},       {"tid", net ? kNetTid : stream_tid(k.peer)}, {"ts", us(from - origin)},
                     {"dur", us(tt.end - from)}};
    if (net) e["args"] = {{"bytes", k.amount}, {"peer", k.peer}};
    events.push_back(std::move(e));
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace braid::sim
