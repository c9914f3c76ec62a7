// Parameter initialisation from braid's Philox generator.
//
// Values are drawn in row-major order of the tensor, one generator draw per
// element (uniform: Generator::uniform(); normal: Generator::normal()), so a
// given seed yields the same weights on every machine and thread count.
// Fans follow PyTorch: for a weight [out, in, k...], fan_in = in * prod(k),
// fan_out = out * prod(k).
//
// Layer defaults (Linear, Conv2d) match PyTorch's distributions (not its
// values): weight ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform with
// a = sqrt(5)), bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
#pragma once

#include <utility>

#include "braid/base/rng.h"
#include "braid/tensor/tensor.h"

namespace braid::nn::init {

// (fan_in, fan_out) of a weight of at least 2 dims.
std::pair<int64_t, int64_t> fans(const Shape& shape);

void uniform_(const Tensor& t, double lo, double hi, Generator& gen);
void normal_(const Tensor& t, double mean, double stddev, Generator& gen);
// He et al. 2015: U(-b, b), b = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2)).
void kaiming_uniform_(const Tensor& t, Generator& gen, double a = 0);
// N(0, gain^2 / fan_in).
void kaiming_normal_(const Tensor& t, Generator& gen, double a = 0);
// Glorot & Bengio 2010: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(const Tensor& t, Generator& gen, double gain = 1);
// N(0, gain^2 * 2 / (fan_in + fan_out)).
void xavier_normal_(const Tensor& t, Generator& gen, double gain = 1);

}  // namespace braid::nn::init
