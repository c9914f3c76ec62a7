// An emulated NCCL (emulated.h): the collectives braid/cuda/nccl.cc runs on
// NCCL — all-reduce, reduce-scatter, all-gather, broadcast, send/recv — for
// ranks that are threads of this process over the emulated device's memory
// (host memory), so CI runs multi-GPU plans without a GPU.
//
// Ranks meet per communicator (its id and members) and per call (each rank
// numbers its device collectives, as NCCL orders a communicator's calls): the
// last rank to arrive computes the result from every rank's buffer and writes
// it to every rank's output, then completes each rank's Work. Reductions
// follow braid's ring (comm/algorithms/ring.cc) exactly: segment i of
// Partition{count, p} starts at rank i+1 and takes in ranks i+2, ..., i in
// turn, one reduce_into per rank, then finish_reduction; so a result equals
// the host communicator's ring all-reduce and reduce-scatter bit for bit.
// Send and recv match first-in first-out per (sender, receiver), as NCCL's
// do, and copy when both sides have arrived.
//
// A wait past the collective's timeout aborts the emulated communicator, as
// nccl.cc does the real one: every arrived rank's Work fails with the rank,
// the operation, the bytes, the call's number and the ranks that never came,
// and later calls on it fail at once. reset_collectives() forgets every
// communicator (a test that aborted one calls it before the next world).
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "braid/base/error.h"
#include "braid/comm/algorithms/group.h"
#include "braid/comm/device_comm.h"
#include "braid/comm/history.h"
#include "braid/comm/reduce_op.h"
#include "braid/cuda/emulated.h"
#include "braid/cuda/staged.h"

