#include "braid/ps/client.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "braid/base/error.h"
#include "braid/base/trace.h"
#include "braid/ps/protocol.h"

namespace braid::ps {

namespace {

using Bytes = std::vector<std::byte>;

// One server's lane: its exchanges run in order on their own thread.
class Lane {
 public:
  Lane() : thread_([this] { loop(); }) {}
  ~Lane() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

// " at clock 7" for messages; nothing for -1 (a pull that waits for no clock).
std::string at_clock(int64_t clock) { return clock >= 0 ? fmt::format(" at clock {}", clock) : std::string(); }

// Completes `work` once `parts` sub-exchanges finished; the first error wins.
struct Join {
  comm::Work work;
  std::atomic<int> left;
  Join(comm::Work w, int parts) : work(std::move(w)), left(parts) {}
  void finish(std::exception_ptr e) {
    if (e) work.complete(e);
    if (left.fetch_sub(1) == 1) work.complete();
  }
};

}  // namespace

struct Client::Impl {
  comm::Transport& t;
  ClientOptions o;
  int worker;
  DenseLayout layout;
  std::vector<std::atomic<int64_t>> pulled_version, version, clock, slowest, pushes;
  // What answer_within needs to know: set by hello, and once a server's
  // dense weights were pulled (the first pull waits for worker 0's init_dense).
  std::atomic<bool> config_known{false}, ssp{false};
  std::vector<std::atomic<bool>> dense_ready;
  // The first failed exchange with each server (under broken_mu): later ones
  // fail with it at once. The stream with that server is out of step (a late
  // reply would answer the wrong request), and each request queued behind the
  // failed one would otherwise wait out its own timeout: a worker whose push
  // to a stopped server timed out then waited as long again for its pull.
  std::mutex broken_mu;
  std::vector<std::exception_ptr> broken;
  std::vector<std::unique_ptr<Lane>> lanes;
  // Dense pushes through a codec (PsConfig::codec): one state per server
  // range (its error-feedback memory), one encoded message per server in flight.
  std::unique_ptr<comm::codec::Codec> codec;
  std::vector<comm::codec::BucketState> codec_states;
  std::vector<std::vector<std::byte>> messages;
  comm::codec::CodecStats codec_stats;  // guarded by codec_mu
  std::mutex codec_mu;

  Impl(comm::Transport& transport, ClientOptions options)
      : t(transport),
        o(options),
        worker(transport.rank() - options.servers),
        pulled_version(static_cast<size_t>(options.servers)),
        version(static_cast<size_t>(options.servers)),
        clock(static_cast<size_t>(options.servers)),
        slowest(static_cast<size_t>(options.servers)),
        pushes(static_cast<size_t>(options.servers)),
        dense_ready(static_cast<size_t>(options.servers)),
        broken(static_cast<size_t>(options.servers)) {
    if (worker < 0 || o.servers < 1 || t.size() <= o.servers)
      fail<ConfigError>("ps client: transport rank {} of {} is not a worker rank with {} servers", t.rank(), t.size(),
                        o.servers);
    for (int s = 0; s < o.servers; ++s) lanes.push_back(std::make_unique<Lane>());
  }
  ~Impl() { lanes.clear(); }

  std::string who() const { return fmt::format("ps worker {} (rank {})", worker, t.rank()); }

  // How long server s may take to answer this request: the timeout, or
  // twice it where the server may hold the request back for longer than one
  // peer's timeout (server_clock.cc, wait_gate: an ssp gate, the first pull,
  // which waits for worker 0's init_dense, and a hello, which may first
  // recover a shard). A bsp gate waits for pushes, each due within the timeout.
  Duration answer_within(int s, const RequestHeader& h) const {
    if (h.op == Op::hello) return o.timeout * 2;
    if (h.op != Op::pull_dense && h.op != Op::pull_sparse) return o.timeout;
    if (!config_known.load()) return o.timeout * 2;
    if (h.op == Op::pull_dense && !dense_ready[static_cast<size_t>(s)].load()) return o.timeout * 2;
    return h.clock >= 0 && ssp.load() ? o.timeout * 2 : o.timeout;
  }

