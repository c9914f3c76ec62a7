// braid.distributed's core: joining the job (parallel::ProcessGroup, which
// reads braid launch's, mpirun's or srun's variables), the communicator's
// collectives on tensors, the waitable Work, and the device Mesh. Every
// collective keeps the communicator's deadlines and failure messages
// (a timeout names the rank, the op, its sequence number and who never
// arrived: braid.TimeoutError's attributes). The GIL is released while a
// collective runs or is waited for.
#include "bindings.h"
#include "braid/comm/tensor_buffer.h"
#include "braid/parallel/mesh.h"
#include "braid/parallel/process_group.h"
#include <nanobind/stl/unique_ptr.h>

namespace braid::python {

namespace {

using comm::Communicator;

Duration seconds(double s) { return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s)); }

// A Work and the tensors its buffers belong to: they live until it is done.
struct PyWork {
  comm::Work work;
  std::vector<Tensor> keep;
  Duration timeout{};
  void wait(std::optional<double> timeout_s) const {
    const Duration t = timeout_s ? seconds(*timeout_s) : comm::collective_backstop(timeout);
    nb::gil_scoped_release release;
    work.wait(Deadline::after(t));
  }
};

Duration timeout_of(const Communicator& c, std::optional<double> s) { return s ? seconds(*s) : c.options().timeout; }

comm::BufferRef checked(const Tensor& t, const char* op) {
  if (!t.is_contiguous()) fail<ValueError>("{}: the tensor is not contiguous (.contiguous() first)", op);
  return comm::buffer_of(t);
}

// Runs `submit` and waits for it (async_op: returns the Work instead).
nb::object run(comm::Work work, std::vector<Tensor> keep, Duration timeout, bool async_op) {
  PyWork w{std::move(work), std::move(keep), timeout};
  if (async_op) return nb::cast(std::move(w));
  w.wait(std::nullopt);
  return nb::none();
}

}  // namespace

