// Sequential: children applied in order; children are named "0", "1", ... as
// in torch.nn.Sequential, so parameter names match PyTorch's ("0.weight").
#pragma once

#include "braid/nn/module.h"

namespace braid::nn {

class Sequential final : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers);
  void push_back(std::shared_ptr<Module> layer);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  Module& operator[](size_t i) const { return *layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace braid::nn
