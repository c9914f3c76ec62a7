// Sequential: children applied in order; children are named "0", "1", ... as
// in torch.nn.Sequential, so parameter names match PyTorch's ("0.weight").
// A layer may also be added under an explicit name: a pipeline stage holds a
// slice of a model's layers under their names in the whole model ("3", "4"),
// so a stage's state_dict names are the whole model's.
#pragma once

#include "braid/nn/module.h"

namespace braid::nn {

class Sequential final : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers);
  void push_back(std::shared_ptr<Module> layer);
  void push_back(std::string name, std::shared_ptr<Module> layer);
  // Puts `layer` in place of layer i, under the same name (tensor-parallel
  // rewrites swap a layer for its sharded counterpart).
  void replace(size_t i, std::shared_ptr<Module> layer);
  const std::string& name_of(size_t i) const { return children().at(i).first; }
  std::shared_ptr<Module> layer(size_t i) const { return layers_.at(i); }
  Tensor forward(const Tensor& x) override;
  // Runs every layer's forward through `call` from now on (ZeRO stage 3
  // gathers a layer's parameters around it); null: layer.forward(x).
  using LayerCall = std::function<Tensor(size_t index, Module& layer, const Tensor& x)>;
  void set_layer_call(LayerCall call) { call_ = std::move(call); }
  size_t size() const { return layers_.size(); }
  Module& operator[](size_t i) const { return *layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
  LayerCall call_;
};

}  // namespace braid::nn
