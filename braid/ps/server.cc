// A parameter server's requests and the wire: hello, the per-request handling,
// payload bounds, and one serving thread per worker (server_clock.cc holds the
// consistency model).
#include "braid/ps/server.h"

#include <cstring>
#include <thread>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "braid/base/json_number.h"
#include "braid/base/log.h"
#include "braid/base/thread_name.h"
#include "braid/ps/keyspace.h"
#include "braid/ps/server_impl.h"
#include "braid/ps/shard_reshard.h"

namespace braid::ps {

namespace {

template <class T>
std::span<const T> view(std::span<const std::byte> b, size_t offset, size_t count) {
  return {reinterpret_cast<const T*>(b.data() + offset), count};
}

Bytes text_bytes(const std::string& msg) {
  const auto* p = reinterpret_cast<const std::byte*>(msg.data());
  return Bytes(p, p + msg.size());
}

}  // namespace

void Server::Impl::hello(int worker, std::span<const std::byte> payload) {
  nlohmann::json j;
  std::string text;
  int64_t total = 0;
  try {
    j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(payload.data()), payload.size()));
    text = j.at("config").dump();
    total = json_integer<int64_t>(j.at("dense_total"));
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(fmt::format("{}: worker {} sent a malformed hello: {}", who(), worker, e.what()));
  }
  // 2^48 values (1 PiB) is past any model, and keeps DenseLayout's total * server from overflowing.
  if (total < 0 || total > (int64_t{1} << 48))
    throw ValueError(fmt::format("{}: worker {} sent a hello for {} dense values", who(), worker, total));
  if (config) {
    if (text != config_text || total != dense_total)
      throw ValueError(fmt::format("{}: worker {} disagrees with the first worker on the parameter-server "
                                     "configuration or the model size ({} vs {} values)",
                                     who(), worker, total, dense_total));
    return;
  }
  PsConfig c = PsConfig::from_json(j.at("config"));
  c.validate(o.workers);
  if (const double m = server_momentum(c, o.workers); m != c.updater.momentum) {
    logging::info("{}: momentum {:g} instead of optim.momentum = {:g}: under {} with {} workers the servers apply "
                  "several updates for a synchronous job's one (ps.async_momentum = offset)", who(), m,
                  c.updater.momentum, to_string(c.consistency), o.workers);
    c.updater.momentum = m;
  }
  std::unique_ptr<comm::codec::Codec> hello_codec = comm::codec::make_codec(c.codec);
  const DenseLayout layout(total, o.servers);
  auto hello_shard = std::make_unique<Shard>(c, layout.size(index), o.max_shard_bytes);  // refuses a model past the bound
  // Nothing above changed the server, so a refused hello leaves it without a
  // configuration (and the next worker's hello may still set one).
  config = c;
  config_text = text;
  codec = std::move(hello_codec);
  timeout_ns = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(c.timeout_s)).count();
  shard = std::move(hello_shard);
  dense_total = total;
  if (!c.checkpoint_dir.empty() && c.resume) resume_shard(layout);
  shard->set_max_bytes(o.max_shard_bytes);  // a resharded one was built without it
  logging::info("{}: {} dense values [{}, {}), consistency {}, updater {}", who(), layout.size(index),
                layout.begin(index), layout.end(index), to_string(c.consistency), c.updater.name);
}

void Server::Impl::resume_shard(const DenseLayout& layout) {
  int64_t clock = 0;
  // Is the newest complete set another number of servers' (a job resumed
  // with a different ps.servers)? Else this server's own file, if any.
  std::vector<std::string> notes;
  std::optional<ReshardedShard> r = reshard_from_checkpoints(config->checkpoint_dir, index, layout, *config, &notes);
  for (const std::string& n : notes) logging::warn("{}: {}", who(), n);
  if (r) {
    shard = std::move(r->shard);
    clock = r->clock;
    logging::info("{}: resharded its shard from {} checkpoints server-*-of-{} (update {}, clock {})", who(),
                  r->from_servers, r->from_servers, shard->version(), clock);
  } else if (shard->load(checkpoint_path(), &clock)) {
    logging::info("{}: recovered its shard from {} (update {}, clock {})", who(), checkpoint_path(), shard->version(),
                  clock);
  } else {
    return;
  }
  initialized = true;
  applied_clock = start_clock = clock;
  last_checkpoint = shard->version();
  stats.recovered_version = shard->version();
}

