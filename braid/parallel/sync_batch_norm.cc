#include "braid/parallel/sync_batch_norm.h"

#include "braid/autograd/node.h"
#include "braid/nn/norm.h"

namespace braid::parallel {

namespace {

Tensor summed(const Tensor& x, const comm::Communicator& data, const char* direction) {
  Tensor y = x.detach().contiguous().clone();
  if (data.size() == 1) return y;
  const Duration timeout = data.options().timeout;
  try {
    comm::Communicator(data)
        // The statistics' own device: the communicator sends device buffers
        // through NCCL (or stages them through the host), never reads them as host memory.
        .allreduce({y.raw_data(), static_cast<size_t>(y.numel()), y.dtype(), y.device()},
                   {.op = comm::Op::sum, .timeout = timeout})
        .wait(Deadline::after(timeout * 2));
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("rank {}: synchronised batch norm {} all-reduce of {} values on the data axis: {}", data.rank(),
                       direction, y.numel(), e.what());
  }
  return y;
}

int visit(nn::Module& m, const BatchSum& across) {
  int found = 0;
  if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&m)) {
    bn->set_across_replicas(across);
    ++found;
  }
  for (const auto& [name, child] : m.children()) found += visit(*child, across);
  return found;
}

}  // namespace

Tensor allreduce_sum_both_ways(const Tensor& x, const comm::Communicator& data) {
  Tensor y = summed(x, data, "forward");
  autograd::record("allreduce_sum_both_ways", {x}, y, [data](const Tensor& g) {
    return std::vector<Tensor>{summed(g, data, "backward")};
  });
  return y;
}

int synchronize_batch_norm(nn::Module& model, const comm::Communicator& data) {
  return visit(model, [data](const Tensor& t) { return allreduce_sum_both_ways(t, data); });
}

}  // namespace braid::parallel
