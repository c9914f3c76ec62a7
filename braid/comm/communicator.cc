#include "braid/comm/communicator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>

#include "braid/base/copy_bytes.h"
#include "braid/base/error.h"
#include "braid/base/trace.h"
#include "braid/comm/communicator_impl.h"
#include "braid/comm/device_comm.h"

namespace braid::comm {

namespace {

std::span<std::byte> bytes_of(BufferRef b) { return {b.data, b.bytes()}; }

}  // namespace

Communicator::Impl::Impl(std::shared_ptr<Transport> t, CommOptions o, std::vector<int> m, int r, uint32_t i,
                         std::shared_ptr<CommFamily> f)
    : transport(std::move(t)), options(std::move(o)), members(std::move(m)), rank(r), id(i), family(std::move(f)),
      history(std::make_shared<History>(options.history)),
      arrivals(transport, members, rank, history,
               {.query_tag = p2p_tag(id, kMaxUserTag), .reply_tag = p2p_tag(id, kMaxUserTag + 1),
                .notice_tag = p2p_tag(id, kMaxUserTag + 2),
                .on_query = [family = std::weak_ptr<CommFamily>(family), dir = options.history_dir,
                             me = transport->rank()] {
                  if (auto f = family.lock(); f && !dir.empty()) f->dump_history(dir, me, "a peer asked");
                }}) {
  cost = options.cost.value_or(default_link_cost(transport->name()));
  // Wrappers ("faulty+shm") do not move ranks: judge the innermost transport.
  const std::string kind = transport->name().substr(transport->name().rfind('+') + 1);
  arena_by_default = kind == "shm" || kind == "inproc";
  inter_cost = options.inter_host_cost.value_or(default_link_cost("tcp"));
}

Communicator::Impl::~Impl() {
  std::unique_lock lock(mu);
  // Lazy posts that have not started are taken back; what is queued runs now.
  // Each collective ends by its own timeout, so this wait ends too.
  posts -= family->engine.withdraw_lazy(this);
  if (!queue.empty() && !posted_now) post_now();
  cv.wait(lock, [&] { return posts == 0 && !running && queue.empty(); });
}

SharedArena* Communicator::Impl::arena(Group& g) {
  if (!arena_tried_) {
    arena_tried_ = true;
    arena_ = SharedArena::create(g, options.chunk_bytes);
  }
  const bool usable = arena_ && !arena_->broken();
  arena_usable_.store(usable, std::memory_order_relaxed);
  return usable ? arena_.get() : nullptr;
}

void Communicator::Impl::post_now() {
  posted_now = true;
  ++posts;
  family->engine.post(this);
}

void Communicator::Impl::drain(bool lazy) {
  std::unique_lock lock(mu);
  // A helper running a collective hands what is left back when it is done.
  while (!running && !queue.empty()) run_front(lock, /*on_worker=*/true);
  if (!lazy) posted_now = false;
  --posts;
  cv.notify_all();  // under mu: once it is released, ~Impl may run
}

void Communicator::Impl::run_front(std::unique_lock<std::mutex>& lock, bool on_worker) {
  Task task = std::move(queue.front());
  queue.pop_front();
  running = true;
  lock.unlock();
  task.run(on_worker);
  lock.lock();
  running = false;
}

void Communicator::Impl::help(uint64_t seq) {
  std::unique_lock lock(mu);
  bool ran = false;
  while (!running && !queue.empty() && queue.front().seq <= seq) {
    run_front(lock, /*on_worker=*/false);
    ran = true;
  }
  // Hand what is left to an engine thread; do not wake one for nothing.
  if (ran && !queue.empty() && !posted_now) post_now();
  if (ran) cv.notify_all();  // ~Impl may wait for the queue
}

Work Communicator::Impl::submit(const OpInfo& info, Duration timeout, std::function<void(Group&)> body,
                                bool background) {
  std::unique_lock lock(mu);
  const uint64_t seq = next_seq++;
  // Not recorded in the history: a stream of refusals would push out the failure.
  if (failed.load(std::memory_order_acquire)) return Work::completed(refusal(seq, info));
  history->queued(seq, info);
  Work work([rank = rank, info, seq] {
    return fmt::format("rank {} {} #{} ({}{})", rank, info.op, seq, human_bytes(info.bytes), describe_args(info));
  });
  work.help_with([weak = weak_from_this(), seq](const Work&, Deadline) {
    if (auto self = weak.lock()) self->help(seq);
  });
  queue.push_back({seq, [this, work, seq, info, timeout, body = std::move(body)](bool on_worker) {
    // Queued behind the collective that failed: its messages would meet that one's leftovers.
    if (failed.load(std::memory_order_acquire)) {
      auto refused = refusal(seq, info);
      history->failed(seq, "refused: the communicator had failed");
      work.complete(refused);
      return;
    }
    running_seq.store(seq, std::memory_order_relaxed);
    history->started(seq);
    trace::Span span("comm", info.op);
    if (span) {
      span.arg("seq", seq).arg("bytes", info.bytes).arg("comm", id).arg("ranks", members.size());
      if (info.algorithm) span.arg("algorithm", name(*info.algorithm));
    }
    const auto start = Clock::now();
    // Part of the timeout is kept for asking the other ranks where they are.
    const Duration window = std::clamp<Duration>(timeout / 10, Duration(10ms), Duration(2s));
    Group g(*transport, members, rank, collective_tag(id, seq), Deadline::after(timeout - window), scratch,
            work);
    g.set_on_worker(on_worker);
    g.set_abort(&arrivals.peer_failed(), [this] {
      auto n = arrivals.peer_failure();
      return std::pair<int, std::string>(n->peer, n->op.error.empty() ? n->op.name() : n->op.error);
    });
    try {
      body(g);
      history->done(seq);
      if (span && info.algorithm == Algorithm::automatic) span.arg("algorithm", name(ran.load()));
      work.complete();
    } catch (...) {
      work.complete(fail_collective(seq, start, window, work, std::current_exception()));
      if (span) span.arg("failed", true);
    }
  }});
  // A lazy post starts the collective within Engine::kTick, unless the caller
  // waits for it first and runs it (the usual case). One outstanding post
  // covers everything queued meanwhile.
  if (background) {
    if (!posted_now) post_now();
  } else if (posts == 0) {
    ++posts;
    family->engine.post_lazily(this);
  }
  return work;
}

Communicator::Communicator(std::shared_ptr<Transport> transport, CommOptions options) {
  if (!transport) fail<ValueError>("Communicator needs a transport");
  std::vector<int> members(transport->size());
  for (int r = 0; r < transport->size(); ++r) members[r] = r;
  const int rank = transport->rank();
  impl_ = Impl::create(std::move(transport), std::move(options), std::move(members), rank,
                                 kRootCommunicatorId, std::make_shared<CommFamily>());
}

Communicator::~Communicator() = default;

Communicator::Impl& Communicator::impl() const {
  if (!impl_) fail<ValueError>("empty communicator (this rank is in no group of the split)");
  return *impl_;
}

int Communicator::rank() const { return impl().rank; }
int Communicator::size() const { return static_cast<int>(impl().members.size()); }
int Communicator::transport_rank(int r) const { return impl().members.at(r); }
uint32_t Communicator::id() const { return impl().id; }
const CommOptions& Communicator::options() const { return impl().options; }

LinkCost Communicator::link_cost() const {
  std::lock_guard lock(impl().cost_mu);
  return impl().cost;
}

Algorithm Communicator::Impl::automatic_allreduce(size_t bytes) const {
  if (hosts.load() == 1 && arena_by_default && arena_usable_.load(std::memory_order_relaxed)) {
    return Algorithm::shared_memory;
  }
  std::lock_guard lock(cost_mu);
  return comm::choose_allreduce(static_cast<int>(members.size()), bytes, cost, inter_cost, std::max(1, hosts.load()));
}

Algorithm Communicator::choose_allreduce(size_t bytes) const { return impl().automatic_allreduce(bytes); }

namespace {

void check_root(int root, int p, const char* op) {
  if (root < 0 || root >= p) fail<ValueError>("{}: root {} outside group of {}", op, root, p);
}
void check_blocks(BufferRef whole, BufferRef block, int p, const char* op) {
  if (whole.dtype != block.dtype)
    fail<ValueError>("{}: dtype {} vs {}", op, name(whole.dtype), name(block.dtype));
  if (whole.count != block.count * static_cast<size_t>(p))
    fail<ValueError>("{}: {} elements is not {} ranks x {} elements", op, whole.count, p, block.count);
}

bool on_host(std::initializer_list<BufferRef> bufs) {
  return std::all_of(bufs.begin(), bufs.end(), [](const BufferRef& b) { return b.device.is_cpu(); });
}

}  // namespace

Work Communicator::allreduce(BufferRef buf, AllreduceOptions o) {
  Impl& m = impl();
  check_reducible(buf.dtype);
  if (!on_host({buf})) return device_collectives_for({buf}, "allreduce").allreduce(*this, buf, o.op, m.timeout_or_default(o.timeout));
  const int p = size();
  const OpInfo info{.op = "allreduce", .bytes = buf.bytes(), .dtype = buf.dtype, .reduce = o.op,
                    .algorithm = o.algorithm};
  return m.submit(info, m.timeout_or_default(o.timeout), [&m, buf, o, p](Group& g) {
    const ReduceArgs a{buf.data, buf.count, buf.dtype, o.op, m.options.chunk_bytes};
    Algorithm alg = o.algorithm;
    if (alg == Algorithm::automatic) {
      if (m.hosts == 0) m.discover_hosts(g);
      if (m.hosts == 1 && m.arena_by_default) m.arena(g);  // set up on first use; arena_usable_ says how it went
      alg = m.automatic_allreduce(a.bytes());
      m.ran_with(alg);
    }
    switch (alg) {
      case Algorithm::shared_memory: {
        SharedArena* arena = m.arena(g);
        if (!arena && m.arena_)
          fail<PeerError>("rank {}: the shared-memory arena is unusable after an earlier collective failed in it",
                          g.rank());
        if (!arena)
          fail<ConfigError>("rank {}: the shared_memory all-reduce needs every rank on one host, able to map "
                            "the same /dev/shm segment", g.rank());
        shared_memory_allreduce(g, *arena, a, /*finish=*/true);
        return;
      }
      case Algorithm::ring: ring_allreduce(g, a, /*finish=*/true); return;
      case Algorithm::recursive_doubling: recursive_doubling_allreduce(g, a); break;
      case Algorithm::halving_doubling: halving_doubling_allreduce(g, a); break;
      case Algorithm::binary_tree: binary_tree_allreduce(g, a); break;
      case Algorithm::double_binary_tree: double_binary_tree_allreduce(g, a); break;
      case Algorithm::binary_blocks: binary_blocks_allreduce(g, a); break;
      case Algorithm::direct: direct_allreduce(g, a); break;
      case Algorithm::hierarchical: m.hierarchical_allreduce(g, a); break;
      case Algorithm::automatic: break;
    }
    finish_reduction(a.dtype, a.op, a.data, a.count, p);
  }, o.background && !m.memory_path(o.algorithm));
}

Work Communicator::reduce(BufferRef buf, ReduceOptions o) {
  Impl& m = impl();
  check_reducible(buf.dtype);
  check_root(o.root, size(), "reduce");
  const int p = size();
  const OpInfo info{.op = "reduce", .bytes = buf.bytes(), .dtype = buf.dtype, .reduce = o.op, .root = o.root};
  return m.submit(info, m.timeout_or_default(o.timeout), [&m, buf, o, p](Group& g) {
    const ReduceArgs a{buf.data, buf.count, buf.dtype, o.op, m.options.chunk_bytes};
    binomial_reduce(g, a, o.root);
    if (g.rank() == o.root) finish_reduction(a.dtype, a.op, a.data, a.count, p);
  });
}

Work Communicator::broadcast(BufferRef buf, RootOptions o) {
  Impl& m = impl();
  check_root(o.root, size(), "broadcast");
  if (!on_host({buf})) return device_collectives_for({buf}, "broadcast").broadcast(*this, buf, o.root, m.timeout_or_default(o.timeout));
  return m.submit({.op = "broadcast", .bytes = buf.bytes(), .root = o.root}, m.timeout_or_default(o.timeout),
                  [buf, o](Group& g) { binomial_broadcast(g, bytes_of(buf), o.root); });
}

Work Communicator::reduce_scatter(BufferRef in, BufferRef out, ReduceScatterOptions o) {
  Impl& m = impl();
  check_reducible(in.dtype);
  check_blocks(in, out, size(), "reduce_scatter");
  if (!on_host({in, out})) {
    return device_collectives_for({in, out}, "reduce_scatter").reduce_scatter(*this, in, out, o.op, m.timeout_or_default(o.timeout));
  }
  const OpInfo info{.op = "reduce_scatter", .bytes = in.bytes(), .dtype = in.dtype, .reduce = o.op};
  return m.submit(info, m.timeout_or_default(o.timeout), [&m, in, out, o](Group& g) {
    // The ring reduces in place; work on a copy so `in` survives.
    std::span<std::byte> work = m.staging.get(in.bytes());
    if (in.bytes()) copy_bytes(work.data(), in.data, in.bytes());
    const ReduceArgs a{work.data(), in.count, in.dtype, o.op, m.options.chunk_bytes};
    ring_reduce_scatter(g, a, /*finish=*/true);
    if (out.bytes()) copy_bytes(out.data, a.at(g.rank() * out.count), out.bytes());
  });
}

Work Communicator::allgather(BufferRef in, BufferRef out, TimeoutOptions o) {
  Impl& m = impl();
  check_blocks(out, in, size(), "allgather");
  if (!on_host({in, out})) return device_collectives_for({in, out}, "allgather").allgather(*this, in, out, m.timeout_or_default(o.timeout));
  return m.submit({.op = "allgather", .bytes = out.bytes()}, m.timeout_or_default(o.timeout), [&m, in, out](Group& g) {
    // `in` may already be the rank's block of `out` (ZeRO gathers in place).
    std::byte* mine = out.data + g.rank() * in.bytes();
    if (in.bytes() && mine != in.data) copy_bytes(mine, in.data, in.bytes());
    ring_allgather(g, out.data, Partition{out.count, static_cast<size_t>(g.size())}, itemsize(in.dtype),
                   m.options.chunk_bytes);
  });
}

Work Communicator::allgatherv(BufferRef in, BufferRef out, std::vector<size_t> counts, TimeoutOptions o) {
  Impl& m = impl();
  if (counts.size() != static_cast<size_t>(size()))
    fail<ValueError>("allgatherv: {} counts for {} ranks", counts.size(), size());
  if (in.dtype != out.dtype) fail<ValueError>("allgatherv: dtype {} vs {}", name(in.dtype), name(out.dtype));
  if (in.count != counts[static_cast<size_t>(rank())])
    fail<ValueError>("allgatherv: rank {} passes {} elements, counts say {}", rank(), in.count, counts[rank()]);
  size_t total = 0, before = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) < rank()) before += counts[r];
    total += counts[r];
  }
  if (out.count != total) fail<ValueError>("allgatherv: out has {} elements, counts sum to {}", out.count, total);
  const size_t elem = itemsize(in.dtype);
  std::vector<size_t> bytes(counts.size());
  for (size_t r = 0; r < counts.size(); ++r) bytes[r] = counts[r] * elem;
  // Every rank knows the total, so the recorded size matches across ranks (a desync check compares it).
  return m.submit({.op = "allgatherv", .bytes = out.bytes(), .dtype = in.dtype}, m.timeout_or_default(o.timeout),
                  [&m, in, out, before, elem, bytes = std::move(bytes)](Group& g) {
    std::byte* mine = out.data + before * elem;
    if (in.bytes() && mine != in.data) copy_bytes(mine, in.data, in.bytes());
    ring_allgatherv(g, out.data, bytes, m.options.chunk_bytes);
  });
}

