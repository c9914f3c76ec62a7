#include "braid/parallel/step_schedule.h"

#include "braid/autograd/engine.h"
#include "braid/base/trace.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"
#include "braid/parallel/shard_spec.h"

namespace braid::parallel {

std::pair<int64_t, int64_t> microbatch_rows(int64_t n, int m, int i) {
  if (m < 1 || m > n) fail<ValueError>("cannot split a batch of {} into {} micro-batches", n, m);
  return shard_range(n, m, i);
}

LocalSchedule::LocalSchedule(int microbatches, int64_t max_rows) : microbatches_(microbatches), max_rows_(max_rows) {
  if (microbatches < 1) fail<ConfigError>("parallel.microbatches must be >= 1, got {}", microbatches);
  if (max_rows < 0) fail<ConfigError>("parallel.microbatch_max must be >= 0, got {}", max_rows);
}

double LocalSchedule::run(nn::Module& model, const nn::LossFn& loss, const Tensor& input, const Tensor& target,
                          const std::function<void(bool)>& set_sync) {
  const int64_t n = input.size(0);
  int slices = microbatches_;
  if (max_rows_ > 0) slices = static_cast<int>(std::max<int64_t>(slices, (n + max_rows_ - 1) / max_rows_));
  if (slices == 1) {
    set_sync(true);
    Tensor l;
    {
      trace::Span span("step", "forward");
      l = loss(model.forward(input), target);
    }
    const double value = l.item();
    trace::Span span("step", "backward");
    backward(l);
    return value;
  }
  double total = 0;
  for (int i = 0; i < slices; ++i) {
    const auto [b, e] = microbatch_rows(n, slices, i);
    const double share = static_cast<double>(e - b) / static_cast<double>(n);
    Tensor l;
    {
      trace::Span span("step", "forward");
      if (span) span.arg("microbatch", i);
      l = mul(loss(model.forward(slice(input, 0, b, e)), slice(target, 0, b, e)), share);
    }
    total += l.item();
    set_sync(i + 1 == slices);
    trace::Span span("step", "backward");
    if (span) span.arg("microbatch", i);
    backward(l);
  }
  return total;
}

Tensor LocalSchedule::evaluate(nn::Module& model, const Tensor& input) { return model.forward(input); }

}  // namespace braid::parallel