  // One request/reply with server s, on the calling (lane) thread. `into`
  // receives the reply payload when it has exactly that size; otherwise the
  // payload goes to `spill`. A server that does not answer within
  // answer_within is named in a TimeoutError (one that holds a request back
  // gives up a little earlier and answers with its own error, naming whom it
  // waited for). Before, a stopped server was named by nobody: each worker
  // said `timed out waiting for ps worker 1 (rank 2) pull_dense clock -1`,
  // 3x the timeout later.
  ReplyHeader exchange(int s, RequestHeader h, std::span<const std::byte> payload, std::span<std::byte> into,
                       Bytes* spill = nullptr) {
    {
      std::lock_guard lock(broken_mu);
      if (auto e = broken[static_cast<size_t>(s)]) std::rethrow_exception(e);
    }
    try {
      return exchange_once(s, h, payload, into, spill);
    } catch (const TimeoutError&) {
      break_with(s, std::current_exception());
      throw;
    } catch (const PeerError&) {
      break_with(s, std::current_exception());
      throw;
    }
  }

  void break_with(int s, std::exception_ptr e) {
    std::lock_guard lock(broken_mu);
    if (!broken[static_cast<size_t>(s)]) broken[static_cast<size_t>(s)] = e;
  }

  ReplyHeader exchange_once(int s, RequestHeader h, std::span<const std::byte> payload, std::span<std::byte> into,
                            Bytes* spill) {
    h.worker = worker;
    h.bytes = payload.size();
    trace::Span span("ps", op_name(h.op));
    if (span) span.arg("server", s).arg("clock", h.clock).arg("bytes_out", payload.size()).arg("bytes_in", into.size());
    const std::string what = fmt::format("{} {} with server {}", who(), op_name(h.op), s);
    const Duration within = answer_within(s, h);
    const auto start = Clock::now();
    // Waits for `w` (a transfer with server s) until `d`; a timeout names the server.
    auto await = [&](const comm::Work& w, Deadline d, const char* step) {
      try {
        w.wait(d);
      } catch (const TimeoutError&) {
        fail<TimeoutError>("{} {}: server {} (rank {}) did not answer: {} not done {} after the request{}", who(),
                           op_name(h.op), s, s, step, format_duration(Clock::now() - start),
                           within > o.timeout ? " (which it may hold back for up to twice the timeout)" : "");
      }
    };
    const Deadline send_by = Deadline::after(o.timeout);
    comm::Work hw = t.send(s, kRequestTag, std::as_bytes(std::span(&h, 1)));
    comm::Work pw = payload.empty() ? comm::Work::completed() : t.send(s, kRequestDataTag, payload);
    await(hw, send_by, "sending the request");
    ReplyHeader r;
    await(t.recv(s, kReplyTag, std::as_writable_bytes(std::span(&r, 1))),
          Deadline(start + within), "its reply");
    if (r.magic != kMagic) fail<PeerError>("{}: the reply lacks the protocol's magic number", what);
    if (r.status == 0) {
      await(pw, send_by, "sending the request's payload");
    } else {
      // A server refuses a request before reading its payload, which may then never be taken.
      try {
        pw.wait(Deadline::after(std::chrono::milliseconds(200)));
      } catch (const Error&) {
      }
    }
    if (r.status != 0) {
      if (r.bytes > kMaxJsonBytes) fail<PeerError>("{}: failed (an error reply of {} bytes)", what, r.bytes);
      std::string msg(r.bytes, '\0');
      if (r.bytes) await(t.recv(s, kReplyDataTag, std::as_writable_bytes(std::span(msg))), Deadline::after(o.timeout), "its error message");
      fail<PeerError>("{}: {}", what, msg);
    }
    if (r.bytes > 0) {
      if (r.bytes == into.size()) {
        await(t.recv(s, kReplyDataTag, into), Deadline::after(o.timeout), "its reply's payload");
      } else if (spill && r.bytes <= (uint64_t{1} << 34)) {
        spill->resize(r.bytes);
        await(t.recv(s, kReplyDataTag, *spill), Deadline::after(o.timeout), "its reply's payload");
      } else {
        fail<PeerError>("{}: the reply has {} bytes, expected {}", what, r.bytes, into.size());
      }
    } else if (!into.empty()) {
      fail<PeerError>("{}: the reply is empty, expected {} bytes", what, into.size());
    }
    version[s] = r.version;
    clock[s] = r.clock;
    slowest[s] = r.slowest;
    pushes[s] = r.pushes;
    if (h.op == Op::pull_dense) dense_ready[static_cast<size_t>(s)] = true;
    return r;
  }

