#include "braid/data/fashion_mnist.h"

#include <cstring>
#include <filesystem>

#include "braid/data/idx.h"

namespace braid::data {

namespace {

IdxArray read_required(const std::string& dir, const std::string& file) {
  std::string path = (std::filesystem::path(dir) / file).string();
  if (!std::filesystem::exists(path)) {
    fail<IoError>("Fashion-MNIST file {} does not exist; install the Debian package {} "
                  "(apt-get install {}) or set data.path to the folder holding {}",
                  path, kFashionMnistPackage, kFashionMnistPackage, file);
  }
  return read_idx(path);
}

}  // namespace

FashionMnist::FashionMnist(const FashionMnistOptions& o) {
  std::string prefix = o.train ? "train" : "t10k";
  std::string image_file = prefix + "-images-idx3-ubyte.gz";
  std::string label_file = prefix + "-labels-idx1-ubyte.gz";
  IdxArray images = read_required(o.dir, image_file);
  IdxArray labels = read_required(o.dir, label_file);
  if (images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28) {
    fail<IoError>("{}/{}: expected images of shape [n, 28, 28], found {}", o.dir, image_file, to_string(images.dims));
  }
  if (labels.dims.size() != 1 || labels.dims[0] != images.dims[0]) {
    fail<IoError>("{}/{}: expected {} labels (one per image), found shape {}", o.dir, label_file, images.dims[0],
                  to_string(labels.dims));
  }
  for (size_t i = 0; i < labels.values.size(); ++i) {
    if (labels.values[i] >= kClasses) {
      fail<IoError>("{}/{}: label {} at byte {} is not a class in [0, 10)", o.dir, label_file, labels.values[i], 8 + i);
    }
  }
  if (o.normalize && !(o.std > 0)) fail<ValueError>("Fashion-MNIST: normalisation std must be > 0, got {}", o.std);
  n_ = images.dims[0];
  pixels_ = std::move(images.values);
  labels_ = std::move(labels.values);
  scale_ = o.normalize ? 1.0f / (255.0f * o.std) : 1.0f / 255.0f;
  shift_ = o.normalize ? -o.mean / o.std : 0.0f;
}

void FashionMnist::read(int64_t index, std::byte* input, std::byte* target) const {
  const uint8_t* src = pixels_.data() + index * kPixels;
  float* dst = reinterpret_cast<float*>(input);
  // One multiply-add per byte vectorises; a 256-entry table lookup does not
  // (measured: 64 random rows in 20-27 us against 41-58 us).
  for (int64_t i = 0; i < kPixels; ++i) dst[i] = static_cast<float>(src[i]) * scale_ + shift_;
  int64_t label = labels_[index];
  std::memcpy(target, &label, sizeof label);
}

}  // namespace braid::data