Work Communicator::gather(BufferRef in, BufferRef out, RootOptions o) {
  Impl& m = impl();
  check_root(o.root, size(), "gather");
  if (rank() == o.root) check_blocks(out, in, size(), "gather");
  return m.submit({.op = "gather", .bytes = in.bytes(), .root = o.root}, m.timeout_or_default(o.timeout),
                  [in, out, o](Group& g) { direct_gather(g, bytes_of(in), bytes_of(out), o.root); });
}

Work Communicator::scatter(BufferRef in, BufferRef out, RootOptions o) {
  Impl& m = impl();
  check_root(o.root, size(), "scatter");
  if (rank() == o.root) check_blocks(in, out, size(), "scatter");
  return m.submit({.op = "scatter", .bytes = out.bytes(), .root = o.root}, m.timeout_or_default(o.timeout),
                  [in, out, o](Group& g) { direct_scatter(g, bytes_of(in), bytes_of(out), o.root); });
}

Work Communicator::alltoall(BufferRef in, BufferRef out, TimeoutOptions o) {
  Impl& m = impl();
  if (in.dtype != out.dtype || in.count != out.count || in.count % size() != 0)
    fail<ValueError>("alltoall: in ({} x {}) and out ({} x {}) must match and split into {} blocks", in.count,
                     name(in.dtype), out.count, name(out.dtype), size());
  return m.submit({.op = "alltoall", .bytes = in.bytes()}, m.timeout_or_default(o.timeout),
                  [in, out](Group& g) { pairwise_alltoall(g, bytes_of(in), bytes_of(out)); });
}

