#include "braid/ps/server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/ps/config.h"
#include "braid/ps/keyspace.h"
#include "braid/ps/protocol.h"
#include "braid/ps/shard.h"

namespace braid::ps {

namespace {

using Bytes = std::vector<std::byte>;

enum class Status { live, done, gone };

struct WorkerState {
  Status status = Status::live;
  int64_t clock = 0;  // clocks pushed so far
  Clock::time_point last_heard = Clock::now();
  bool silent = false;
  bool held = false;  // waiting in a pull gate: present, not silent
};

// Gradients of one bsp clock, summed until enough workers pushed it.
struct PendingClock {
  std::vector<float> dense;
  std::set<int> pushed;
  std::map<int, std::unordered_map<uint64_t, std::vector<float>>> rows;  // table -> key -> summed gradient
  double lr = 0;
};

template <class T>
std::span<const T> view(std::span<const std::byte> b, size_t offset, size_t count) {
  return {reinterpret_cast<const T*>(b.data() + offset), count};
}

}  // namespace

struct Server::Impl {
  comm::Transport& t;
  ServerOptions o;
  const int index;
  // options.timeout until the first hello, then the job's (read without the lock).
  std::atomic<Duration::rep> timeout_ns;
  Duration timeout() const { return Duration(timeout_ns.load()); }

  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<WorkerState> workers;
  std::optional<PsConfig> config;
  std::string config_text;
  int64_t dense_total = -1;
  std::unique_ptr<Shard> shard;
  bool initialized = false;
  int64_t applied_clock = 0;  // bsp: clocks applied; else the newest clock pushed
  int64_t start_clock = 0;    // where every worker starts: the recovered checkpoint's clock, else 0
  std::map<int64_t, PendingClock> pending;
  std::vector<float> soft_sum;  // softsync accumulation
  int64_t soft_count = 0;
  double soft_lr = 0;
  int64_t last_checkpoint = 0;
  ServerStats stats;
  std::exception_ptr fatal;

  Impl(comm::Transport& transport, ServerOptions options)
      : t(transport),
        o(options),
        index(transport.rank()),
        timeout_ns(options.timeout.count()),
        workers(static_cast<size_t>(options.workers)) {
    if (index < 0 || index >= o.servers)
      fail<ConfigError>("ps server: transport rank {} is not a server rank (servers are 0..{})", index, o.servers - 1);
    if (t.size() != o.servers + o.workers)
      fail<ConfigError>("ps server {}: the transport has {} ranks, expected {} servers + {} workers", index, t.size(),
                        o.servers, o.workers);
  }

  std::string who() const { return fmt::format("ps server {}", index); }
  int rank_of(int worker) const { return o.servers + worker; }

  std::string checkpoint_path() const {
    return fmt::format("{}/server-{}-of-{}.safetensors", config->checkpoint_dir, index, o.servers);
  }

  // ---- the slowest worker and the clock gates (called under mu) ----

  int64_t slowest() const {
    int64_t s = -1;
    for (const WorkerState& w : workers) {
      if (w.status != Status::live || w.silent) continue;
      s = s < 0 ? w.clock : std::min(s, w.clock);
    }
    return s < 0 ? applied_clock : s;
  }

  std::vector<int> missing_for(int64_t clock) const {
    std::vector<int> m;
    auto it = pending.find(clock);
    for (size_t w = 0; w < workers.size(); ++w) {
      if (workers[w].status == Status::done) continue;
      if (it == pending.end() || !it->second.pushed.count(static_cast<int>(w))) m.push_back(static_cast<int>(w));
    }
    return m;
  }

  bool gate_open(int64_t clock, bool dense) const {
    if (dense && !initialized) return false;
    if (clock < 0) return true;
    switch (config->consistency) {
      case Consistency::bsp: return applied_clock >= clock;
      case Consistency::ssp: return slowest() >= clock - config->staleness;
      default: return true;
    }
  }

  void set_fatal(std::exception_ptr e) {
    if (!fatal) fatal = e;
    cv.notify_all();
  }

