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

}  // namespace braid::parallel::tensor_parallel
