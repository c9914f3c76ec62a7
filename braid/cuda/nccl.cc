#include "braid/cuda/nccl.h"

#include <nccl.h>

#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "braid/base/error.h"
#include "braid/comm/communicator.h"
#include "braid/comm/device_comm.h"
#include "braid/cuda/runtime.h"
#include "braid/cuda/staged.h"

// Named by the link options of braid_cuda: keeps this file and its registrar.
extern "C" {
int braid_cuda_nccl_anchor = 0;
}

namespace braid::cuda {

namespace {

using comm::BufferRef;
using comm::Work;

void check_nccl(ncclResult_t r, const char* what, int rank) {
  if (r != ncclSuccess && r != ncclInProgress) {
    fail<PeerError>("rank {}: NCCL error in {}: {}", rank, what, ncclGetErrorString(r));
  }
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: case DType::b8: return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(comm::Op op) {
  switch (op) {
    case comm::Op::sum: return ncclSum;
    case comm::Op::prod: return ncclProd;
    case comm::Op::min: return ncclMin;
    case comm::Op::max: return ncclMax;
    case comm::Op::avg: return ncclAvg;
  }
  return ncclSum;
}

// One NCCL communicator over the ranks of a braid communicator.
struct NcclGroup {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int device = 0;
  std::mutex mu;  // NCCL calls on one communicator must not interleave
  bool aborted = false;
  ~NcclGroup() {
    if (comm != nullptr && !aborted) ncclCommDestroy(comm);
  }
};

class NcclCollectives final : public comm::DeviceCollectives {
 public:
  Work allreduce(const comm::Communicator& c, BufferRef buf, comm::Op op, Duration timeout) override {
    return run(c, buf, "allreduce", timeout, [&](NcclGroup& g, cudaStream_t s) {
      return ncclAllReduce(buf.data, buf.data, buf.count, nccl_type(buf.dtype), nccl_op(op), g.comm, s);
    });
  }
  Work broadcast(const comm::Communicator& c, BufferRef buf, int root, Duration timeout) override {
    return run(c, buf, "broadcast", timeout, [&](NcclGroup& g, cudaStream_t s) {
      return ncclBroadcast(buf.data, buf.data, buf.count, nccl_type(buf.dtype), root, g.comm, s);
    });
  }
  Work reduce_scatter(const comm::Communicator& c, BufferRef in, BufferRef out, comm::Op op,
                      Duration timeout) override {
    return run(c, in, "reduce_scatter", timeout, [&](NcclGroup& g, cudaStream_t s) {
      return ncclReduceScatter(in.data, out.data, out.count, nccl_type(in.dtype), nccl_op(op), g.comm, s);
    });
  }
  Work allgather(const comm::Communicator& c, BufferRef in, BufferRef out, Duration timeout) override {
    return run(c, out, "allgather", timeout, [&](NcclGroup& g, cudaStream_t s) {
      return ncclAllGather(in.data, out.data, in.count, nccl_type(in.dtype), g.comm, s);
    });
  }
  Work send(const comm::Communicator& c, BufferRef buf, int peer, Duration timeout) override {
    return run(c, buf, "send", timeout, [&](NcclGroup& g, cudaStream_t s) {
      return ncclSend(buf.data, buf.count, nccl_type(buf.dtype), peer, g.comm, s);
    });
  }
  Work recv(const comm::Communicator& c, BufferRef buf, int peer, Duration timeout) override {
    return run(c, buf, "recv", timeout, [&](NcclGroup& g, cudaStream_t s) {
      return ncclRecv(buf.data, buf.count, nccl_type(buf.dtype), peer, g.comm, s);
    });
  }

 private:
  // The NCCL communicator of `c` (made on first use: collective).
  std::shared_ptr<NcclGroup> group(const comm::Communicator& c, int device) {
    std::lock_guard lock(mu_);
    auto& slot = groups_[c.id()];
    if (slot) {
      if (slot->device != device) {
        fail<ValueError>("rank {}: NCCL collectives of one communicator must stay on one GPU (cuda:{}, then cuda:{})",
                         c.rank(), slot->device, device);
      }
      return slot;
    }
    auto g = std::make_shared<NcclGroup>();
    g->rank = c.rank();
    g->device = device;
    ncclUniqueId id{};
    if (c.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", c.rank());
    comm::Communicator bootstrap = c;
    bootstrap.broadcast(BufferRef(&id, sizeof(id), DType::u8), {.root = 0})
        .wait(Deadline::after(c.options().timeout));
    set_device(device);
    check_nccl(ncclCommInitRank(&g->comm, c.size(), id, c.rank()), "ncclCommInitRank", c.rank());
    slot = g;
    return g;
  }

  template <class Call>
  Work run(const comm::Communicator& c, BufferRef buf, const char* op, Duration timeout, Call call) {
    const int device = buf.device.index;
    std::shared_ptr<NcclGroup> g = group(c, device);
    set_device(device);
    // On the device's communication stream, after what compute has queued so
    // far (the bucket's gradients): backward goes on while NCCL runs.
    const Event ready = Event::record(current_stream(device));
    cudaStream_t stream = comm_stream(device);
    wait(stream, ready);
    {
      std::lock_guard lock(g->mu);
      if (g->aborted) fail<PeerError>("rank {}: NCCL communicator was aborted after an earlier failure", g->rank);
      check_nccl(call(*g, stream), op, g->rank);
    }
    auto done = std::make_shared<Event>(Event::record(stream));
    const std::string what = fmt::format("rank {} NCCL {} ({} bytes on {})", g->rank, op, buf.bytes(), name(buf.device));
    Work work(what);
    const Deadline deadline = Deadline::after(timeout);
    // The waiter polls the GPU and NCCL's asynchronous errors; past the
    // collective's timeout it aborts the communicator, which unblocks the
    // kernels stuck waiting for a peer.
    work.help_with([g, done, deadline, what](const Work& w, Deadline wait_deadline) {
      while (!w.done()) {
        if (done->done()) return w.complete();
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(g->comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
          return w.complete(std::make_exception_ptr(
              PeerError(fmt::format("{}: NCCL reported {}", what, ncclGetErrorString(async)))));
        }
        if (deadline.expired()) {
          std::lock_guard lock(g->mu);
          if (!g->aborted) ncclCommAbort(g->comm);
          g->aborted = true;
          return w.complete(std::make_exception_ptr(TimeoutError(
              fmt::format("{}: not finished within its timeout; the NCCL communicator was aborted", what))));
        }
        if (wait_deadline.expired()) return;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    });
    return work;
  }

  cudaStream_t comm_stream(int device) {
    std::lock_guard lock(mu_);
    auto& s = streams_[device];
    if (!s) s = std::make_unique<Stream>(device);
    return s->get();
  }

  std::mutex mu_;
  std::map<uint32_t, std::shared_ptr<NcclGroup>> groups_;
  std::map<int, std::unique_ptr<Stream>> streams_;
};

const bool registered = [] {
  static NcclCollectives collectives;
  comm::set_device_collectives(DeviceType::cuda, &collectives);
  comm::set_staged_collectives(DeviceType::cuda, &staged_collectives());
  return true;
}();

}  // namespace

const char* nccl_version() {
  static const std::string v = [] {
    int code = 0;
    ncclGetVersion(&code);
    return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
  }();
  return v.c_str();
}

}  // namespace braid::cuda
