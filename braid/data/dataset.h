// The Dataset interface: a fixed-size, random-access collection of examples.
//
// An example is an input and a target, each a dense array of a fixed shape and
// dtype (the dataset's ExampleSpec). Datasets write examples straight into a
// row of a caller-owned batch buffer instead of returning a Tensor per example:
// the loader fills reusable [batch, ...] buffers with no allocation per sample,
// so it keeps up with a 30k samples/s MLP epoch on one worker thread.
#pragma once

#include <cstdint>
#include <span>

#include "braid/base/error.h"
#include "braid/tensor/tensor.h"

namespace braid::data {

// Per-example layout. A batch of B examples has input shape [B, input_shape...]
// and target shape [B, target_shape...] (a class label is target_shape {}).
struct ExampleSpec {
  Shape input_shape;
  DType input_dtype = DType::f32;
  Shape target_shape;
  DType target_dtype = DType::i64;

  size_t input_bytes() const { return static_cast<size_t>(numel(input_shape)) * itemsize(input_dtype); }
  size_t target_bytes() const { return static_cast<size_t>(numel(target_shape)) * itemsize(target_dtype); }
};

// One example in freshly allocated tensors (tests and tools; loaders use read()).
struct Example {
  Tensor input;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual ExampleSpec spec() const = 0;
  // Writes example `index` (0 <= index < size()) into `input` (spec().input_bytes()
  // bytes, of spec().input_dtype) and `target` (spec().target_bytes()). Must be
  // safe to call from several threads at once.
  virtual void read(int64_t index, std::byte* input, std::byte* target) const = 0;

  // Bounds-checked read into new tensors of the spec's shapes.
  Example get(int64_t index) const;
};

// Throws IndexError unless 0 <= index < size (`what` names the dataset).
// Inline, so the file-format readers need nothing of the tensor library (the
// fuzz harnesses, fuzz/, build them alone).
inline void check_index(int64_t index, int64_t size, const char* what) {
  if (index < 0 || index >= size) {
    fail<IndexError>("{}: example index {} out of range [0, {})", what, index, size);
  }
}

}  // namespace braid::data