void Server::Impl::handle(int worker, const RequestHeader& h, std::span<const std::byte> payload, ReplyHeader& reply,
                          ReusedBuffer& out) {
  std::unique_lock lock(mu);
  if (fatal) std::rethrow_exception(fatal);
  WorkerState& ws = workers[static_cast<size_t>(worker)];
  ws.last_heard = Clock::now();
  if (ws.silent) {
    ws.silent = false;
    logging::info("{}: worker {} is back", who(), worker);
  }
  if (h.op != Op::hello && !config)
    throw ValueError(fmt::format("{}: worker {} sent {} before hello", who(), worker, op_name(h.op)));
  const auto floats = [&](size_t offset, size_t count) { return view<float>(payload, offset, count); };
  out.size = 0;
  switch (h.op) {
    case Op::hello: hello(worker, payload); break;
    case Op::init_dense:
      if (!initialized) {
        std::memcpy(shard->weights().data(), payload.data(), payload.size());
        initialized = true;
        cv.notify_all();
      }
      break;
    case Op::push_dense:
      if (h.flags & kEncodedPush) {  // (checked against the codec with the header)
        decoded.assign(h.count, 0.0f);
        codec->decode_add(payload, comm::codec::flat_layout(h.count), decoded);
        push_dense(worker, h, decoded);
      } else {
        push_dense(worker, h, floats(0, h.count));
      }
      break;
    case Op::pull_dense:
      wait_gate(lock, worker, h.clock, /*dense=*/true);
      std::memcpy(out.resize(shard->weights().size_bytes()).data(), shard->weights().data(),
                  shard->weights().size_bytes());
      break;
    case Op::define_table: {
      int64_t dim = 0;
      double init_std = 0;
      try {
        const auto j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(payload.data()), payload.size()));
        dim = json_integer<int64_t>(j.at("dim"));
        init_std = j.at("init_std").get<double>();
      } catch (const nlohmann::json::exception& e) {
        throw ValueError(fmt::format("{}: worker {} sent a malformed define_table: {}", who(), worker, e.what()));
      }
      shard->define_table(h.table, dim, init_std);
      break;
    }
    case Op::push_sparse:
      push_sparse(worker, h, view<uint64_t>(payload, 0, h.count), floats(h.count * 8, (payload.size() - h.count * 8) / 4));
      break;
    case Op::pull_sparse: {
      wait_gate(lock, worker, h.clock, /*dense=*/false);
      const auto keys = view<uint64_t>(payload, 0, h.count);
      const size_t values = h.count * static_cast<size_t>(shard->table(h.table).dim);
      shard->read_rows(h.table, keys, {reinterpret_cast<float*>(out.resize(values * sizeof(float)).data()), values});
      break;
    }
    case Op::done:
      ws.status = Status::done;
      logging::info("{}: worker {} finished", who(), worker);
      if (config->consistency == Consistency::bsp) complete_clocks();
      if (live_workers() == 0 && config->consistency == Consistency::softsync) flush_softsync();
      break;
    case Op::await_others:
      ws.pushed_last = true;  // the gates go on without it, as without a finished worker
      if (config->consistency == Consistency::bsp) complete_clocks();
      note_silent_workers();  // a hung worker must not hold up the one waiting here
      break;
  }
  cv.notify_all();
  reply.version = shard ? shard->version() : 0;
  // A worker's first clock is the job's start, not what the others reached
  // meanwhile (with backup workers they may be clocks ahead of a slow starter).
  reply.clock = h.op == Op::hello ? start_clock : applied_clock;
  reply.slowest = slowest();
  reply.training = training_workers();
  reply.pushes = pushed_clocks();
  reply.bytes = out.size;
}

