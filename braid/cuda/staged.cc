#include "braid/cuda/staged.h"

#include <cstddef>
#include <memory>
#include <vector>

#include "braid/cuda/memory.h"

namespace braid::cuda {

namespace {

using comm::BufferRef;
using comm::Work;
using Host = std::shared_ptr<std::vector<std::byte>>;

// A host copy of `buf` (its values when `read`, else uninitialised bytes).
Host to_host(BufferRef buf, bool read) {
  auto h = std::make_shared<std::vector<std::byte>>(buf.bytes());
  if (read && buf.bytes()) copy_bytes(h->data(), Device::cpu, buf.data, buf.device, buf.bytes());
  return h;
}

BufferRef host_ref(const Host& h, BufferRef like) { return BufferRef(h->data(), like.count, like.dtype); }

// The staged call's Work: done once `inner` (the host collective) is done and
// `back` (the host result) has been copied to `out` on the device. Waiting on
// it runs the host collective in the waiting thread (the communicator's own
// helper), as waiting on a host collective does.
Work finish(Work inner, Host back, BufferRef out, const char* op, int rank) {
  Work outer(fmt::format("rank {} staged {} ({} bytes on {})", rank, op, out.bytes(), name(out.device)));
  outer.help_with([inner](const Work&, Deadline d) {
    try {
      inner.wait(d);
    } catch (...) {  // the inner error completes `outer` through on_done below; a timeout of `d` is the waiter's
    }
  });
  inner.on_done([outer, back, out](std::exception_ptr error) {
    if (!error && back && out.bytes()) {
      try {
        copy_bytes(out.data, out.device, back->data(), Device::cpu, out.bytes());
      } catch (...) {
        error = std::current_exception();
      }
    }
    outer.complete(error);
  });
  return outer;
}

class StagedCollectives final : public comm::DeviceCollectives {
 public:
  Work allreduce(const comm::Communicator& c, BufferRef buf, comm::Op op, Duration timeout) override {
    Host h = to_host(buf, true);
    Work inner = comm::Communicator(c).allreduce(host_ref(h, buf), {.op = op, .timeout = timeout});
    return finish(inner, h, buf, "allreduce", c.rank());
  }
  Work broadcast(const comm::Communicator& c, BufferRef buf, int root, Duration timeout) override {
    Host h = to_host(buf, c.rank() == root);
    Work inner = comm::Communicator(c).broadcast(host_ref(h, buf), {.root = root, .timeout = timeout});
    return finish(inner, h, buf, "broadcast", c.rank());
  }
  Work reduce_scatter(const comm::Communicator& c, BufferRef in, BufferRef out, comm::Op op,
                      Duration timeout) override {
    Host hin = to_host(in, true), hout = to_host(out, false);
    Work inner = comm::Communicator(c).reduce_scatter(host_ref(hin, in), host_ref(hout, out), {.op = op, .timeout = timeout});
    inner.on_done([hin](std::exception_ptr) {});  // `in` must outlive the host collective
    return finish(inner, hout, out, "reduce_scatter", c.rank());
  }
  Work allgather(const comm::Communicator& c, BufferRef in, BufferRef out, Duration timeout) override {
    Host hin = to_host(in, true), hout = to_host(out, false);
    Work inner = comm::Communicator(c).allgather(host_ref(hin, in), host_ref(hout, out), {.timeout = timeout});
    inner.on_done([hin](std::exception_ptr) {});
    return finish(inner, hout, out, "allgather", c.rank());
  }
  Work send(const comm::Communicator& c, BufferRef buf, int peer, Duration) override {
    Host h = to_host(buf, true);
    Work inner = comm::Communicator(c).send(host_ref(h, buf), peer);
    inner.on_done([h](std::exception_ptr) {});  // the host copy must outlive the send
    return finish(inner, nullptr, buf, "send", c.rank());
  }
  Work recv(const comm::Communicator& c, BufferRef buf, int peer, Duration) override {
    Host h = to_host(buf, false);
    Work inner = comm::Communicator(c).recv(host_ref(h, buf), peer);
    return finish(inner, h, buf, "recv", c.rank());
  }
};

}  // namespace

comm::DeviceCollectives& staged_collectives() {
  static StagedCollectives staged;
  return staged;
}

}  // namespace braid::cuda