  // Waits (under lock) until a pull at `clock` may be answered. A worker
  // held here is present, not silent.
  void wait_gate(std::unique_lock<std::mutex>& lock, int worker, int64_t clock, bool dense) {
    // ssp may first have to notice a silent worker (after `timeout`) before it can let this one go.
    const Deadline deadline = Deadline::after(timeout() * 2);
    const Duration slice = std::min<Duration>(std::chrono::seconds(1), timeout() / 4);
    WorkerState& me = workers[static_cast<size_t>(worker)];
    me.held = true;
    while (!fatal && !gate_open(clock, dense)) {
      if (deadline.expired()) {
        me.held = false;
        if (dense && !initialized) {
          fail<TimeoutError>("{}: no worker sent the initial weights within {}", who(), format_duration(timeout() * 2));
        }
        std::string msg = config->consistency == Consistency::bsp
                              ? fmt::format("{}: bsp clock {} waited {} for workers {}", who(), clock - 1,
                                            format_duration(timeout() * 2), missing_for(clock - 1))
                              : fmt::format("{}: worker {} at clock {} waited {} for the slowest worker (clock {})",
                                            who(), worker, clock, format_duration(timeout() * 2), slowest());
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

  // asp/ssp/softsync: a worker silent for longer than the timeout no longer holds the others back.
  void note_silent_workers() {
    if (config && config->consistency == Consistency::bsp) return;
    const auto now = Clock::now();
    for (size_t w = 0; w < workers.size(); ++w) {
      WorkerState& s = workers[w];
      if (s.status == Status::live && !s.silent && !s.held && now - s.last_heard > timeout()) {
        s.silent = true;
        stats.gone.push_back(static_cast<int>(w));
        log::warn("{}: worker {} silent for {}; the staleness bound ignores it from now on", who(), w,
                  format_duration(timeout()));
        cv.notify_all();
      }
    }
  }

  // ---- applying gradients (under mu) ----

  void complete_clocks() {
    const int64_t need = o.workers - config->backup_workers;
    while (true) {
      // The oldest clock pending (after a restart, servers may have checkpointed at different clocks,
      // and the workers continue from the newest).
      auto it = pending.begin();
      if (it == pending.end()) return;
      PendingClock& p = it->second;
      bool everyone = true;
      for (size_t w = 0; w < workers.size(); ++w) {
        if (workers[w].status == Status::live && !p.pushed.count(static_cast<int>(w))) everyone = false;
      }
      if (static_cast<int64_t>(p.pushed.size()) < need && !everyone) return;
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
      applied_clock = it->first + 1;
      pending.erase(it);
      maybe_checkpoint();
    }
  }

  void flush_softsync() {
    if (soft_count == 0) return;
    const float scale = 1.0f / static_cast<float>(soft_count);
    for (float& g : soft_sum) g *= scale;
    shard->apply_dense(soft_sum, soft_lr);
    ++stats.updates;
    std::fill(soft_sum.begin(), soft_sum.end(), 0.0f);
    soft_count = 0;
    maybe_checkpoint();
  }

  int64_t live_workers() const {
    return std::count_if(workers.begin(), workers.end(), [](const WorkerState& w) { return w.status == Status::live; });
  }

  void push_dense(int worker, const RequestHeader& h, std::span<const float> g) {
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
        PendingClock& p = pending[h.clock];
        if (p.dense.empty()) p.dense.assign(g.size(), 0.0f);
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
        const int64_t members = o.workers - std::count_if(workers.begin(), workers.end(),
                                                          [](const WorkerState& x) { return x.status == Status::gone; });
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

  void push_sparse(const RequestHeader& h, std::span<const uint64_t> keys, std::span<const float> g) {
    const int table = h.table;
    const auto dim = static_cast<size_t>(shard->table(table).dim);
    if (config->consistency == Consistency::bsp) {
      if (h.clock < applied_clock) {
        ++stats.dropped;
        return;
      }
      auto& rows = pending[h.clock].rows[table];
      for (size_t i = 0; i < keys.size(); ++i) {
        auto& acc = rows[keys[i]];
        if (acc.empty()) acc.assign(dim, 0.0f);
        for (size_t j = 0; j < dim; ++j) acc[j] += g[i * dim + j];
      }
      return;
    }
    double lr = h.lr;
    if (config->consistency == Consistency::softsync)
      lr /= static_cast<double>(std::max<int64_t>(1, shard->version() - h.version));
    shard->apply_rows(table, keys, g, lr);
  }

  void maybe_checkpoint() {
    if (config->checkpoint_dir.empty() || config->checkpoint_every <= 0) return;
    if (shard->version() - last_checkpoint < config->checkpoint_every) return;
    shard->save(checkpoint_path(), applied_clock);
    last_checkpoint = shard->version();
    log::info("{}: checkpoint at update {} (clock {})", who(), shard->version(), applied_clock);
  }

  // ---- requests ----

  void hello(int worker, std::span<const std::byte> payload) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(payload.data()), payload.size()));
    } catch (const nlohmann::json::exception& e) {
      throw ValueError(fmt::format("{}: worker {} sent a malformed hello: {}", who(), worker, e.what()));
    }
    const std::string text = j.at("config").dump();
    const int64_t total = j.at("dense_total").get<int64_t>();
    if (config) {
      if (text != config_text || total != dense_total)
        throw ValueError(fmt::format("{}: worker {} disagrees with the first worker on the parameter-server "
                                       "configuration or the model size ({} vs {} values)",
                                       who(), worker, total, dense_total));
      return;
    }
    PsConfig c = PsConfig::from_json(j.at("config"));
    c.validate(o.workers);
    config = c;
    config_text = text;
    timeout_ns = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(c.timeout_s)).count();
    dense_total = total;
    const DenseLayout layout(total, o.servers);
    shard = std::make_unique<Shard>(c, layout.size(index));
    if (!c.checkpoint_dir.empty() && c.resume) {
      int64_t clock = 0;
      if (shard->load(checkpoint_path(), &clock)) {
        initialized = true;
        applied_clock = start_clock = clock;
        last_checkpoint = shard->version();
        stats.recovered_version = shard->version();
        log::info("{}: recovered its shard from {} (update {}, clock {})", who(), checkpoint_path(), shard->version(),
                  clock);
      }
    }
    log::info("{}: {} dense values [{}, {}), consistency {}, updater {}", who(), layout.size(index),
              layout.begin(index), layout.end(index), to_string(c.consistency), c.updater.name);
  }

