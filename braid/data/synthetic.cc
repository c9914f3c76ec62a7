#include "braid/data/synthetic.h"

#include <cmath>
#include <cstring>
#include <string>

#include "braid/base/rng.h"

namespace braid::data {

SyntheticImages::SyntheticImages(const SyntheticImagesOptions& options) : o_(options) {
  if (o_.shape.size() != 3 || o_.shape[0] <= 0 || o_.shape[1] <= 0 || o_.shape[2] <= 0) {
    fail<ValueError>("synthetic images: shape {} is not [C, H, W] with positive sizes", to_string(o_.shape));
  }
  if (o_.examples < 1) fail<ValueError>("synthetic images: {} examples, need at least 1", o_.examples);
  if (o_.classes < 1) fail<ValueError>("synthetic images: {} classes, need at least 1", o_.classes);
  const int64_t c = o_.shape[0];
  colours_.resize(static_cast<size_t>(o_.classes * c));
  Generator g(o_.seed, /*stream=*/UINT64_MAX);
  for (float& v : colours_) v = static_cast<float>(g.normal());
}

void SyntheticImages::read(int64_t index, std::byte* input, std::byte* target) const {
  check_index(index, o_.examples, "synthetic images");
  const auto i = static_cast<uint64_t>(index);
  const auto label = static_cast<int64_t>(Generator(o_.seed, 2 * i).below(static_cast<uint64_t>(o_.classes)));
  std::memcpy(target, &label, sizeof label);
  const int64_t c = o_.shape[0], plane = o_.shape[1] * o_.shape[2];
  auto* x = reinterpret_cast<float*>(input);
  // Uniform on [-sqrt(3), sqrt(3)): variance 1. Words are drawn in place
  // into the output buffer, then turned into floats.
  auto* words = reinterpret_cast<uint32_t*>(input);
  philox_fill(o_.seed, 2 * i + 1, 0, {words, static_cast<size_t>(c * plane)});
  const float scale = 2.0f * std::sqrt(3.0f) / 4294967296.0f, shift = -std::sqrt(3.0f);
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mean = colours_[static_cast<size_t>(label * c + ch)] + shift;
    for (int64_t p = ch * plane; p < (ch + 1) * plane; ++p) x[p] = static_cast<float>(words[p]) * scale + mean;
  }
}

Shape parse_image_shape(std::string_view text) {
  Shape shape;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('x', start), text.size());
    const std::string part(text.substr(start, end - start));
    char* stop = nullptr;
    const long long v = part.empty() ? 0 : std::strtoll(part.c_str(), &stop, 10);
    if (part.empty() || *stop != '\0' || v <= 0) {
      fail<ValueError>("image shape '{}' is not CxHxW with positive sizes (e.g. 3x224x224)", text);
    }
    shape.push_back(v);
    start = end + 1;
  }
  if (shape.size() != 3) fail<ValueError>("image shape '{}' is not CxHxW with positive sizes (e.g. 3x224x224)", text);
  return shape;
}

}  // namespace braid::data