  // Runs fn(s) on each listed server's lane; the Work completes when all did.
  comm::Work fan_out(const std::vector<int>& servers, const std::string& what, std::function<void(int)> fn) {
    comm::Work work(what);
    if (servers.empty()) return comm::Work::completed();
    auto join = std::make_shared<Join>(work, static_cast<int>(servers.size()));
    for (int s : servers) {
      lanes[static_cast<size_t>(s)]->post([join, fn, s] {
        std::exception_ptr e;
        try {
          fn(s);
        } catch (...) {
          e = std::current_exception();
        }
        join->finish(e);
      });
    }
    return work;
  }

  std::vector<int> all_servers() const {
    std::vector<int> v(static_cast<size_t>(o.servers));
    for (int s = 0; s < o.servers; ++s) v[static_cast<size_t>(s)] = s;
    return v;
  }

  void check_dense(size_t n, const char* op) const {
    if (static_cast<int64_t>(n) != layout.total())
      fail<ValueError>("{} {}: {} values for a model of {} (call hello first)", who(), op, n, layout.total());
  }

  // Keys split by server: for server s, the positions (in the caller's order) of its keys.
  std::vector<std::vector<size_t>> split(std::span<const uint64_t> keys) const {
    std::vector<std::vector<size_t>> by(static_cast<size_t>(o.servers));
    for (size_t i = 0; i < keys.size(); ++i) by[static_cast<size_t>(server_of_key(keys[i], o.servers))].push_back(i);
    return by;
  }
};

Client::Client(comm::Transport& transport, ClientOptions options)
    : impl_(std::make_unique<Impl>(transport, options)) {}
Client::~Client() = default;

int Client::worker() const { return impl_->worker; }
int Client::workers() const { return impl_->t.size() - impl_->o.servers; }
const DenseLayout& Client::layout() const { return impl_->layout; }

int64_t Client::hello(const PsConfig& config, int64_t dense_total) {
  Impl& c = *impl_;
  c.layout = DenseLayout(dense_total, c.o.servers);
  c.codec = comm::codec::make_codec(config.codec);
  c.codec_states.assign(static_cast<size_t>(c.o.servers), {});
  for (int s = 0; s < c.o.servers; ++s) c.codec_states[s].stream = (static_cast<uint64_t>(c.worker) << 32) | static_cast<uint64_t>(s);
  c.messages.assign(static_cast<size_t>(c.o.servers), {});
  c.ssp = config.consistency == Consistency::ssp;
  c.config_known = true;
  const std::string text = nlohmann::json{{"config", config.to_json()}, {"dense_total", dense_total}}.dump();
  c.fan_out(c.all_servers(), c.who() + " hello", [&c, text](int s) {
    c.exchange(s, {.op = Op::hello}, std::as_bytes(std::span(text)), {});
  }).wait(Deadline::after(c.o.timeout * 2));
  int64_t start = 0;
  for (auto& k : c.clock) start = std::max(start, k.load());
  return start;
}

comm::Work Client::init_dense(std::span<const float> weights) {
  Impl& c = *impl_;
  c.check_dense(weights.size(), "init_dense");
  return c.fan_out(c.all_servers(), c.who() + " init_dense", [&c, weights](int s) {
    const auto part = weights.subspan(static_cast<size_t>(c.layout.begin(s)), static_cast<size_t>(c.layout.size(s)));
    c.exchange(s, {.op = Op::init_dense, .count = part.size()}, std::as_bytes(part), {});
  });
}

comm::Work Client::push_dense(std::span<const float> grads, int64_t clock, double lr) {
  Impl& c = *impl_;
  c.check_dense(grads.size(), "push_dense");
  return c.fan_out(c.all_servers(), c.who() + " push_dense" + at_clock(clock), [&c, grads, clock, lr](int s) {
    const auto part = grads.subspan(static_cast<size_t>(c.layout.begin(s)), static_cast<size_t>(c.layout.size(s)));
    std::span<const std::byte> payload = std::as_bytes(part);
    uint64_t flags = 0;
    if (c.codec) {  // on this server's lane thread: ranges encode in parallel
      comm::codec::BucketState& state = c.codec_states[static_cast<size_t>(s)];
      const auto t0 = std::chrono::steady_clock::now();
      if (!c.codec->plain(state, part.size())) {  // else warming up, or a range below codec.min_elements
        std::vector<std::byte>& m = c.messages[static_cast<size_t>(s)];
        c.codec->encode(part, comm::codec::flat_layout(part.size()), state, m);
        payload = m;
        flags = kEncodedPush;
      }
      state.steps++;
      std::lock_guard lock(c.codec_mu);
      c.codec_stats.add({.raw_bytes = part.size_bytes(), .wire_bytes = payload.size(),
                         .encode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                         .calls = 1});
    }
    c.exchange(s, {.op = Op::push_dense, .clock = clock, .version = c.pulled_version[s].load(), .lr = lr,
                   .count = part.size(), .flags = flags},
               payload, {});
  });
}

comm::Work Client::pull_dense(std::span<float> weights, int64_t clock) {
  Impl& c = *impl_;
  c.check_dense(weights.size(), "pull_dense");
  return c.fan_out(c.all_servers(), c.who() + " pull_dense" + at_clock(clock), [&c, weights, clock](int s) {
    const auto part = weights.subspan(static_cast<size_t>(c.layout.begin(s)), static_cast<size_t>(c.layout.size(s)));
    const ReplyHeader r = c.exchange(s, {.op = Op::pull_dense, .clock = clock}, {}, std::as_writable_bytes(part));
    c.pulled_version[s] = r.version;
  });
}

void Client::define_table(int table, int64_t dim, double init_std) {
  Impl& c = *impl_;
  const std::string text = nlohmann::json{{"dim", dim}, {"init_std", init_std}}.dump();
  c.fan_out(c.all_servers(), fmt::format("{} define_table {}", c.who(), table), [&c, text, table](int s) {
    c.exchange(s, {.op = Op::define_table, .table = table}, std::as_bytes(std::span(text)), {});
  }).wait(Deadline::after(c.o.timeout * 2));
}

comm::Work Client::push_sparse(int table, std::span<const uint64_t> keys, std::span<const float> grads, int64_t clock,
                               double lr) {
  Impl& c = *impl_;
  if (keys.empty()) return comm::Work::completed();
  if (grads.size() % keys.size() != 0)
    fail<ValueError>("{} push_sparse: {} values for {} keys", c.who(), grads.size(), keys.size());
  const size_t dim = grads.size() / keys.size();
  // Packed now (keys, then rows), so the caller's spans are free once this returns.
  auto by = c.split(keys);
  std::vector<int> used;
  auto packed = std::make_shared<std::vector<Bytes>>(static_cast<size_t>(c.o.servers));
  for (int s = 0; s < c.o.servers; ++s) {
    const auto& pos = by[static_cast<size_t>(s)];
    if (pos.empty()) continue;
    used.push_back(s);
    Bytes& b = (*packed)[static_cast<size_t>(s)];
    b.resize(pos.size() * (8 + dim * 4));
    auto* k = reinterpret_cast<uint64_t*>(b.data());
    auto* v = reinterpret_cast<float*>(b.data() + pos.size() * 8);
    for (size_t i = 0; i < pos.size(); ++i) {
      k[i] = keys[pos[i]];
      std::memcpy(v + i * dim, grads.data() + pos[i] * dim, dim * 4);
    }
  }
  auto counts = std::make_shared<std::vector<size_t>>();
  for (auto& p : by) counts->push_back(p.size());
  return c.fan_out(used, fmt::format("{} push_sparse table {}{}", c.who(), table, at_clock(clock)),
                   [&c, packed, counts, table, clock, lr](int s) {
                     c.exchange(s, {.op = Op::push_sparse, .table = table, .clock = clock,
                                    .version = c.pulled_version[s].load(), .lr = lr,
                                    .count = (*counts)[static_cast<size_t>(s)]},
                                (*packed)[static_cast<size_t>(s)], {});
                   });
}

comm::Work Client::pull_sparse(int table, std::span<const uint64_t> keys, std::span<float> rows, int64_t clock) {
  Impl& c = *impl_;
  if (keys.empty()) return comm::Work::completed();
  if (rows.size() % keys.size() != 0)
    fail<ValueError>("{} pull_sparse: room for {} values for {} keys", c.who(), rows.size(), keys.size());
  const size_t dim = rows.size() / keys.size();
  auto by = std::make_shared<std::vector<std::vector<size_t>>>(c.split(keys));
  std::vector<int> used;
  auto request = std::make_shared<std::vector<std::vector<uint64_t>>>(static_cast<size_t>(c.o.servers));
  for (int s = 0; s < c.o.servers; ++s) {
    for (size_t p : (*by)[static_cast<size_t>(s)]) (*request)[static_cast<size_t>(s)].push_back(keys[p]);
    if (!(*by)[static_cast<size_t>(s)].empty()) used.push_back(s);
  }
  return c.fan_out(used, fmt::format("{} pull_sparse table {}{}", c.who(), table, at_clock(clock)),
                   [&c, by, request, rows, dim, table, clock](int s) {
                     const auto& ks = (*request)[static_cast<size_t>(s)];
                     std::vector<float> got(ks.size() * dim);
                     c.exchange(s, {.op = Op::pull_sparse, .table = table, .clock = clock, .count = ks.size()},
                                std::as_bytes(std::span(ks)), std::as_writable_bytes(std::span(got)));
                     const auto& pos = (*by)[static_cast<size_t>(s)];
                     for (size_t i = 0; i < pos.size(); ++i)
                       std::memcpy(rows.data() + pos[i] * dim, got.data() + i * dim, dim * 4);
                   });
}

void Client::done() {
  Impl& c = *impl_;
  c.fan_out(c.all_servers(), c.who() + " done", [&c](int s) { c.exchange(s, {.op = Op::done}, {}, {}); })
      .wait(Deadline::after(c.o.timeout * 2));
}

void Client::wait_for_other_workers(Duration poll) {
  Impl& c = *impl_;
  // Progress: a dense update applied, or one more worker through.
  std::pair<int64_t, int64_t> last{-1, -1};
  Clock::time_point last_progress = Clock::now();
  const auto started = Clock::now();
  while (true) {
    std::vector<int64_t> training(static_cast<size_t>(c.o.servers), 0);
    c.fan_out(c.all_servers(), c.who() + " await_others", [&c, &training](int s) {
      training[static_cast<size_t>(s)] = c.exchange(s, {.op = Op::await_others}, {}, {}).training;
    }).wait(Deadline::after(c.o.timeout * 2));
    // Servers hear of a finished worker one by one: the most any still counts.
    const int64_t others = *std::max_element(training.begin(), training.end());
    if (others <= 0) return;
    if (const std::pair now{view().version, others}; now != last) last = now, last_progress = Clock::now();
    if (Clock::now() - last_progress > c.o.timeout * 2) {
      fail<TimeoutError>("{} waited {} for the other workers to finish: {} still training, and no update reached the "
                         "servers and none finished in the last {}",
                         c.who(), format_duration(Clock::now() - started), others, format_duration(c.o.timeout * 2));
    }
    std::this_thread::sleep_for(poll);
  }
}

comm::codec::CodecStats Client::take_codec_stats() {
  std::lock_guard lock(impl_->codec_mu);
  comm::codec::CodecStats s = impl_->codec_stats;
  impl_->codec_stats = {};
  return s;
}

ServerView Client::view() const {
  const Impl& c = *impl_;
  ServerView v{.version = 0, .clock = INT64_MAX, .slowest = INT64_MAX};
  for (int s = 0; s < c.o.servers; ++s) {
    v.version += c.version[static_cast<size_t>(s)].load();
    v.clock = std::min(v.clock, c.clock[static_cast<size_t>(s)].load());
    v.slowest = std::min(v.slowest, c.slowest[static_cast<size_t>(s)].load());
    v.pushes = std::max(v.pushes, c.pushes[static_cast<size_t>(s)].load());
  }
  return v;
}

}  // namespace braid::ps