  // Handles one request; the reply payload goes to `out` (resized, its capacity reused).
  void handle(int worker, const RequestHeader& h, std::span<const std::byte> payload, ReplyHeader& reply, Bytes& out) {
    std::unique_lock lock(mu);
    if (fatal) std::rethrow_exception(fatal);
    WorkerState& ws = workers[static_cast<size_t>(worker)];
    ws.last_heard = Clock::now();
    if (ws.silent) {
      ws.silent = false;
      log::info("{}: worker {} is back", who(), worker);
    }
    if (h.op != Op::hello && !config)
      throw ValueError(fmt::format("{}: worker {} sent {} before hello", who(), worker, op_name(h.op)));
    const auto floats = [&](size_t offset, size_t count) { return view<float>(payload, offset, count); };
    out.clear();
    switch (h.op) {
      case Op::hello: hello(worker, payload); break;
      case Op::init_dense:
        if (!initialized) {
          std::memcpy(shard->weights().data(), payload.data(), payload.size());
          initialized = true;
          cv.notify_all();
        }
        break;
      case Op::push_dense: push_dense(worker, h, floats(0, h.count)); break;
      case Op::pull_dense:
        wait_gate(lock, worker, h.clock, /*dense=*/true);
        out.resize(shard->weights().size_bytes());
        std::memcpy(out.data(), shard->weights().data(), out.size());
        break;
      case Op::define_table: {
        const auto j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(payload.data()), payload.size()));
        shard->define_table(h.table, j.at("dim").get<int64_t>(), j.at("init_std").get<double>());
        break;
      }
      case Op::push_sparse:
        push_sparse(h, view<uint64_t>(payload, 0, h.count), floats(h.count * 8, (payload.size() - h.count * 8) / 4));
        break;
      case Op::pull_sparse: {
        wait_gate(lock, worker, h.clock, /*dense=*/false);
        const auto keys = view<uint64_t>(payload, 0, h.count);
        const size_t values = h.count * static_cast<size_t>(shard->table(h.table).dim);
        out.resize(values * sizeof(float));
        shard->read_rows(h.table, keys, {reinterpret_cast<float*>(out.data()), values});
        break;
      }
      case Op::done:
        ws.status = Status::done;
        log::info("{}: worker {} finished", who(), worker);
        if (config->consistency == Consistency::bsp) complete_clocks();
        if (live_workers() == 0 && config->consistency == Consistency::softsync) flush_softsync();
        break;
    }
    cv.notify_all();
    reply.version = shard ? shard->version() : 0;
    // A worker's first clock is the job's start, not what the others reached
    // meanwhile (with backup workers they may be clocks ahead of a slow starter).
    reply.clock = h.op == Op::hello ? start_clock : applied_clock;
    reply.slowest = slowest();
    reply.bytes = out.size();
  }

  // The payload size the request may carry; ValueError when it is out of bounds.
  uint64_t expected_bytes(int worker, const RequestHeader& h) {
    std::lock_guard lock(mu);
    const auto dense = [&] { return shard ? static_cast<uint64_t>(shard->dense_size()) * 4 : 0; };
    const auto dim = [&]() -> uint64_t {
      if (!shard || !shard->has_table(h.table))
        throw ValueError(fmt::format("{}: worker {} used table {} before defining it", who(), worker, h.table));
      return static_cast<uint64_t>(shard->table(h.table).dim);
    };
    if (h.op != Op::hello && !config)
      throw ValueError(fmt::format("{}: worker {} sent {} before hello", who(), worker, op_name(h.op)));
    switch (h.op) {
      case Op::hello:
      case Op::define_table:
        if (h.bytes > kMaxJsonBytes) break;
        return h.bytes;
      case Op::init_dense:
      case Op::push_dense:
        if (h.count * 4 != dense() || h.bytes != dense()) break;
        return h.bytes;
      case Op::pull_dense:
      case Op::done:
        if (h.bytes != 0) break;
        return 0;
      case Op::push_sparse:
        if (h.count > kMaxKeys || h.bytes != h.count * 8 + h.count * dim() * 4) break;
        return h.bytes;
      case Op::pull_sparse:
        if (h.count > kMaxKeys || h.bytes != h.count * 8) break;
        dim();
        return h.bytes;
      default:
        throw ValueError(fmt::format("{}: worker {} sent unknown op {}", who(), worker, static_cast<uint32_t>(h.op)));
    }
    throw ValueError(fmt::format("{}: worker {} sent {} with {} bytes for {} values; refused", who(), worker,
                                   op_name(h.op), h.bytes, h.count));
  }

  void mark_gone(int worker, const std::string& why) {
    std::lock_guard lock(mu);
    WorkerState& w = workers[static_cast<size_t>(worker)];
    if (w.status != Status::live) return;
    w.status = Status::gone;
    stats.gone.push_back(worker);
    const auto gone = std::count_if(workers.begin(), workers.end(), [](auto& s) { return s.status == Status::gone; });
    if (config && config->consistency == Consistency::bsp && gone > config->backup_workers) {
      set_fatal(std::make_exception_ptr(PeerError(fmt::format(
          "{}: worker {} (rank {}) is gone at clock {} ({}); bsp with {} backup workers cannot go on without it", who(),
          worker, rank_of(worker), w.clock, why, config->backup_workers))));
      return;
    }
    log::warn("{}: worker {} (rank {}) is gone at clock {} ({}); training goes on without it", who(), worker,
              rank_of(worker), w.clock, why);
    if (config && config->consistency == Consistency::bsp) complete_clocks();
    cv.notify_all();
  }

  // Waits for a worker's next request header; false when the worker is gone or the server stops.
  bool next_request(int worker, RequestHeader& h) {
    comm::Work r = t.recv(rank_of(worker), kRequestTag, std::as_writable_bytes(std::span(&h, 1)));
    while (true) {
      try {
        r.wait(Deadline::after(std::chrono::seconds(1)));
        return true;
      } catch (const TimeoutError&) {
        std::lock_guard lock(mu);
        if (fatal) return false;
        note_silent_workers();
      } catch (const Error& e) {
        mark_gone(worker, e.what());
        return false;
      }
    }
  }

  static Bytes text_bytes(const std::string& msg) {
    const auto* p = reinterpret_cast<const std::byte*>(msg.data());
    return Bytes(p, p + msg.size());
  }

  // Serves one worker until it is done or gone, or the server fails. A
  // request the server refuses (bad size, unknown table, a config that
  // disagrees) is answered with the reason, and the worker is then dropped.
  void serve(int worker) {
    const int peer = rank_of(worker);
    // Reused across requests: a fresh multi-MiB buffer per request costs page faults and zeroing.
    Bytes payload, out;
    while (true) {
      RequestHeader h;
      if (!next_request(worker, h)) return;
      if (h.magic != kMagic) {
        mark_gone(worker, "it sent a request without the protocol's magic number");
        return;
      }
      ReplyHeader reply;
      bool refused = false, failed = false;
      try {
        payload.resize(expected_bytes(worker, h));
        if (!payload.empty()) {
          try {
            t.recv(peer, kRequestDataTag, payload).wait(Deadline::after(timeout()));
          } catch (const Error& e) {
            mark_gone(worker, e.what());
            return;
          }
        }
        handle(worker, h, payload, reply, out);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        // The shard's own failures (a checkpoint that cannot be written) and
        // the job's (a clock that timed out) end the server; the rest is the
        // worker's fault.
        failed = fatal || dynamic_cast<const IoError*>(&e) != nullptr;
        if (failed) set_fatal(fatal ? fatal : std::current_exception());
        refused = !failed;
        reply = ReplyHeader{.status = 1};
        out = text_bytes(e.what());
        reply.bytes = out.size();
      }
      try {
        comm::Work hw = t.send(peer, kReplyTag, std::as_bytes(std::span(&reply, 1)));
        if (!out.empty()) t.send(peer, kReplyDataTag, out).wait(Deadline::after(timeout()));
        hw.wait(Deadline::after(timeout()));
      } catch (const Error& e) {
        mark_gone(worker, e.what());
        return;
      }
      if (refused) {
        mark_gone(worker, fmt::format("its {} was refused", op_name(h.op)));
        return;
      }
      if (failed || h.op == Op::done) return;
    }
  }
};

Server::Server(comm::Transport& transport, ServerOptions options)
    : impl_(std::make_unique<Impl>(transport, options)) {}

Server::~Server() = default;

void Server::run() {
  Impl& s = *impl_;
  std::vector<std::thread> threads;
  for (int w = 0; w < s.o.workers; ++w) threads.emplace_back([&s, w] { s.serve(w); });
  for (auto& th : threads) th.join();
  std::lock_guard lock(s.mu);
  if (s.fatal) std::rethrow_exception(s.fatal);
  if (s.config && s.config->consistency == Consistency::softsync) s.flush_softsync();
  if (s.config && !s.config->checkpoint_dir.empty() && s.shard) s.shard->save(s.checkpoint_path(), s.applied_clock);
  s.stats.clock = s.applied_clock;
  log::info("{}: done: {} updates from {} gradients, {} late gradients dropped, max staleness {}", s.who(),
            s.stats.updates, s.stats.gradients, s.stats.dropped, s.stats.max_staleness);
}

ServerStats Server::stats() const {
  std::lock_guard lock(impl_->mu);
  ServerStats s = impl_->stats;
  s.clock = impl_->applied_clock;
  return s;
}

}  // namespace braid::ps
