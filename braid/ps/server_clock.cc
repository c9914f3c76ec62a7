// The consistency model of a parameter server: which workers are live, when a
// pull may be answered (the bsp and ssp gates), and how pushes become updates
// (bsp clocks with backup workers, asp/ssp on arrival, n-softsync batches).
#include <algorithm>

#include <fmt/ranges.h>

#include "braid/base/log.h"
#include "braid/ps/server_impl.h"

namespace braid::ps {

int64_t Server::Impl::slowest() const {
  int64_t s = -1;
  for (const WorkerState& w : workers) {
    if (w.status != Status::live || w.silent || w.pushed_last) continue;
    s = s < 0 ? w.clock : std::min(s, w.clock);
  }
  return s < 0 ? applied_clock : s;
}

int64_t Server::Impl::pushed_clocks() const {
  int64_t n = 0;
  for (const WorkerState& w : workers) n += w.clock;
  return n;
}

bool Server::Impl::barrier_reached(int64_t clock) const {
  if (config->barrier == 0) return true;
  // Finished workers count as arrived; gone ones lower the bar (the job goes on without them).
  int64_t reached = 0;
  for (const WorkerState& w : workers) {
    if (w.status == Status::done || w.pushed_last || (w.status == Status::live && w.clock >= clock)) ++reached;
  }
  return reached >= std::min<int64_t>(config->barrier, o.workers - gone_workers());
}

std::vector<int> Server::Impl::missing_for(int64_t clock) const {
  std::vector<int> m;
  auto it = pending.find(clock);
  for (size_t w = 0; w < workers.size(); ++w) {
    if (workers[w].status == Status::done || workers[w].pushed_last) continue;
    if (it == pending.end() || !it->second.pushed.count(static_cast<int>(w))) m.push_back(static_cast<int>(w));
  }
  return m;
}

bool Server::Impl::gate_open(int64_t clock, bool dense) const {
  if (dense && !initialized) return false;
  if (clock < 0) return true;
  switch (config->consistency) {
    case Consistency::bsp: return applied_clock >= clock;
    case Consistency::ssp: return slowest() >= clock - config->staleness && barrier_reached(clock);
    default: return true;
  }
}

void Server::Impl::set_fatal(std::exception_ptr e) {
  if (!fatal) fatal = e;
  cv.notify_all();
}

void Server::Impl::wait_gate(std::unique_lock<std::mutex>& lock, int worker, int64_t clock, bool dense) {
  // bsp waits for every live worker's push, each due within the timeout. ssp
  // may first have to notice a silent worker (after `timeout`) before it can
  // let this one go, and the first pull waits for worker 0's weights: twice
  // the timeout. The worker waits as long for the answer (client.cc): give up
  // a little earlier, so that our error, naming whom we waited for, reaches it
  // first; past its wait the worker names this server as the one that did not answer.
  const bool bsp_clock = config->consistency == Consistency::bsp && clock >= 0 && (!dense || initialized);
  const Duration held_for = timeout() * (bsp_clock ? 1 : 2) -
                            std::clamp<Duration>(timeout() / 10, std::chrono::milliseconds(10), std::chrono::seconds(2));
  const Deadline deadline = Deadline::after(held_for);
  const Duration slice = std::min<Duration>(std::chrono::seconds(1), timeout() / 4);
  WorkerState& me = workers[static_cast<size_t>(worker)];
  me.held = true;
  while (!fatal && !gate_open(clock, dense)) {
    if (deadline.expired()) {
      me.held = false;
      if (dense && !initialized) {
        fail<TimeoutError>("{}: no worker sent the initial weights within {}", who(), format_duration(held_for));
      }
      std::string msg = config->consistency == Consistency::bsp
                            ? fmt::format("{}: bsp clock {} waited {} for workers {}", who(), clock - 1,
                                          format_duration(held_for), missing_for(clock - 1))
                            : fmt::format("{}: worker {} at clock {} waited {} for the slowest worker (clock {}){}",
                                          who(), worker, clock, format_duration(held_for), slowest(),
                                          config->barrier > 0 ? fmt::format(" or a barrier of {} workers at clock {}",
                                                                            config->barrier, clock)
                                                              : std::string());
      set_fatal(std::make_exception_ptr(TimeoutError(msg)));
      break;
    }
    cv.wait_until(lock, std::min(deadline.at(), Clock::now() + slice));
    me.last_heard = Clock::now();
    note_silent_workers();
  }
  me.held = false;
  if (fatal) std::rethrow_exception(fatal);
}

void Server::Impl::note_silent_workers() {
  if (config && config->consistency == Consistency::bsp) return;
  const auto now = Clock::now();
  for (size_t w = 0; w < workers.size(); ++w) {
    WorkerState& s = workers[w];
    if (s.status == Status::live && !s.silent && !s.held && now - s.last_heard > timeout()) {
      s.silent = true;
      stats.gone.push_back(static_cast<int>(w));
      logging::warn("{}: worker {} silent for {}; the staleness bound ignores it from now on", who(), w,
                    format_duration(timeout()));
      cv.notify_all();
    }
  }
}

void Server::Impl::mark_gone(int worker, const std::string& why) {
  std::lock_guard lock(mu);
  WorkerState& w = workers[static_cast<size_t>(worker)];
  if (w.status != Status::live) return;
  w.status = Status::gone;
  stats.gone.push_back(worker);
  if (config && config->consistency == Consistency::bsp && gone_workers() > config->backup_workers) {
    set_fatal(std::make_exception_ptr(PeerError(fmt::format(
        "{}: worker {} (rank {}) is gone at clock {} ({}); bsp with {} backup workers cannot go on without it", who(),
        worker, rank_of(worker), w.clock, why, config->backup_workers))));
    return;
  }
  logging::warn("{}: worker {} (rank {}) is gone at clock {} ({}); training goes on without it", who(), worker,
                rank_of(worker), w.clock, why);
  if (config && config->consistency == Consistency::bsp) {
    // Called from serving threads outside their request's try: what completing
    // the clocks throws (a checkpoint that cannot be written) ends the server
    // with that error rather than escaping the thread.
    try {
      complete_clocks();
    } catch (const std::exception&) {
      set_fatal(std::current_exception());
    }
  }
  cv.notify_all();
}

int64_t Server::Impl::live_workers() const {
  return std::count_if(workers.begin(), workers.end(), [](const WorkerState& w) { return w.status == Status::live; });
}

int64_t Server::Impl::training_workers() const {
  return std::count_if(workers.begin(), workers.end(),
                       [](const WorkerState& w) { return w.status == Status::live && !w.silent && !w.pushed_last; });
}

int64_t Server::Impl::gone_workers() const {
  return std::count_if(workers.begin(), workers.end(), [](const WorkerState& w) { return w.status == Status::gone; });
}

void Server::Impl::complete_clocks() {
  const int64_t need = o.workers - config->backup_workers;
  while (true) {
    // The oldest clock pending (after a restart, servers may have checkpointed at different clocks,
    // and the workers continue from the newest).
    auto it = pending.begin();
    if (it == pending.end()) return;
    PendingClock& p = it->second;
    bool everyone = true;
    for (size_t w = 0; w < workers.size(); ++w) {
      const WorkerState& s = workers[w];
      if (s.status == Status::live && !s.pushed_last && !p.pushed.count(static_cast<int>(w))) everyone = false;
    }
    if (static_cast<int64_t>(p.pushed.size()) < need && !everyone) return;
    if (p.pushed.empty()) {
      // Only sparse rows came for this clock, from workers that are gone since
      // (everyone left has finished): nobody's gradient for it is whole. Dropped.
      ++stats.dropped;
    } else {
      const float scale = 1.0f / static_cast<float>(p.pushed.size());
      for (float& g : p.dense) g *= scale;
      shard->apply_dense(p.dense, p.lr);
      for (auto& [table, rows] : p.rows) {
        for (auto& [key, g] : rows) {
          for (float& v : g) v *= scale;
          shard->apply_rows(table, std::span<const uint64_t>(&key, 1), g, p.lr);
        }
      }
      ++stats.updates;
    }
    applied_clock = it->first + 1;
    pending_bytes -= p.bytes;
    pending.erase(it);
    maybe_checkpoint();  // nothing to do for a dropped clock: the shard's version did not move
  }
}

void Server::Impl::flush_softsync() {
  if (soft_count == 0) return;
  const float scale = 1.0f / static_cast<float>(soft_count);
  for (float& g : soft_sum) g *= scale;
  shard->apply_dense(soft_sum, soft_lr);
  ++stats.updates;
  std::fill(soft_sum.begin(), soft_sum.end(), 0.0f);
  soft_count = 0;
  maybe_checkpoint();
}

PendingClock& Server::Impl::pending_clock(int worker, const RequestHeader& h) {
  if (auto it = pending.find(h.clock); it != pending.end()) return it->second;
  PendingClock fresh;
  charge_pending(worker, h, fresh, 256);  // the map node and the set of workers
  return pending.emplace(h.clock, std::move(fresh)).first->second;
}

void Server::Impl::charge_pending(int worker, const RequestHeader& h, PendingClock& p, uint64_t cost) {
  if (pending_bytes > o.max_shard_bytes || cost > o.max_shard_bytes - pending_bytes) {
    fail<ValueError>("{}: worker {} pushed clock {} while clock {} is the oldest not applied; the gradients waiting "
                     "for slower workers would take more than {} bytes (ServerOptions::max_shard_bytes)",
                     who(), worker, h.clock, applied_clock, o.max_shard_bytes);
  }
  pending_bytes += cost;
  p.bytes += cost;
}

void Server::Impl::push_dense(int worker, const RequestHeader& h, std::span<const float> g) {
  WorkerState& w = workers[static_cast<size_t>(worker)];
  w.clock = std::max(w.clock, h.clock + 1);
  ++stats.gradients;
  const int64_t staleness = std::max<int64_t>(0, shard->version() - h.version);
  stats.max_staleness = std::max(stats.max_staleness, staleness);
  switch (config->consistency) {
    case Consistency::bsp: {
      if (h.clock < applied_clock) {
        ++stats.dropped;  // a backup worker's late gradient
        return;
      }
      PendingClock& p = pending_clock(worker, h);
      if (p.dense.empty()) {
        charge_pending(worker, h, p, g.size() * sizeof(float));
        p.dense.assign(g.size(), 0.0f);
      }
      for (size_t i = 0; i < g.size(); ++i) p.dense[i] += g[i];
      p.pushed.insert(worker);
      p.lr = h.lr;
      complete_clocks();
      return;
    }
    case Consistency::softsync: {
      if (soft_sum.empty()) soft_sum.assign(g.size(), 0.0f);
      const float scale = 1.0f / static_cast<float>(std::max<int64_t>(1, staleness));
      for (size_t i = 0; i < g.size(); ++i) soft_sum[i] += scale * g[i];
      soft_lr = h.lr;
      // ceil(W / n) over the workers still in the job (finished ones count; dead ones do not).
      const int64_t members = o.workers - gone_workers();
      const int64_t need = (members + config->softsync_n - 1) / config->softsync_n;
      if (++soft_count >= std::max<int64_t>(1, need)) flush_softsync();
      applied_clock = std::max(applied_clock, h.clock + 1);
      return;
    }
    default:
      shard->apply_dense(g, h.lr);
      ++stats.updates;
      applied_clock = std::max(applied_clock, h.clock + 1);
      maybe_checkpoint();
  }
}

void Server::Impl::push_sparse(int worker, const RequestHeader& h, std::span<const uint64_t> keys,
                               std::span<const float> g) {
  const int table = h.table;
  const auto dim = static_cast<size_t>(shard->table(table).dim);
  if (config->consistency == Consistency::bsp) {
    if (h.clock < applied_clock) {
      ++stats.dropped;
      return;
    }
    PendingClock& p = pending_clock(worker, h);
    auto& rows = p.rows[table];
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = rows.find(keys[i]);
      if (it == rows.end()) {
        charge_pending(worker, h, p, dim * sizeof(float) + 64);  // the sum and its map entry
        it = rows.emplace(keys[i], std::vector<float>(dim, 0.0f)).first;
      }
      for (size_t j = 0; j < dim; ++j) it->second[j] += g[i * dim + j];
    }
    return;
  }
  double lr = h.lr;
  if (config->consistency == Consistency::softsync)
    lr /= static_cast<double>(std::max<int64_t>(1, shard->version() - h.version));
  shard->apply_rows(table, keys, g, lr);
}

void Server::Impl::maybe_checkpoint() {
  if (config->checkpoint_dir.empty() || config->checkpoint_every <= 0) return;
  if (shard->version() - last_checkpoint < config->checkpoint_every) return;
  shard->save(checkpoint_path(), applied_clock);
  last_checkpoint = shard->version();
  logging::info("{}: checkpoint at update {} (clock {})", who(), shard->version(), applied_clock);
}

}  // namespace braid::ps