uint64_t Server::Impl::expected_bytes(int worker, const RequestHeader& h) {
  std::lock_guard lock(mu);
  const auto dense = [&] { return shard ? static_cast<uint64_t>(shard->dense_size()) * 4 : 0; };
  const auto dim = [&]() -> uint64_t {
    if (!shard || !shard->has_table(h.table))
      throw ValueError(fmt::format("{}: worker {} used table {} before defining it", who(), worker, h.table));
    return static_cast<uint64_t>(shard->table(h.table).dim);
  };
  if (h.op != Op::hello && !config)
    throw ValueError(fmt::format("{}: worker {} sent {} before hello", who(), worker, op_name(h.op)));
  // Clocks count steps: one past 2^62 is a corrupt or hostile header (and would overflow clock + 1).
  if ((h.op == Op::push_dense || h.op == Op::push_sparse) && (h.clock < 0 || h.clock >= (int64_t{1} << 62)))
    throw ValueError(fmt::format("{}: worker {} pushed clock {}", who(), worker, h.clock));
  // A version is one the server sent (>= 0); a negative one overflowed the staleness (version - h.version).
  if ((h.op == Op::push_dense || h.op == Op::push_sparse) && h.version < 0)
    throw ValueError(fmt::format("{}: worker {} pushed against version {}", who(), worker, h.version));
  // Compared by counts, not count * 4: a count near 2^62 would wrap to the right byte size.
  const bool dense_count = shard && h.count == static_cast<uint64_t>(shard->dense_size());
  switch (h.op) {
    case Op::hello:
    case Op::define_table:
      if (h.bytes > kMaxJsonBytes) break;
      return h.bytes;
    case Op::init_dense:  // always raw f32
      if (!dense_count || h.bytes != dense()) break;
      return h.bytes;
    case Op::push_dense:
      if (!dense_count) break;
      // Encoded (only with a codec): no codec's message exceeds 8 bytes a
      // value (top-k at ratio 1) plus a header; else raw f32.
      if (h.flags & ~kEncodedPush) break;
      if (h.flags & kEncodedPush ? !codec || h.bytes > 2 * dense() + 4096 : h.bytes != dense()) break;
      return h.bytes;
    case Op::pull_dense:
    case Op::done:
    case Op::await_others:
      if (h.bytes != 0) break;
      return 0;
    case Op::push_sparse:
    case Op::pull_sparse: {
      // dim() <= kMaxTableDim and count <= kMaxKeys: no product here overflows.
      if (h.count > kMaxKeys) break;
      const uint64_t values = h.count * dim() * 4;  // the push's gradient or the pull's reply
      if (h.bytes != h.count * 8 + (h.op == Op::push_sparse ? values : 0)) break;
      if (h.bytes > o.max_message || values > o.max_message) {
        throw ValueError(fmt::format("{}: worker {} sent {} of {} keys ({} bytes of rows), past the server's limit of "
                                     "{} bytes a message", who(), worker, op_name(h.op), h.count, values,
                                     o.max_message));
      }
      return h.bytes;
    }
    default:
      throw ValueError(fmt::format("{}: worker {} sent unknown op {}", who(), worker, static_cast<uint32_t>(h.op)));
  }
  throw ValueError(fmt::format("{}: worker {} sent {} with {} bytes for {} values; refused", who(), worker,
                                 op_name(h.op), h.bytes, h.count));
}

bool Server::Impl::next_request(int worker, RequestHeader& h) {
  comm::Work r = t.recv(rank_of(worker), kRequestTag, std::as_writable_bytes(std::span(&h, 1)));
  while (true) {
    try {
      r.wait(Deadline::after(std::chrono::seconds(1)));
      return true;
    } catch (const TimeoutError&) {
      std::unique_lock lock(mu);
      if (fatal) return false;
      note_silent_workers();
      // Silent while every other worker is through: nothing waits for it, and
      // the server would otherwise serve it for ever (a SIGSTOPped asp worker
      // kept the whole job alive). Gone: the server can finish.
      const WorkerState& me = workers[static_cast<size_t>(worker)];
      if (me.silent && me.status == Status::live && live_workers() == 1) {
        const std::string why = fmt::format("silent for {} while every other worker finished",
                                            format_duration(Clock::now() - me.last_heard));
        lock.unlock();
        mark_gone(worker, why);
        return false;
      }
    } catch (const Error& e) {
      mark_gone(worker, e.what());
      return false;
    }
  }
}