namespace braid::cuda::emulated {

namespace {

using comm::BufferRef;
using comm::Work;

struct Call {  // one collective, as each rank arrives at it
  std::string op;
  std::vector<BufferRef> in, out;
  std::vector<Work> works;
  std::vector<bool> arrived;
  int count = 0;
  comm::Op reduce = comm::Op::sum;
  int root = 0;
};

struct Message {  // one side of a send/recv
  BufferRef buf;
  Work work;
};

// The emulated NCCL communicator of one braid communicator.
struct Group {
  explicit Group(int p) : next(static_cast<size_t>(p), 0) {}
  std::mutex mu;
  std::vector<uint64_t> next;  // per rank: the number of its next collective
  std::map<uint64_t, std::shared_ptr<Call>> calls;
  std::map<std::pair<int, int>, std::deque<Message>> sends, recvs;  // by (sender, receiver)
  std::string aborted;  // why, once a wait ran past its timeout
};

std::mutex registry_mu;
std::map<std::pair<uint32_t, std::vector<int>>, std::shared_ptr<Group>>& registry() {
  static auto* r = new std::map<std::pair<uint32_t, std::vector<int>>, std::shared_ptr<Group>>;
  return *r;
}

std::shared_ptr<Group> group_of(const comm::Communicator& c) {
  std::vector<int> members(static_cast<size_t>(c.size()));
  for (int r = 0; r < c.size(); ++r) members[static_cast<size_t>(r)] = c.transport_rank(r);
  std::lock_guard lock(registry_mu);
  auto& g = registry()[{c.id(), std::move(members)}];
  if (!g) g = std::make_shared<Group>(c.size());
  return g;
}

std::byte* at(BufferRef b, size_t element) { return b.data + element * itemsize(b.dtype); }

// Segment `seg` of every rank's `in` (elements [first, first + n)) reduced in
// the ring's order into `acc`.
void ring_order_reduce(const Call& call, size_t first, size_t n, int seg, std::byte* acc) {
  const int p = static_cast<int>(call.in.size());
  const DType t = call.in[0].dtype;
  std::memcpy(acc, at(call.in[static_cast<size_t>((seg + 1) % p)], first), n * itemsize(t));
  for (int k = 2; k <= p; ++k) {
    comm::reduce_into(t, call.reduce, acc, at(call.in[static_cast<size_t>((seg + k) % p)], first), n);
  }
  comm::finish_reduction(t, call.reduce, acc, n, p);
}

// Every rank has arrived: the results into every rank's output.
void compute(const Call& call) {
  const size_t p = call.in.size();
  const BufferRef first = call.in[0];
  std::vector<std::byte> result;
  if (call.op == "allreduce") {
    const comm::Partition seg{first.count, p};
    result.resize(first.bytes());
    for (size_t i = 0; i < p; ++i) {
      if (seg.size(i)) ring_order_reduce(call, seg.offset(i), seg.size(i), static_cast<int>(i), at({result.data(), 0, first.dtype}, seg.offset(i)));
    }
    for (const BufferRef& o : call.out) std::memcpy(o.data, result.data(), result.size());
  } else if (call.op == "reduce_scatter") {
    const size_t n = call.out[0].count;
    std::vector<std::vector<std::byte>> blocks(p, std::vector<std::byte>(call.out[0].bytes()));
    for (size_t i = 0; i < p; ++i) {
      if (n) ring_order_reduce(call, i * n, n, static_cast<int>(i), blocks[i].data());
    }
    for (size_t i = 0; i < p; ++i) std::memcpy(call.out[i].data, blocks[i].data(), blocks[i].size());
  } else if (call.op == "allgather") {
    for (const BufferRef& b : call.in) result.insert(result.end(), b.data, b.data + b.bytes());
    for (const BufferRef& o : call.out) std::memcpy(o.data, result.data(), result.size());
  } else {  // broadcast
    const BufferRef& src = call.in[static_cast<size_t>(call.root)];
    result.assign(src.data, src.data + src.bytes());
    for (const BufferRef& o : call.out) std::memcpy(o.data, result.data(), result.size());
  }
}

// Fails every arrived, unfinished Work of `g` and refuses later calls.
// Caller holds g.mu; returns the Works to complete once it is released.
std::vector<Work> abort_locked(Group& g, const std::string& why) {
  g.aborted = why;
  std::vector<Work> out;
  for (auto& [seq, call] : g.calls) {
    for (size_t r = 0; r < call->works.size(); ++r) {
      if (call->arrived[r]) out.push_back(call->works[r]);
    }
  }
  for (auto* queues : {&g.sends, &g.recvs}) {
    for (auto& [pair, q] : *queues) {
      for (Message& m : q) out.push_back(m.work);
    }
  }
  g.calls.clear();
  g.sends.clear();
  g.recvs.clear();
  return out;
}

void fail_all(const std::vector<Work>& works, const std::string& why) {
  for (const Work& w : works) w.complete(std::make_exception_ptr(TimeoutError(why)));
}

// The waiter's side of a Work: past the collective's deadline, abort the
// group naming what never came (`missing` says, under g.mu).
template <class Missing>
void watch(const Work& work, std::shared_ptr<Group> g, Deadline deadline, std::string what, Missing missing) {
  work.help_with([g = std::move(g), deadline, what = std::move(what), missing](const Work& w, Deadline wait_deadline) {
    while (!w.done()) {
      if (deadline.expired()) {
        std::vector<Work> failed;
        std::string why;
        {
          std::lock_guard lock(g->mu);
          if (w.done()) return;
          why = fmt::format("{}: not finished within its timeout ({}); the emulated NCCL communicator was aborted",
                            what, missing());
          failed = abort_locked(*g, why);
        }
        failed.push_back(w);
        fail_all(failed, why);
        return;
      }
      if (wait_deadline.expired()) return;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
}

class EmulatedNccl final : public comm::DeviceCollectives {
 public:
  Work allreduce(const comm::Communicator& c, BufferRef buf, comm::Op op, Duration timeout) override {
    return collective(c, "allreduce", buf, buf, timeout, op, 0);
  }
  Work broadcast(const comm::Communicator& c, BufferRef buf, int root, Duration timeout) override {
    return collective(c, "broadcast", buf, buf, timeout, comm::Op::sum, root);
  }
  Work reduce_scatter(const comm::Communicator& c, BufferRef in, BufferRef out, comm::Op op,
                      Duration timeout) override {
    return collective(c, "reduce_scatter", in, out, timeout, op, 0);
  }
  Work allgather(const comm::Communicator& c, BufferRef in, BufferRef out, Duration timeout) override {
    return collective(c, "allgather", in, out, timeout, comm::Op::sum, 0);
  }
  Work send(const comm::Communicator& c, BufferRef buf, int peer, Duration timeout) override {
    return p2p(c, buf, c.rank(), peer, /*sending=*/true, timeout);
  }
  Work recv(const comm::Communicator& c, BufferRef buf, int peer, Duration timeout) override {
    return p2p(c, buf, peer, c.rank(), /*sending=*/false, timeout);
  }

 private:
  Work collective(const comm::Communicator& c, const char* op, BufferRef in, BufferRef out, Duration timeout,
                  comm::Op reduce, int root) {
    launch(op);
    const int p = c.size(), r = c.rank();
    std::shared_ptr<Group> g = group_of(c);
    std::shared_ptr<Call> call;
    uint64_t seq = 0;
    Work work;
    std::vector<Work> finished;
    {
      std::lock_guard lock(g->mu);
      if (!g->aborted.empty()) {
        return Work::completed(std::make_exception_ptr(
            PeerError(fmt::format("rank {} emulated NCCL {}: the communicator was aborted after: {}", r, op, g->aborted))));
      }
      seq = g->next[static_cast<size_t>(r)]++;
      work = Work(fmt::format("rank {} emulated NCCL {} #{} ({} bytes on {})", r, op, seq, out.bytes(), name(out.device)));
      auto& slot = g->calls[seq];
      if (!slot) {
        slot = std::make_shared<Call>();
        slot->op = op;
        slot->reduce = reduce;
        slot->root = root;
        slot->in.resize(static_cast<size_t>(p));
        slot->out.resize(static_cast<size_t>(p));
        slot->works.resize(static_cast<size_t>(p));
        slot->arrived.assign(static_cast<size_t>(p), false);
      }
      call = slot;
      if (call->op != op || call->reduce != reduce || call->root != root) {
        const std::string why = fmt::format("rank {} called emulated NCCL {} as call #{}, another rank {}", r, op, seq,
                                            call->op);
        std::vector<Work> failed = abort_locked(*g, why);
        failed.push_back(work);
        for (const Work& w : failed) w.complete(std::make_exception_ptr(comm::DesyncError(why)));
        return work;
      }
      call->in[static_cast<size_t>(r)] = in;
      call->out[static_cast<size_t>(r)] = out;
      call->works[static_cast<size_t>(r)] = work;
      call->arrived[static_cast<size_t>(r)] = true;
      if (++call->count == p) {
        if (!null_device()) compute(*call);
        finished = call->works;
        g->calls.erase(seq);
      }
    }
    for (const Work& w : finished) w.complete();
    if (!finished.empty()) return work;
    watch(work, g, Deadline::after(timeout), work.what(), [call] {
      std::string never;
      for (size_t k = 0; k < call->arrived.size(); ++k) {
        if (!call->arrived[k]) never += (never.empty() ? "rank " : ", ") + std::to_string(k);
      }
      return never + " never arrived";
    });
    return work;
  }

  Work p2p(const comm::Communicator& c, BufferRef buf, int from, int to, bool sending, Duration timeout) {
    launch(sending ? "send" : "recv");
    std::shared_ptr<Group> g = group_of(c);
    const int me = c.rank();
    Work work(fmt::format("rank {} emulated NCCL {} {} rank {} ({} bytes on {})", me, sending ? "send" : "recv",
                          sending ? "to" : "from", sending ? to : from, buf.bytes(), name(buf.device)));
    Work other;
    bool matched = false;
    std::exception_ptr error;
    {
      std::lock_guard lock(g->mu);
      if (!g->aborted.empty()) {
        return Work::completed(std::make_exception_ptr(
            PeerError(fmt::format("{}: the communicator was aborted after: {}", work.what(), g->aborted))));
      }
      auto& waiting = (sending ? g->recvs : g->sends)[{from, to}];
      if (waiting.empty()) {
        (sending ? g->sends : g->recvs)[{from, to}].push_back({buf, work});
      } else {
        Message m = waiting.front();
        waiting.pop_front();
        matched = true;
        other = m.work;
        const BufferRef& src = sending ? buf : m.buf;
        const BufferRef& dst = sending ? m.buf : buf;
        if (src.bytes() != dst.bytes()) {
          error = std::make_exception_ptr(ValueError(fmt::format(
              "emulated NCCL send from rank {} to rank {}: {} bytes sent, {} bytes expected", from, to, src.bytes(),
              dst.bytes())));
        } else if (src.bytes() && !null_device()) {
          std::memcpy(dst.data, src.data, src.bytes());
        }
      }
    }
    if (!matched) {
      watch(work, g, Deadline::after(timeout), work.what(),
            [sending, peer = sending ? to : from] { return fmt::format("rank {} never posted the matching {}", peer, sending ? "recv" : "send"); });
      return work;
    }
    other.complete(error);
    work.complete(error);
    return work;
  }
};

}  // namespace

void install_collectives() {
  static EmulatedNccl nccl;
  comm::set_device_collectives(DeviceType::cuda, &nccl);
  comm::set_staged_collectives(DeviceType::cuda, &staged_collectives());
}

void reset_collectives() {
  std::lock_guard lock(registry_mu);
  registry().clear();
}

}  // namespace braid::cuda::emulated
