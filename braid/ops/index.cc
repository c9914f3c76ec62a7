#include "braid/ops/index.h"

#include "braid/autograd/node.h"
#include "braid/tensor/cpu/index.h"

namespace braid {

namespace {
using autograd::record;
using Grads = std::vector<Tensor>;
}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  if (weight.ndim() != 2) {
    fail<ValueError>("embedding: weight must be [V, D], got {} (indices {})", to_string(weight.shape()),
                     to_string(indices.shape()));
  }
  const Tensor flat = indices.contiguous().as_strided({indices.numel()}, {1}, indices.contiguous().offset());
  Tensor rows = cpu::index_select(weight, 0, flat, "embedding");  // [n, D]
  Shape shape = indices.shape();
  shape.push_back(weight.size(1));
  Tensor y = rows.as_strided(shape, contiguous_strides(shape), 0);
  record("embedding", {weight}, y, [wshape = weight.shape(), dtype = weight.dtype(), flat](const Tensor& g) {
    Tensor gw = Tensor::zeros(wshape, dtype);
    const Tensor gc = g.contiguous();
    cpu::index_add_into(gw, 0, flat, gc.as_strided({flat.numel(), wshape[1]}, {wshape[1], 1}, gc.offset()),
                        "embedding");
    return Grads{gw};
  });
  return y;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor y = cpu::index_select(x, dim, index, "index_select");
  record("index_select", {x}, y, [shape = x.shape(), dtype = x.dtype(), dim, idx = index.detach()](const Tensor& g) {
    Tensor gx = Tensor::zeros(shape, dtype);
    cpu::index_add_into(gx, dim, idx, g, "index_select");
    return Grads{gx};
  });
  return y;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor y = cpu::gather(x, dim, index, "gather");
  record("gather", {x}, y, [shape = x.shape(), dtype = x.dtype(), dim, idx = index.detach()](const Tensor& g) {
    Tensor gx = Tensor::zeros(shape, dtype);
    cpu::scatter_add_into(gx, dim, idx, g, "gather");
    return Grads{gx};
  });
  return y;
}

}  // namespace braid
