// The event loop of the simulator (engine.h).
//
// Messages are flows: each streams through two links (the sender's port and
// the receiver's, or the two hosts' network interfaces) at
// min over its links of (link bandwidth / flows on the link). A flow starting
// or ending changes the rate of the flows on its two links only; those are
// advanced to now and get a new finish event. Stale events are told apart by
// a version number (lazy deletion from the heap).
//
// A host's running compute tasks all progress at one rate, min(1, cores /
// threads asked for), so each host keeps a virtual clock that runs at that
// rate: a task ends when the clock has advanced by its seconds, and only the
// earliest such end is in the global heap.
//
// Rates are settled once per instant, not once per event: every event at
// time t only marks the links and hosts it changed, and once the last event
// at t is handled each marked link's flows and each marked host's compute
// and charged flows get their new rate and finish event (settle()). Nothing
// advances between events of one instant, so this is the same schedule; but
// P messages starting at once on one host of P ranks (a ring step) cost P
// rate updates instead of P per message: 1024 ranks on one host took
// minutes, a cubic number of updates per all-reduce.
//
// A message whose ends cost CPU (Cluster::intra_cpu, inter_cpu) also asks
// its hosts for cores: at its links' rate each end is busy cpu/link of the
// time, and it cannot outrun one thread copying at each end. Those demands
// count beside compute's threads, and the message streams at the slower of
// its two hosts' rates, so a flow starting or ending can slow a host's
// compute and its other messages, and a compute task can slow a message.
// A charged message inside one host moves at its host's rate alone, so it
// runs on the host's flow clock (Host::fclock, at the host's rate) as
// compute runs on its clock: a change of the host's rate reschedules one
// event, not every message on the host. (With P ranks on one host whose
// ring steps start out of step, updating every message took P per event,
// cubic in P per all-reduce.) A charged message between hosts is retimed
// whenever either host's rate moves.
#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>

#include "braid/base/error.h"
#include "braid/sim/engine_impl.h"

namespace braid::sim {

namespace {

enum class Ev : uint8_t {
  done,       // a join or an empty compute task
  latency,    // a message has waited its latency and starts streaming
  flow_end,   // ref: flow slot
  host_end,   // ref: host
};

struct Event {
  double time;
  TaskId task;  // equal times: lower task id first
  Ev type;
  int32_t ref;
  uint32_t version;
};

struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return std::tie(a.time, a.task, a.type) > std::tie(b.time, b.task, b.type);
  }
};

class Player {
 public:
  Player(TaskTable& t, const Cluster& c) : t_(t), c_(c), hosts_(c.hosts()) {
    const TaskId n = static_cast<TaskId>(t.tasks.size());
    // Who waits on each task: dependents as one flat list, plus its stream successor.
    out_begin_.assign(n + 1, 0);
    for (TaskId d : t.deps) ++out_begin_[d + 1];
    for (TaskId i = 0; i < n; ++i) out_begin_[i + 1] += out_begin_[i];
    out_.resize(t.deps.size());
    std::vector<int64_t> fill(out_begin_.begin(), out_begin_.end() - 1);
    pending_.assign(n, 0);
    stream_next_.assign(n, -1);
    for (TaskId i = 0; i < n; ++i) {
      for (TaskId d : t.deps_of(i)) out_[fill[d]++] = i;
      pending_[i] = static_cast<int32_t>(t.deps_of(i).size());
      if (const TaskId prev = t.tasks[i].stream_prev; prev >= 0) {
        stream_next_[prev] = i;
        ++pending_[i];
      }
    }
    idle_since_.assign(c.ranks, 0);
    links_.resize(2 * c.ranks + 2 * hosts_.size());
    link_dirty_.assign(links_.size(), 0);
    host_dirty_.assign(hosts_.size(), 0);
    for (int r = 0; r < c.ranks; ++r) links_[port_out(r)].beta = links_[port_in(r)].beta = c.intra.beta;
    for (int h = 0; h < c.hosts(); ++h) links_[nic_out(h)].beta = links_[nic_in(h)].beta = c.inter.beta;
  }

