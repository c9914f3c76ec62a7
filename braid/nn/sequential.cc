#include "braid/nn/sequential.h"

namespace braid::nn {

Sequential::Sequential(std::vector<std::shared_ptr<Module>> layers) {
  for (auto& l : layers) push_back(std::move(l));
}

void Sequential::push_back(std::shared_ptr<Module> layer) { push_back(std::to_string(layers_.size()), std::move(layer)); }

void Sequential::push_back(std::string name, std::shared_ptr<Module> layer) {
  if (!layer) fail<ValueError>("Sequential: layer '{}' is null", name);
  layers_.push_back(register_module(std::move(name), std::move(layer)));
}

void Sequential::replace(size_t i, std::shared_ptr<Module> layer) {
  if (i >= layers_.size()) fail<IndexError>("Sequential::replace: layer {} of {}", i, layers_.size());
  if (!layer) fail<ValueError>("Sequential::replace: layer {} is null", i);
  replace_child(i, layer);
  layers_[i] = std::move(layer);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (size_t i = 0; i < layers_.size(); ++i) y = call_ ? call_(i, *layers_[i], y) : layers_[i]->forward(y);
  return y;
}

}  // namespace braid::nn
