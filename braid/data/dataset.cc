#include "braid/data/dataset.h"

namespace braid::data {

Example Dataset::get(int64_t index) const {
  check_index(index, size(), "Dataset::get");
  ExampleSpec s = spec();
  Example e{Tensor::empty(s.input_shape, s.input_dtype), Tensor::empty(s.target_shape, s.target_dtype)};
  read(index, static_cast<std::byte*>(e.input.raw_data()), static_cast<std::byte*>(e.target.raw_data()));
  return e;
}

}  // namespace braid::data