Work Communicator::alltoallv(BufferRef in, BufferRef out, std::vector<size_t> send_counts,
                             std::vector<size_t> recv_counts, TimeoutOptions o) {
  Impl& m = impl();
  const auto p = static_cast<size_t>(size());
  if (send_counts.size() != p || recv_counts.size() != p) {
    fail<ValueError>("alltoallv: {} send and {} receive counts for {} ranks", send_counts.size(), recv_counts.size(), p);
  }
  if (in.dtype != out.dtype) fail<ValueError>("alltoallv: dtype {} vs {}", name(in.dtype), name(out.dtype));
  size_t sent = 0, received = 0;
  for (size_t r = 0; r < p; ++r) sent += send_counts[r], received += recv_counts[r];
  if (in.count != sent || out.count != received) {
    fail<ValueError>("alltoallv: in has {} elements and out {}, the counts sum to {} and {}", in.count, out.count,
                     sent, received);
  }
  if (!on_host({in, out})) fail<ValueError>("alltoallv: buffers on a device are not supported");
  const size_t elem = itemsize(in.dtype);
  for (size_t r = 0; r < p; ++r) send_counts[r] *= elem, recv_counts[r] *= elem;
  // The sizes differ per rank by design, so none is recorded (a desync check compares them).
  return m.submit({.op = "alltoallv", .dtype = in.dtype}, m.timeout_or_default(o.timeout),
                  [in, out, s = std::move(send_counts), r = std::move(recv_counts)](Group& g) {
                    pairwise_alltoallv(g, bytes_of(in), s, bytes_of(out), r);
                  });
}

Work Communicator::barrier(TimeoutOptions o) {
  Impl& m = impl();
  return m.submit({.op = "barrier"}, m.timeout_or_default(o.timeout),
                  [](Group& g) { dissemination_barrier(g); });
}

Work Communicator::send(BufferRef buf, int peer, P2POptions o) {
  Impl& m = impl();
  if (o.tag >= kMaxUserTag) fail<ValueError>("send: tag {} is not below 2^39", o.tag);
  check_root(peer, size(), "send");
  if (!on_host({buf})) return device_collectives_for({buf}, "send").send(*this, buf, peer, m.options.timeout);
  return m.transport->send(m.members[peer], p2p_tag(m.id, o.tag), bytes_of(buf));
}

Work Communicator::recv(BufferRef buf, int peer, P2POptions o) {
  Impl& m = impl();
  if (o.tag >= kMaxUserTag) fail<ValueError>("recv: tag {} is not below 2^39", o.tag);
  check_root(peer, size(), "recv");
  if (!on_host({buf})) return device_collectives_for({buf}, "recv").recv(*this, buf, peer, m.options.timeout);
  return m.transport->recv(m.members[peer], p2p_tag(m.id, o.tag), bytes_of(buf));
}

}  // namespace braid::comm
