// Server::Impl, shared by the two halves of the server: the requests and the
// wire (server.cc) and the consistency model, i.e. worker liveness, pull gates
// and applying gradients (server_clock.cc). Private to braid/ps.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "braid/base/error.h"
#include "braid/ps/config.h"
#include "braid/ps/keyspace.h"
#include "braid/ps/protocol.h"
#include "braid/ps/server.h"
#include "braid/ps/shard.h"

namespace braid::ps {

using Bytes = std::vector<std::byte>;

// A request's or a reply's payload, written over the previous one's memory:
// a vector resized up from empty value-initializes, which zeroed the whole
// model on every push and every pull (a worker's thread alternates pushes,
// with empty replies, and pulls, with empty requests).
struct ReusedBuffer {
  Bytes memory;
  size_t size = 0;
  std::span<std::byte> resize(size_t n) {
    if (memory.size() < n) memory.resize(n);
    size = n;
    return {memory.data(), n};
  }
  std::span<const std::byte> bytes() const { return {memory.data(), size}; }
};

enum class Status { live, done, gone };

struct WorkerState {
  Status status = Status::live;
  int64_t clock = 0;  // clocks pushed so far
  Clock::time_point last_heard = Clock::now();
  bool silent = false;
  bool held = false;  // waiting in a pull gate: present, not silent
  bool pushed_last = false;  // sent await_others: no gate waits for it, as for a finished worker
};

// Gradients of one bsp clock, summed until enough workers pushed it.
struct PendingClock {
  std::vector<float> dense;
  std::set<int> pushed;
  std::map<int, std::unordered_map<uint64_t, std::vector<float>>> rows;  // table -> key -> summed gradient
  double lr = 0;
  uint64_t bytes = 0;  // its share of Impl::pending_bytes
};

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
  std::unique_ptr<comm::codec::Codec> codec;  // decodes dense pushes (config->codec), null for raw f32
  std::vector<float> decoded;                 // a decoded push, reused
  std::string config_text;
  int64_t dense_total = -1;
  std::unique_ptr<Shard> shard;
  bool initialized = false;
  int64_t applied_clock = 0;  // bsp: clocks applied; else the newest clock pushed
  int64_t start_clock = 0;    // where every worker starts: the recovered checkpoint's clock, else 0
  std::map<int64_t, PendingClock> pending;
  // What `pending` holds (bytes, approximately), bounded by o.max_shard_bytes:
  // a worker far ahead of the others (or claiming clocks far ahead) makes it grow.
  uint64_t pending_bytes = 0;
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
    return shard_checkpoint_path(config->checkpoint_dir, index, o.servers);
  }

  // ---- the consistency model (server_clock.cc; all under mu) ----

  // The slowest live, non-silent worker's clock (applied_clock when there is none).
  int64_t slowest() const;
  // Clocks every worker pushed, summed (a finished or dead worker's count stays).
  int64_t pushed_clocks() const;
  // Workers (not done) that have not pushed `clock` yet.
  // ssp with a partial barrier: enough workers reached `clock`.
  bool barrier_reached(int64_t clock) const;
  std::vector<int> missing_for(int64_t clock) const;
  int64_t live_workers() const;
  int64_t gone_workers() const;
  int64_t training_workers() const;  // live, not silent, not pushed_last
  // Whether a pull at `clock` may be answered now (dense pulls also need the initial weights).
  bool gate_open(int64_t clock, bool dense) const;
  // Waits until gate_open, up to twice the timeout; a worker held here is present, not silent.
  void wait_gate(std::unique_lock<std::mutex>& lock, int worker, int64_t clock, bool dense);
  // asp/ssp/softsync: a worker silent for longer than the timeout no longer holds the others back.
  void note_silent_workers();
  // A worker's transport failed or it misbehaved: fatal under bsp unless backup workers cover it.
  // Takes mu itself.
  void mark_gone(int worker, const std::string& why);
  void set_fatal(std::exception_ptr e);

  // bsp: `cost` more bytes are about to be held for clock h.clock; ValueError past the bound.
  void charge_pending(int worker, const RequestHeader& h, PendingClock& p, uint64_t cost);
  // bsp: the pending entry of clock h.clock, made (and charged) when new.
  PendingClock& pending_clock(int worker, const RequestHeader& h);
  void push_dense(int worker, const RequestHeader& h, std::span<const float> g);
  void push_sparse(int worker, const RequestHeader& h, std::span<const uint64_t> keys, std::span<const float> g);
  // bsp: applies every pending clock that enough workers pushed, oldest first.
  void complete_clocks();
  // softsync: applies the gradients accumulated so far.
  void flush_softsync();
  void maybe_checkpoint();

  // ---- requests (server.cc) ----

  void hello(int worker, std::span<const std::byte> payload);
  // ps.resume: this server's own checkpoint, else one built from another server count's (shard_reshard.h).
  void resume_shard(const DenseLayout& layout);
  // Handles one request; the reply payload goes to `out`.
  void handle(int worker, const RequestHeader& h, std::span<const std::byte> payload, ReplyHeader& reply,
              ReusedBuffer& out);
  // The payload size the request may carry; ValueError when it is out of bounds.
  uint64_t expected_bytes(int worker, const RequestHeader& h);
  // Waits for a worker's next request header; false when the worker is gone or the server stops.
  bool next_request(int worker, RequestHeader& h);
  // Serves one worker until it is done or gone, or the server fails. A
  // request the server refuses (bad size, unknown table, a config that
  // disagrees) is answered with the reason, and the worker is then dropped.
  void serve(int worker);
};

}  // namespace braid::ps
