#include "braid/parallel/tensor_parallel/collectives.h"

#include "braid/autograd/node.h"
#include "braid/ops/shape.h"

namespace braid::parallel::tensor_parallel {

using Grads = std::vector<Tensor>;

void allreduce_inplace(const Tensor& t, const comm::Communicator& tp, comm::Op op, const char* what) {
  if (tp.size() == 1) return;
  if (!t.is_contiguous()) fail<ValueError>("tensor parallel {}: the tensor must be contiguous", what);
  const Duration timeout = tp.options().timeout;
  try {
    comm::Communicator(tp)
        .allreduce({t.raw_data(), static_cast<size_t>(t.numel()), t.dtype()}, {.op = op, .timeout = timeout})
        .wait(Deadline::after(timeout * 2));
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("tensor parallel {} (tensor rank {} of {}): {}", what, tp.rank(), tp.size(), e.what());
  }
}

namespace {

Tensor reduced_copy(const Tensor& x, const comm::Communicator& tp, const char* what) {
  Tensor y = x.detach().clone();
  allreduce_inplace(y, tp, comm::Op::sum, what);
  return y;
}

}  // namespace

Tensor copy_to_tensor_parallel(const Tensor& x, const comm::Communicator& tp) {
  // A new handle on the same values, so the node has an output of its own.
  Tensor y = x.detach().as_strided(x.shape(), x.strides(), x.offset());
  autograd::record("copy_to_tensor_parallel", {x}, y, [tp](const Tensor& g) {
    return Grads{reduced_copy(g.contiguous(), tp, "copy_to backward (all-reduce)")};
  });
  return y;
}

Tensor reduce_from_tensor_parallel(const Tensor& x, const comm::Communicator& tp) {
  Tensor y = reduced_copy(x.contiguous(), tp, "reduce_from (all-reduce)");
  autograd::record("reduce_from_tensor_parallel", {x}, y, [](const Tensor& g) { return Grads{g}; });
  return y;
}

Tensor gather_last_dim(const Tensor& x, const comm::Communicator& tp, const std::vector<int64_t>& sizes) {
  const int p = tp.size(), r = tp.rank();
  if (static_cast<int>(sizes.size()) != p || x.size(-1) != sizes[static_cast<size_t>(r)]) {
    fail<ValueError>("gather_last_dim: rank {} holds {} of widths {}", r, to_string(x.shape()), sizes);
  }
  int64_t widest = 0, offset = 0, total = 0;
  for (int i = 0; i < p; ++i) {
    widest = std::max(widest, sizes[static_cast<size_t>(i)]);
    if (i < r) offset += sizes[static_cast<size_t>(i)];
    total += sizes[static_cast<size_t>(i)];
  }
  // All-gather equal blocks: each rank's slice padded to the widest.
  const int64_t rows = x.numel() / std::max<int64_t>(1, x.size(-1));
  Tensor mine = Tensor::zeros({rows, widest}, x.dtype());
  if (x.numel() > 0) slice(mine, 1, 0, x.size(-1)).copy_from(reshape(x.detach().contiguous(), {rows, x.size(-1)}));
  Tensor all = Tensor::empty({p, rows, widest}, x.dtype());
  if (p > 1) {
    const Duration timeout = tp.options().timeout;
    try {
      comm::Communicator(tp)
          .allgather({mine.raw_data(), static_cast<size_t>(mine.numel()), mine.dtype()},
                     {all.raw_data(), static_cast<size_t>(all.numel()), all.dtype()}, {.timeout = timeout})
          .wait(Deadline::after(timeout * 2));
    } catch (const TimeoutError& e) {
      fail<TimeoutError>("tensor parallel gather (tensor rank {} of {}): {}", r, p, e.what());
    }
  } else {
    all = reshape(mine, {1, rows, widest});
  }
  std::vector<Tensor> parts;
  for (int i = 0; i < p; ++i) {
    parts.push_back(slice(squeeze(slice(all, 0, i, i + 1), 0), 1, 0, sizes[static_cast<size_t>(i)]));
  }
  Shape shape = x.shape();
  shape.back() = total;
  Tensor y = reshape(concat(parts, 1), shape).contiguous();
  autograd::record("gather_last_dim", {x}, y, [offset, width = x.size(-1)](const Tensor& g) {
    return Grads{slice(g, -1, offset, offset + width).contiguous()};
  });
  return y;
}

namespace {

int64_t segment_of(const Tensor& full, int t, const char* what) {
  if (full.ndim() < 2 || full.size(1) % t != 0) {
    fail<ValueError>("{}: a sequence of {} tokens ({}) does not split into parallel.tensor = {} equal segments "
                     "(parallel.sequence_parallel)",
                     what, full.ndim() < 2 ? 0 : full.size(1), to_string(full.shape()), t);
  }
  return full.size(1) / t;
}

comm::BufferRef ref(const Tensor& t) { return {t.raw_data(), static_cast<size_t>(t.numel()), t.dtype()}; }

// [t, B, c, ...] -> [B, t c, ...] with each segment whole: the gathered sequence.
Tensor whole_sequence(const Tensor& parts) {
  const int64_t t = parts.size(0);
  Shape shape(parts.shape().begin() + 1, parts.shape().end());
  shape[1] *= t;
  Tensor full = Tensor::empty(shape, parts.dtype());
  place_segment_rows(full, parts, 0, parts.size(2));
  return full;
}

Tensor allgather_sequence(const Tensor& x, const comm::Communicator& tp) {
  const int t = tp.size();
  const Tensor in = x.detach().contiguous();
  Shape shape = in.shape();
  shape.insert(shape.begin(), t);
  Tensor parts = Tensor::empty(shape, in.dtype());
  if (t == 1) {
    parts.copy_from(reshape(in, shape));
  } else {
    finish(start_allgather(in, parts, tp), tp, "sequence all-gather");
  }
  return whole_sequence(parts);
}

Tensor reduce_scatter_along_sequence(const Tensor& x, const comm::Communicator& tp) {
  const int t = tp.size();
  const int64_t seg = segment_of(x, t, "reduce_scatter_sequence");
  if (t == 1) return x.detach().contiguous().clone();
  const Tensor parts = segment_rows(x.detach(), t, 0, seg);
  Shape shape(parts.shape().begin() + 1, parts.shape().end());
  Tensor out = Tensor::empty(shape, x.dtype());
  finish(start_reduce_scatter(parts, out, tp), tp, "sequence reduce-scatter");
  return out;
}

}  // namespace

Tensor segment_rows(const Tensor& full, int t, int64_t b, int64_t e) {
  const int64_t seg = segment_of(full, t, "segment_rows");
  std::vector<Tensor> parts;
  for (int r = 0; r < t; ++r) parts.push_back(slice(full, 1, r * seg + b, r * seg + e));
  return stack(parts, 0).contiguous();
}

void place_segment_rows(const Tensor& full, const Tensor& parts, int64_t b, int64_t e) {
  const int t = static_cast<int>(parts.size(0));
  const int64_t seg = segment_of(full, t, "place_segment_rows");
  for (int r = 0; r < t; ++r) slice(full, 1, r * seg + b, r * seg + e).copy_from(squeeze(slice(parts, 0, r, r + 1), 0));
}

comm::Work start_allgather(const Tensor& in, const Tensor& out, const comm::Communicator& tp) {
  return comm::Communicator(tp).allgather(ref(in), ref(out), {.timeout = tp.options().timeout});
}

comm::Work start_reduce_scatter(const Tensor& in, const Tensor& out, const comm::Communicator& tp) {
  return comm::Communicator(tp).reduce_scatter(ref(in), ref(out),
                                               {.op = comm::Op::sum, .timeout = tp.options().timeout});
}

comm::Work start_allreduce(const Tensor& t, const comm::Communicator& tp) {
  return comm::Communicator(tp).allreduce(ref(t), {.op = comm::Op::sum, .timeout = tp.options().timeout});
}

void finish(const comm::Work& w, const comm::Communicator& tp, const char* what) {
  try {
    w.wait(Deadline::after(comm::collective_backstop(tp.options().timeout)));
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("tensor parallel {} (tensor rank {} of {}): {}", what, tp.rank(), tp.size(), e.what());
  }
}

Tensor gather_sequence(const Tensor& x, const comm::Communicator& tp) {
  Tensor y = allgather_sequence(x, tp);
  autograd::record("gather_sequence", {x}, y, [tp](const Tensor& g) {
    return Grads{reduce_scatter_along_sequence(g, tp)};
  });
  return y;
}

Tensor reduce_scatter_sequence(const Tensor& x, const comm::Communicator& tp) {
  Tensor y = reduce_scatter_along_sequence(x, tp);
  autograd::record("reduce_scatter_sequence", {x}, y, [tp](const Tensor& g) {
    return Grads{allgather_sequence(g, tp)};
  });
  return y;
}

}  // namespace braid::parallel::tensor_parallel
