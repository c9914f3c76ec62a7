#include "braid/nn/init.h"

#include <cmath>

#include "braid/base/error.h"

namespace braid::nn::init {

namespace {

// Writes n = t.numel() values from draw() into t. The generator runs on the
// host, so a tensor on another device is filled through a host copy: the
// values (and the generator's state afterwards) are the same on every device.
template <class Draw>
void fill_from(const Tensor& t, const char* op, Draw draw) {
  if (t.dtype() != DType::f32 || !t.is_contiguous()) fail<ValueError>("{}: expects a contiguous f32 tensor", op);
  const Tensor host = t.device().is_cpu() ? t : Tensor::empty(t.shape(), DType::f32);
  float* p = host.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = draw();
  if (!host.same(t)) t.copy_from(host);
}

}  // namespace

std::pair<int64_t, int64_t> fans(const Shape& shape) {
  if (shape.size() < 2) fail<ValueError>("init: fans need a weight of at least 2 dims, got {}", to_string(shape));
  int64_t receptive = 1;
  for (size_t d = 2; d < shape.size(); ++d) receptive *= shape[d];
  return {shape[1] * receptive, shape[0] * receptive};
}

void uniform_(const Tensor& t, double lo, double hi, Generator& gen) {
  fill_from(t, "uniform_", [&] { return static_cast<float>(lo + (hi - lo) * gen.uniform_f64()); });
}

void normal_(const Tensor& t, double mean, double stddev, Generator& gen) {
  fill_from(t, "normal_", [&] { return static_cast<float>(mean + stddev * gen.normal()); });
}

void kaiming_uniform_(const Tensor& t, Generator& gen, double a) {
  const double gain = std::sqrt(2.0 / (1 + a * a));
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(fans(t.shape()).first));
  uniform_(t, -bound, bound, gen);
}

void kaiming_normal_(const Tensor& t, Generator& gen, double a) {
  const double gain = std::sqrt(2.0 / (1 + a * a));
  normal_(t, 0, gain / std::sqrt(static_cast<double>(fans(t.shape()).first)), gen);
}

void xavier_uniform_(const Tensor& t, Generator& gen, double gain) {
  auto [in, out] = fans(t.shape());
  uniform_(t, -gain * std::sqrt(6.0 / static_cast<double>(in + out)), gain * std::sqrt(6.0 / static_cast<double>(in + out)), gen);
}

void xavier_normal_(const Tensor& t, Generator& gen, double gain) {
  auto [in, out] = fans(t.shape());
  normal_(t, 0, gain * std::sqrt(2.0 / static_cast<double>(in + out)), gen);
}

}  // namespace braid::nn::init