  int64_t run() {
    std::fill(t_.times.begin(), t_.times.end(), TaskTimes{});
    for (size_t i = 0; i < t_.tasks.size(); ++i)
      if (pending_[i] == 0) activate(static_cast<TaskId>(i), 0);
    settle(0);
    int64_t handled = 0;
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      switch (e.type) {
        case Ev::done: finish(e.task, e.time), ++handled; break;
        case Ev::latency: start_flow(e.task, e.time), ++handled; break;
        case Ev::flow_end:
          if (flows_[e.ref].version == e.version) end_flow(e.ref, e.time), ++handled;
          break;
        case Ev::host_end:
          if (hosts_[e.ref].version == e.version) host_due(e.ref, e.time), ++handled;
          break;
      }
      // The instant's last event: what it changed gets its new rates (events
      // that settle() schedules at this same instant come round again).
      if (events_.empty() || events_.top().time > e.time) settle(e.time);
    }
    BRAID_CHECK_EQ(finished_, static_cast<int64_t>(t_.tasks.size()));
    return handled;
  }

 private:
  struct Link {
    double beta = 0;             // s per byte
    std::vector<int32_t> flows;  // flow slots streaming through it now
  };
  struct Flow {
    TaskId task = -1;
    double remaining = 0;  // bytes, as of `last`
    double spb = 0;        // s per byte at the current rate (0: none yet)
    double last = 0;
    uint32_t version = 0;  // never reset: a reused slot's old events stay stale
    int32_t link[2] = {0, 0};
    int32_t pos[2] = {0, 0};  // index in each link's flows
    // CPU-charged flows only (cpu_spb > 0):
    double cpu_spb = 0;        // one end's CPU seconds per byte of this message
    double demand = 0;         // cores each end keeps busy at the links' rate
    int32_t host[2] = {0, 0};  // the sender's and the receiver's
    int32_t hpos[2] = {0, 0};  // index in each host's flows
    // Charged and inside one host: spb is its links' s per byte, without the
    // host's share, and it is done when the host's flow clock reaches vend.
    bool local = false;
    double vend = 0;
  };
  struct LocalEnd {
    double vend;  // the host's flow clock when the message is through
    int32_t slot;
    uint32_t version;  // the flow's when this was pushed (stale once it moves on)
    bool operator>(const LocalEnd& o) const { return std::tie(vend, slot) > std::tie(o.vend, o.slot); }
  };
  struct Running {
    double vend;  // the host's virtual clock when the task is done
    TaskId task;
    bool operator>(const Running& o) const { return std::tie(vend, task) > std::tie(o.vend, o.task); }
  };
  struct Host {
    double clock = 0;    // virtual seconds of compute each running task has had since the host was last idle
    double last = 0;     // real time the clock was last advanced
    double threads = 0;  // asked for by the running compute tasks
    double flow_threads = 0;  // asked for by the ends of CPU-charged flows
    uint32_t version = 0;
    std::vector<Running> running;  // min-heap on vend
    std::vector<int32_t> flows;    // CPU-charged flow ends between hosts here: slot * 2 + end
    double fclock = 0;                // virtual seconds at the host's rate, never rebased
    std::vector<LocalEnd> local;      // min-heap: charged flows inside this host (lazy deletion)
    int32_t local_flows = 0;          // of them, streaming now
  };

  // Links: per rank its in-host port out and in, then per host its network interface out and in.
  int32_t port_out(int rank) const { return 2 * rank; }
  int32_t port_in(int rank) const { return 2 * rank + 1; }
  int32_t nic_out(int host) const { return 2 * c_.ranks + 2 * host; }
  int32_t nic_in(int host) const { return 2 * c_.ranks + 2 * host + 1; }

  const TaskTable::Task& task(TaskId id) const { return t_.tasks[id]; }
  TaskTimes& times(TaskId id) { return t_.times[id]; }
  void push(double time, TaskId id, Ev type, int32_t ref = 0, uint32_t version = 0) {
    events_.push({time, id, type, ref, version});
  }

  // All of `id`'s dependencies (and its stream predecessor) are done.
  void activate(TaskId id, double now) {
    const TaskTable::Task& k = task(id);
    switch (k.kind) {
      case TaskKind::join: times(id).start = now; push(now + k.amount, id, Ev::done); break;
      case TaskKind::transfer: {
        const bool local = c_.host_of(k.rank) == c_.host_of(k.peer);
        push(now + (local ? c_.intra.alpha : c_.inter.alpha), id, Ev::latency);
        break;
      }
      case TaskKind::compute:
        times(id).start = now;
        if (k.peer == 0) idle_since_[k.rank] = kBusy;
        if (k.amount == 0) push(now, id, Ev::done);
        else start_compute(id, now);
        break;
    }
  }

  void finish(TaskId id, double now) {
    times(id).end = now;
    if (const TaskTable::Task& k = task(id); k.kind == TaskKind::compute && k.peer == 0) idle_since_[k.rank] = now;
    ++finished_;
    for (int64_t i = out_begin_[id]; i < out_begin_[id + 1]; ++i) {
      const TaskId d = out_[i];
      times(d).ready = std::max(times(d).ready, now);
      if (--pending_[d] == 0) activate(d, now);
    }
    if (const TaskId s = stream_next_[id]; s >= 0 && --pending_[s] == 0) {
      activate(s, now);
    }
  }

  // ---- messages ----
  void start_flow(TaskId id, double now) {
    times(id).start = now;
    const TaskTable::Task& k = task(id);
    if (k.amount == 0) {
      arrive(id, now);
      return;
    }
    int32_t slot;
    if (free_.empty()) {
      slot = static_cast<int32_t>(flows_.size());
      flows_.emplace_back();
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    Flow& f = flows_[slot];
    const int hs = c_.host_of(k.rank), hd = c_.host_of(k.peer);
    if (hs == hd) {
      f.link[0] = port_out(k.rank), f.link[1] = port_in(k.peer);
    } else {
      f.link[0] = nic_out(hs), f.link[1] = nic_in(hd);
    }
    f.task = id, f.remaining = k.amount, f.spb = 0, f.last = now;
    for (int j = 0; j < 2; ++j) {
      std::vector<int32_t>& on = links_[f.link[j]].flows;
      f.pos[j] = static_cast<int32_t>(on.size());
      on.push_back(slot);
    }
    const MessageCpu& cpu = hs == hd ? c_.intra_cpu : c_.inter_cpu;
    f.cpu_spb = cpu.any() ? cpu.seconds(k.amount) / k.amount : 0;
    f.demand = 0;
    f.local = f.cpu_spb > 0 && hs == hd;
    f.host[0] = hs, f.host[1] = hd;
    if (f.local) {
      ++hosts_[hs].local_flows;
    } else if (f.cpu_spb > 0) {
      for (int e = 0; e < 2; ++e) {
        std::vector<int32_t>& on = hosts_[f.host[e]].flows;
        f.hpos[e] = static_cast<int32_t>(on.size());
        on.push_back(2 * slot + e);
      }
    }
    links_changed(f.link);
  }

  void end_flow(int32_t slot, double now) {
    Flow& f = flows_[slot];
    if (f.local) {
      set_demand(f, 0, now);
      --hosts_[f.host[0]].local_flows;
      mark(f.host[0]);
    } else if (f.cpu_spb > 0) {
      set_demand(f, 0, now);
      for (int e = 0; e < 2; ++e) {
        std::vector<int32_t>& on = hosts_[f.host[e]].flows;
        const int32_t moved = on.back();
        on[f.hpos[e]] = moved;
        flows_[moved / 2].hpos[moved % 2] = f.hpos[e];
        on.pop_back();
      }
    }
    for (int j = 0; j < 2; ++j) {
      std::vector<int32_t>& on = links_[f.link[j]].flows;
      const int32_t moved = on.back();
      on[f.pos[j]] = moved;
      Flow& m = flows_[moved];
      m.pos[m.link[0] == f.link[j] ? 0 : 1] = f.pos[j];
      on.pop_back();
    }
    ++f.version;
    free_.push_back(slot);
    const TaskId id = f.task;
    links_changed(f.link);
    arrive(id, now);
  }

  // A message has arrived. Its receiver, if it waits for it by itself and has
  // been idle past its poll, was asleep: the message is done once it wakes.
  void arrive(TaskId id, double now) {
    const TaskTable::Task& k = task(id);
    const double idle = idle_since_[k.peer];
    if (k.awaited && idle != kBusy && now - idle > c_.poll) {
      push(now + (c_.host_of(k.rank) == c_.host_of(k.peer) ? c_.intra_wake : c_.inter_wake), id, Ev::done);
      return;
    }
    finish(id, now);
  }

  // s per byte the flow's links and its ends' threads allow, before its hosts' share.
  double base_spb(const Flow& f) const {
    double spb = f.cpu_spb;
    for (int32_t l : f.link) {
      const Link& L = links_[l];
      spb = std::max(spb, L.beta * static_cast<double>(L.flows.size()));
    }
    return spb;
  }

  // A flow's ends now ask for `demand` cores each; their hosts' clocks are
  // brought to `now` first, at the rate they had.
  void set_demand(Flow& f, double demand, double now) {
    if (demand == f.demand) return;
    for (int32_t h : f.host) {
      advance(hosts_[h], now);
      hosts_[h].flow_threads += demand - f.demand;
      mark(h);
    }
    f.demand = demand;
  }

  void mark(int32_t host) {
    if (!host_dirty_[host]) host_dirty_[host] = 1, dirty_.push_back(host);
  }

  // The flow's current rate, from its links and (charged) its hosts' share.
  void retime(int32_t slot, double now) {
    Flow& f = flows_[slot];
    if (f.local) {
      retime_local(f, slot, now);
      return;
    }
    double spb = base_spb(f);
    if (f.cpu_spb > 0) spb /= std::min(rate(hosts_[f.host[0]]), rate(hosts_[f.host[1]]));
    if (spb == f.spb) return;
    if (f.spb > 0) f.remaining = std::max(0.0, f.remaining - (now - f.last) / f.spb);
    f.last = now;
    f.spb = spb;
    push(now + f.remaining * spb, f.task, Ev::flow_end, slot, ++f.version);
  }

  // A charged flow inside a host whose links changed: the bytes it has left
  // now take the new links' time on the host's flow clock.
  void retime_local(Flow& f, int32_t slot, double now) {
    const double spb = base_spb(f);
    if (spb == f.spb) return;
    Host& h = hosts_[f.host[0]];
    advance(h, now);
    const double bytes = f.spb > 0 ? std::max(0.0, f.vend - h.fclock) / f.spb : f.remaining;
    f.spb = spb;
    f.vend = h.fclock + bytes * spb;
    h.local.push_back({f.vend, slot, ++f.version});
    std::push_heap(h.local.begin(), h.local.end(), std::greater<>());
    mark(f.host[0]);
  }

  // The flows on two links changed in number; settle() gives them their rates.
  void links_changed(const int32_t (&links)[2]) {
    for (int32_t l : links)
      if (!link_dirty_[l]) link_dirty_[l] = 1, dirty_links_.push_back(l);
  }

  // The end of an instant: the flows on the links that changed get their CPU
  // demands first (which may change hosts' rates), then every rate that
  // moved; then the hosts whose rate may have changed give it to their
  // compute and charged flows.
  void settle(double now) {
    for (int32_t l : dirty_links_)
      for (int32_t slot : links_[l].flows)
        if (Flow& f = flows_[slot]; f.cpu_spb > 0) set_demand(f, f.cpu_spb / base_spb(f), now);
    for (int32_t l : dirty_links_) {
      for (int32_t slot : links_[l].flows) retime(slot, now);
      link_dirty_[l] = 0;
    }
    dirty_links_.clear();
    for (size_t i = 0; i < dirty_.size(); ++i) {
      const int32_t h = dirty_[i];
      if (hosts_[h].flows.empty() && hosts_[h].local_flows == 0) hosts_[h].flow_threads = 0;  // sums exact again
      reschedule(h, now);
      for (int32_t end : hosts_[h].flows) retime(end / 2, now);
      host_dirty_[h] = 0;
    }
    dirty_.clear();
  }

  // ---- compute ----
  double rate(const Host& h) const {
    const double asked = h.threads + h.flow_threads;
    return asked > c_.cores_per_host ? c_.cores_per_host / asked : 1.0;
  }

  void advance(Host& h, double now) {
    const double r = rate(h);
    h.fclock += (now - h.last) * r;
    if (h.running.empty()) {
      h.clock = 0, h.threads = 0;  // rebased while idle: keeps the clock small, and sums exact
    } else {
      h.clock += (now - h.last) * r;
    }
    h.last = now;
  }

  // Pops the local flows' ends that a later retime or the flow's end made stale.
  void drop_stale(Host& h) {
    while (!h.local.empty() && flows_[h.local.front().slot].version != h.local.front().version) {
      std::pop_heap(h.local.begin(), h.local.end(), std::greater<>());
      h.local.pop_back();
    }
  }

  // Both clocks run at the host's rate, so what is left on each compares.
  bool compute_is_next(Host& h) {
    drop_stale(h);
    if (h.running.empty()) return false;
    return h.local.empty() || h.running.front().vend - h.clock <= h.local.front().vend - h.fclock;
  }

  // One event for the host: its next compute task's end or local flow's.
  void reschedule(int32_t host, double now) {
    Host& h = hosts_[host];
    ++h.version;
    const bool compute = compute_is_next(h);
    if (!compute && h.local.empty()) return;
    const double left = compute ? h.running.front().vend - h.clock : h.local.front().vend - h.fclock;
    const TaskId task = compute ? h.running.front().task : flows_[h.local.front().slot].task;
    push(now + std::max(0.0, left) / rate(h), task, Ev::host_end, host, h.version);
  }

  void host_due(int32_t host, double now) {
    Host& h = hosts_[host];
    advance(h, now);
    if (compute_is_next(h)) {
      end_compute(host, now);
      return;
    }
    BRAID_CHECK(!h.local.empty(), "sim: host {} due at {} with nothing running", host, now);
    const int32_t slot = h.local.front().slot;
    std::pop_heap(h.local.begin(), h.local.end(), std::greater<>());
    h.local.pop_back();
    mark(host);
    end_flow(slot, now);
  }

  void start_compute(TaskId id, double now) {
    const TaskTable::Task& k = task(id);
    const int32_t host = c_.host_of(k.rank);
    Host& h = hosts_[host];
    advance(h, now);
    h.running.push_back({h.clock + k.amount, id});
    std::push_heap(h.running.begin(), h.running.end(), std::greater<>());
    h.threads += k.threads;
    mark(host);
  }

  void end_compute(int32_t host, double now) {
    Host& h = hosts_[host];
    advance(h, now);
    std::pop_heap(h.running.begin(), h.running.end(), std::greater<>());
    const TaskId id = h.running.back().task;
    h.running.pop_back();
    h.threads -= task(id).threads;
    mark(host);
    finish(id, now);
  }

  TaskTable& t_;
  const Cluster& c_;
  std::vector<int64_t> out_begin_;
  std::vector<TaskId> out_;
  std::vector<TaskId> stream_next_;
  std::vector<int32_t> pending_;
  // Per rank: since when its stream 0 has had no task running (kBusy while one
  // runs): how long a thread waiting there has waited.
  static constexpr double kBusy = -1;
  std::vector<double> idle_since_;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<int32_t> free_;
  std::vector<Host> hosts_;
  std::vector<int32_t> dirty_;  // hosts whose rate may have changed this instant (settle)
  std::vector<uint8_t> host_dirty_;    // per host: in dirty_
  std::vector<int32_t> dirty_links_;   // links whose flows changed in number this instant
  std::vector<uint8_t> link_dirty_;    // per link: in dirty_links_
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  int64_t finished_ = 0;
};

}  // namespace

int64_t play(TaskTable& t, const Cluster& cluster) { return Player(t, cluster).run(); }

}  // namespace braid::sim