void Server::Impl::serve(int worker) {
  const int peer = rank_of(worker);
  // Reused across requests: a fresh multi-MiB buffer per request costs page faults and zeroing.
  ReusedBuffer payload, out;
  while (true) {
    RequestHeader h;
    if (!next_request(worker, h)) return;
    if (h.magic != kMagic) {
      mark_gone(worker, "it sent a request without the protocol's magic number");
      return;
    }
    ReplyHeader reply;
    bool refused = false, failed = false;
    std::string why;  // of a refusal, repeated in the server's own error (a killed worker may not print it)
    try {
      const std::span<std::byte> data = payload.resize(expected_bytes(worker, h));
      if (!data.empty()) {
        try {
          t.recv(peer, kRequestDataTag, data).wait(Deadline::after(timeout()));
        } catch (const Error& e) {
          mark_gone(worker, e.what());
          return;
        }
      }
      handle(worker, h, data, reply, out);
    } catch (const std::exception& e) {
      std::lock_guard lock(mu);
      // The shard's own failures (a checkpoint that cannot be written) and
      // the job's (a clock that timed out) end the server; the rest is the
      // worker's fault.
      failed = fatal || dynamic_cast<const IoError*>(&e) != nullptr;
      if (failed) set_fatal(fatal ? fatal : std::current_exception());
      refused = !failed;
      if (refused) why = e.what();
      reply = ReplyHeader{.status = 1};
      const Bytes text = text_bytes(e.what());
      std::memcpy(out.resize(text.size()).data(), text.data(), text.size());
      reply.bytes = out.size;
    }
    try {
      comm::Work hw = t.send(peer, kReplyTag, std::as_bytes(std::span(&reply, 1)));
      if (out.size > 0) t.send(peer, kReplyDataTag, out.bytes()).wait(Deadline::after(timeout()));
      hw.wait(Deadline::after(timeout()));
    } catch (const Error& e) {
      mark_gone(worker, e.what());
      return;
    }
    if (refused) {
      mark_gone(worker, fmt::format("its {} was refused: {}", op_name(h.op), why));
      return;
    }
    if (failed || h.op == Op::done) return;
  }
}

Server::Server(comm::Transport& transport, ServerOptions options)
    : impl_(std::make_unique<Impl>(transport, options)) {}

Server::~Server() = default;

void Server::run() {
  Impl& s = *impl_;
  std::vector<std::thread> threads;
  for (int w = 0; w < s.o.workers; ++w) {
    threads.emplace_back([&s, w] {
      name_this_thread(fmt::format("ps-serve:{}", w));
      s.serve(w);
    });
  }
  for (auto& th : threads) th.join();
  std::lock_guard lock(s.mu);
  if (s.fatal) std::rethrow_exception(s.fatal);
  if (s.config && s.config->consistency == Consistency::softsync) s.flush_softsync();
  if (s.config && !s.config->checkpoint_dir.empty() && s.shard) s.shard->save(s.checkpoint_path(), s.applied_clock);
  s.stats.clock = s.applied_clock;
  logging::info("{}: done: {} updates from {} gradients, {} late gradients dropped, max staleness {}", s.who(),
                s.stats.updates, s.stats.gradients, s.stats.dropped, s.stats.max_staleness);
}

ServerStats Server::stats() const {
  std::lock_guard lock(impl_->mu);
  ServerStats s = impl_->stats;
  s.clock = impl_->applied_clock;
  return s;
}

}  // namespace braid::ps