void bind_comm(nb::module_& m) {
  nb::module_ d = m.def_submodule("comm", "Process groups and collectives (braid.distributed is the user's module).");
  nb::class_<PyWork>(d, "Work", "A collective in flight: wait() returns once it is done, or raises its error.")
      .def("wait", &PyWork::wait, "timeout"_a = nb::none(),
           "Waits (at most timeout seconds; default the collective's own timeout plus a second).")
      .def("done", [](const PyWork& w) { return w.work.done(); })
      .def_prop_ro("what", [](const PyWork& w) { return w.work.what(); });

  nb::class_<Communicator>(d, "Communicator",
                           "A group of ranks; collectives run in call order and must be called by every member.")
      .def_prop_ro("rank", &Communicator::rank)
      .def_prop_ro("size", &Communicator::size)
      .def_prop_ro("timeout", [](const Communicator& c) {
        return std::chrono::duration<double>(c.options().timeout).count();
      })
      .def("split", &Communicator::split, "color"_a, "key"_a, release_gil(),
           "Collective: ranks with the same color >= 0 form a new communicator, ordered by (key, rank).")
      .def("all_reduce", [](Communicator& c, Tensor t, const std::string& op, const std::string& algorithm,
                            std::optional<double> timeout, bool async_op) {
        const comm::BufferRef buf = checked(t, "all_reduce");
        const Duration to = timeout_of(c, timeout);
        comm::Work w;
        {
          nb::gil_scoped_release r;
          w = c.allreduce(buf, {.op = comm::parse_op(op), .algorithm = comm::parse_algorithm(algorithm), .timeout = to});
        }
        return run(std::move(w), {t}, to, async_op);
      }, "tensor"_a, "op"_a = "sum", "algorithm"_a = "auto", "timeout"_a = nb::none(), "async_op"_a = false,
           "In place: every rank's tensor becomes the reduction (sum, prod, min, max, avg) over the group.")
      .def("broadcast", [](Communicator& c, Tensor t, int root, std::optional<double> timeout, bool async_op) {
        const comm::BufferRef buf = checked(t, "broadcast");
        const Duration to = timeout_of(c, timeout);
        comm::Work w;
        {
          nb::gil_scoped_release r;
          w = c.broadcast(buf, {.root = root, .timeout = to});
        }
        return run(std::move(w), {t}, to, async_op);
      }, "tensor"_a, "root"_a = 0, "timeout"_a = nb::none(), "async_op"_a = false)
      .def("reduce", [](Communicator& c, Tensor t, int root, const std::string& op, std::optional<double> timeout,
                        bool async_op) {
        const comm::BufferRef buf = checked(t, "reduce");
        const Duration to = timeout_of(c, timeout);
        comm::Work w;
        {
          nb::gil_scoped_release r;
          w = c.reduce(buf, {.root = root, .op = comm::parse_op(op), .timeout = to});
        }
        return run(std::move(w), {t}, to, async_op);
      }, "tensor"_a, "root"_a = 0, "op"_a = "sum", "timeout"_a = nb::none(), "async_op"_a = false)
      .def("all_gather", [](Communicator& c, Tensor t, std::optional<Tensor> out, std::optional<double> timeout) {
        Shape shape{c.size()};
        shape.insert(shape.end(), t.shape().begin(), t.shape().end());
        Tensor o = out ? *out : Tensor::empty(shape, t.dtype(), t.device());
        if (o.shape() != shape || o.dtype() != t.dtype())
          fail<ValueError>("all_gather: out must be {} {}, got {} {}", name(t.dtype()), to_string(shape),
                           name(o.dtype()), to_string(o.shape()));
        const comm::BufferRef in = checked(t, "all_gather"), ob = checked(o, "all_gather");
        const Duration to = timeout_of(c, timeout);
        nb::gil_scoped_release r;
        c.allgather(in, ob, {.timeout = to}).wait(Deadline::after(comm::collective_backstop(to)));
        return o;
      }, "tensor"_a, "out"_a = nb::none(), "timeout"_a = nb::none(),
           "Every rank's tensor stacked by rank: [size, *tensor.shape].")
      .def("reduce_scatter", [](Communicator& c, Tensor t, const std::string& op, std::optional<double> timeout) {
        if (t.ndim() == 0 || t.size(0) % c.size() != 0)
          fail<ValueError>("reduce_scatter: the first dim ({}) must split into {} ranks' blocks",
                           t.ndim() ? t.size(0) : 0, c.size());
        Shape shape = t.shape();
        shape[0] /= c.size();
        Tensor o = Tensor::empty(shape, t.dtype(), t.device());
        const comm::BufferRef in = checked(t, "reduce_scatter"), ob = checked(o, "reduce_scatter");
        const Duration to = timeout_of(c, timeout);
        nb::gil_scoped_release r;
        c.reduce_scatter(in, ob, {.op = comm::parse_op(op), .timeout = to})
            .wait(Deadline::after(comm::collective_backstop(to)));
        return o;
      }, "tensor"_a, "op"_a = "sum", "timeout"_a = nb::none(),
           "Block r (of the first dim cut in size blocks) reduced over the group, on rank r.")
      .def("send", [](Communicator& c, Tensor t, int peer, uint64_t tag, std::optional<double> timeout,
                      bool async_op) {
        const comm::BufferRef buf = checked(t, "send");
        const Duration to = timeout_of(c, timeout);
        comm::Work w;
        {
          nb::gil_scoped_release r;
          w = c.send(buf, peer, {.tag = tag});
        }
        return run(std::move(w), {t}, to, async_op);
      }, "tensor"_a, "peer"_a, "tag"_a = 0, "timeout"_a = nb::none(), "async_op"_a = false)
      .def("recv", [](Communicator& c, Tensor t, int peer, uint64_t tag, std::optional<double> timeout,
                      bool async_op) {
        const comm::BufferRef buf = checked(t, "recv");
        const Duration to = timeout_of(c, timeout);
        comm::Work w;
        {
          nb::gil_scoped_release r;
          w = c.recv(buf, peer, {.tag = tag});
        }
        return run(std::move(w), {t}, to, async_op);
      }, "tensor"_a, "peer"_a, "tag"_a = 0, "timeout"_a = nb::none(), "async_op"_a = false,
           "Receives exactly the tensor's size from peer into it (matched by (peer, tag) in order).")
      .def("barrier", [](Communicator& c, std::optional<double> timeout) {
        const Duration to = timeout_of(c, timeout);
        nb::gil_scoped_release r;
        c.barrier({.timeout = to}).wait(Deadline::after(comm::collective_backstop(to)));
      }, "timeout"_a = nb::none())
      .def("choose_allreduce", [](const Communicator& c, size_t bytes) {
        return std::string(comm::name(c.choose_allreduce(bytes)));
      }, "bytes"_a, "The algorithm all_reduce(algorithm='auto') takes for a message of this size.");

  nb::class_<parallel::ProcessGroup>(d, "ProcessGroup",
                                     "This process's place in the job and its world communicator.")
      .def_static("join", [](const std::string& transport, double timeout, double join_timeout,
                             const std::string& history_dir) {
        return parallel::ProcessGroup::join({.transport = transport, .timeout = seconds(timeout),
                                             .join_timeout = seconds(join_timeout), .history_dir = history_dir});
      }, "transport"_a = "auto", "timeout"_a = 300.0, "join_timeout"_a = 60.0, "history_dir"_a = "", release_gil())
      .def_prop_ro("rank", [](const parallel::ProcessGroup& g) { return g.env().rank; })
      .def_prop_ro("size", [](const parallel::ProcessGroup& g) { return g.env().size; })
      .def_prop_ro("local_rank", [](const parallel::ProcessGroup& g) { return g.env().local_rank; })
      .def_prop_ro("local_size", [](const parallel::ProcessGroup& g) { return g.env().local_size; })
      .def_prop_ro("ps_servers", [](const parallel::ProcessGroup& g) { return g.env().ps_servers; })
      .def_prop_ro("restart", [](const parallel::ProcessGroup& g) { return g.env().restart; })
      .def_prop_ro("launcher", [](const parallel::ProcessGroup& g) { return g.env().source; },
                   "'launch' (braid launch), 'mpirun', 'slurm' or 'single'.")
      .def_prop_ro("transport", &parallel::ProcessGroup::transport_name)
      .def_prop_ro("comm", [](parallel::ProcessGroup& g) { return g.comm(); }, "The world communicator.");

  nb::enum_<parallel::Axis>(d, "Axis")
      .value("data", parallel::Axis::data)
      .value("tensor", parallel::Axis::tensor)
      .value("pipeline", parallel::Axis::pipeline)
      .value("context", parallel::Axis::context);
  nb::class_<parallel::Mesh>(d, "Mesh",
                             "The world's ranks on a data x context x tensor x pipeline grid, one communicator per "
                             "axis (rank = ((p * data + d) * context + c) * tensor + t).")
      .def_static("build", [](const Communicator& world, int data, int tensor, int pipeline, int context) {
        return parallel::Mesh::build(world, {.data = data, .tensor = tensor, .pipeline = pipeline, .context = context});
      }, "world"_a, "data"_a = 0, "tensor"_a = 1, "pipeline"_a = 1, "context"_a = 1, release_gil(),
                  "Collective over world; data 0 means world size / (tensor * pipeline * context).")
      .def_prop_ro("rank", &parallel::Mesh::rank)
      .def_prop_ro("size", &parallel::Mesh::size)
      .def("degree", &parallel::Mesh::degree, "axis"_a)
      .def("coord", &parallel::Mesh::coord, "axis"_a)
      .def("group", &parallel::Mesh::group, "axis"_a, "The communicator of the ranks differing only along axis.")
      .def("world_rank", &parallel::Mesh::world_rank, "data"_a, "tensor"_a, "pipeline"_a, "context"_a = 0)
      .def("describe", &parallel::Mesh::describe)
      .def("__repr__", [](const parallel::Mesh& mesh) { return "braid.Mesh(" + mesh.describe() + ")"; });
}

}  // namespace braid::python
