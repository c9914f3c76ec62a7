// ZeRO stage 3: each layer's parameters exist whole only while the layer
// runs. The layer's forward waits for its gather (started early by the
// previous layer when prefetching), starts the next layer's, runs, and frees
// the gathered memory. A node recorded on the layer's output runs before the
// layer's backward (autograd runs newer nodes first): it gathers the layer
// again and starts the previous layer's gather. The memory goes again once
// all of the layer's gradients are final (on_grad_ready), which is when no
// backward node needs the values any more.
#include "braid/autograd/node.h"
#include "braid/parallel/zero/zero.h"
#include "braid/comm/tensor_buffer.h"

namespace braid::parallel::zero {

namespace {

comm::BufferRef ref(const Tensor& t) { return comm::buffer_of(t); }

}  // namespace

void ZeroSync::install_layer_calls() {
  auto seq = std::static_pointer_cast<nn::Sequential>(model_);
  seq->set_layer_call([this](size_t i, nn::Module& layer, const Tensor& x) { return run_layer(i, layer, x); });
}

Tensor ZeroSync::run_layer(size_t layer, nn::Module& module, const Tensor& x) {
  const int unit = unit_of_layer_.at(layer);
  if (unit < 0 || !set_up_) return module.forward(x);
  const auto u = static_cast<size_t>(unit);
  wait_gathered(u);
  if (o_.prefetch && u + 1 < units_.size()) start_gather(u + 1);
  const Tensor y = module.forward(x);
  release(u);
  if (!autograd::grad_enabled() || !y.requires_grad()) return y;
  // A new handle on the same values, so the node has an output of its own.
  Tensor out = y.detach().as_strided(y.shape(), y.strides(), y.offset());
  autograd::record("zero_gather_for_backward", {y}, out, [this, u](const Tensor& g) {
    units_[u].ready_in_backward = 0;
    wait_gathered(u);
    if (o_.prefetch && u > 0) start_gather(u - 1);
    return std::vector<Tensor>{g};
  });
  return out;
}

void ZeroSync::start_gather(size_t unit) {
  Unit& u = units_[unit];
  if (u.gathered != Gathered::no) return;
  u.params.storage()->materialize();
  u.gather = comm_.allgather(ref(shard_piece(shard_, unit)), ref(u.params), {.timeout = o_.timeout});
  u.gathered = Gathered::gathering;
}

void ZeroSync::wait_gathered(size_t unit) {
  start_gather(unit);
  Unit& u = units_[unit];
  if (u.gathered != Gathered::gathering) return;
  try {
    u.gather.wait(Deadline::after(o_.timeout * 2));
  } catch (const TimeoutError& e) {
    const Bucket& bk = layout_->buckets()[unit];
    fail<TimeoutError>("rank {}: ZeRO stage 3 gather of the layer holding {} on the data axis did not finish: {}",
                       comm_.rank(), params_[bk.params.front()].name, e.what());
  }
  u.gathered = Gathered::yes;
}

void ZeroSync::release(size_t unit) {
  Unit& u = units_[unit];
  if (u.gathered == Gathered::no) return;
  if (u.gathered == Gathered::gathering) wait_gathered(unit);  // never free memory a gather writes
  u.params.storage()->release();
  u.gathered = Gathered::no;
}

void ZeroSync::gather_all() {
  for (size_t u = 0; u < units_.size(); ++u) start_gather(u);
  for (size_t u = 0; u < units_.size(); ++u) wait_gathered(u);
}

void ZeroSync::release_all() {
  for (size_t u = 0; u < units_.size(); ++u) release(u);
}

}  // namespace braid::parallel::zero
