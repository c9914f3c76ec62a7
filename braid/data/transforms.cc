#include "braid/data/transforms.h"

#include <algorithm>

#include "braid/base/error.h"

namespace braid::data {

namespace {
void check_image(const Shape& shape, const char* what) {
  if (shape.size() != 3) fail<ValueError>("{}: expects [C, H, W] examples, got {}", what, to_string(shape));
}
}  // namespace

Normalize::Normalize(std::vector<float> mean, std::vector<float> std) : mean_(std::move(mean)) {
  if (mean_.empty() || mean_.size() != std.size()) {
    fail<ValueError>("Normalize: need as many means as stds (>= 1), got {} and {}", mean_.size(), std.size());
  }
  for (float s : std) {
    if (!(s > 0)) fail<ValueError>("Normalize: std must be > 0, got {}", s);
    inv_std_.push_back(1.0f / s);
  }
}

void Normalize::apply(float* x, const Shape& shape, Generator&) const {
  int64_t channels = mean_.size() == 1 ? 1 : (shape.empty() ? 1 : shape[0]);
  if (mean_.size() != 1 && static_cast<int64_t>(mean_.size()) != channels) {
    fail<ValueError>("Normalize: {} channel means for examples of shape {}", mean_.size(), to_string(shape));
  }
  int64_t per_channel = numel(shape) / channels;
  for (int64_t c = 0; c < channels; ++c) {
    float m = mean_[c], s = inv_std_[c];
    float* p = x + c * per_channel;
    for (int64_t i = 0; i < per_channel; ++i) p[i] = (p[i] - m) * s;
  }
}

RandomCrop::RandomCrop(int64_t padding, float fill) : padding_(padding), fill_(fill) {
  if (padding < 0) fail<ValueError>("RandomCrop: padding must be >= 0, got {}", padding);
}

void RandomCrop::apply(float* x, const Shape& shape, Generator& rng) const {
  check_image(shape, "RandomCrop");
  if (padding_ == 0) return;
  const int64_t c = shape[0], h = shape[1], w = shape[2];
  // Offset of the crop in the padded image, each in [0, 2 * padding].
  const int64_t dy = static_cast<int64_t>(rng.below(2 * padding_ + 1)) - padding_;
  const int64_t dx = static_cast<int64_t>(rng.below(2 * padding_ + 1)) - padding_;
  thread_local std::vector<float> src;
  src.assign(x, x + c * h * w);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t y = 0; y < h; ++y) {
      float* out = x + (ch * h + y) * w;
      int64_t sy = y + dy;
      if (sy < 0 || sy >= h) { std::fill(out, out + w, fill_); continue; }
      const float* in = src.data() + (ch * h + sy) * w;
      for (int64_t xx = 0; xx < w; ++xx) {
        int64_t sx = xx + dx;
        out[xx] = (sx >= 0 && sx < w) ? in[sx] : fill_;
      }
    }
  }
}

HorizontalFlip::HorizontalFlip(float p) : p_(p) {
  if (!(p >= 0 && p <= 1)) fail<ValueError>("HorizontalFlip: probability must be in [0, 1], got {}", p);
}

void HorizontalFlip::apply(float* x, const Shape& shape, Generator& rng) const {
  check_image(shape, "HorizontalFlip");
  if (rng.uniform() >= p_) return;
  const int64_t rows = shape[0] * shape[1], w = shape[2];
  for (int64_t r = 0; r < rows; ++r) std::reverse(x + r * w, x + (r + 1) * w);
}

}  // namespace braid::data
