#include "braid/ops/softmax.h"

#include "braid/autograd/node.h"
#include "braid/tensor/cpu/reduce.h"

namespace braid {

namespace {

Tensor softmax_op(const char* name, const Tensor& x, int64_t dim, bool log) {
  Tensor y = cpu::softmax(x, dim, log, name);
  // Both backwards need only the output: g_x = y (g - sum(g y)) or g - exp(y) sum(g).
  autograd::record(name, {x}, y, [yd = y.detach(), dim, log](const Tensor& g) {
    return std::vector<Tensor>{cpu::softmax_backward(g, yd, dim, log)};
  });
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op("log_softmax", x, dim, true); }

}  // namespace braid
