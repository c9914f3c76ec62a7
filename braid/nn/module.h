// Module: a piece of a model with named parameters, buffers and children.
//
// Names are dotted paths in registration order ("0.weight", "block.attn.qkv.bias"),
// the same names PyTorch's state_dict uses for the same structure, so a
// checkpoint written by braid loads into torch and back. Parameters and buffers
// are Tensor handles: load_state_dict copies values into them in place, so
// optimizers holding the same handles see the new values.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // x -> y; every module here maps one tensor to one tensor.
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  // This module's and all descendants' parameters (requires_grad leaves).
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  // Non-trainable state (BatchNorm running statistics).
  NamedTensors named_buffers() const;
  // Parameters then buffers; the tensors are shared, not copied.
  NamedTensors state_dict() const;
  // Copies values into this module's tensors. Throws ValueError naming the key
  // when a shape differs, a key is unknown, or (strict) a key is missing;
  // nothing is modified unless every check passes.
  void load_state_dict(const NamedTensors& state, bool strict = true);

  // Moves every parameter and buffer (and a parameter's gradient) to
  // `device`, in place: each handle keeps its identity (Tensor::set_data), so
  // an optimizer, a plan or a tied module holding the same tensors sees them
  // on the device. Build the optimizer after moving anyway: its state is made
  // on the device of the parameters it first sees. Tensors that shared memory
  // (views of one buffer) each get their own copy.
  Module& to(Device device);
  // Converts every floating-point parameter and buffer to `dtype` (f32 <->
  // f64: what torch's module.double() does), in place like to(Device);
  // gradients are dropped. Tests compare f64 models where f32 rounding
  // decides relu kinks.
  Module& to(DType dtype);
  // The device of the first parameter or buffer; cpu for a module without any.
  Device device() const;

  // Training mode (dropout active, batch statistics) for this module and its children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  int64_t num_parameters() const;

 protected:
  // Registers a parameter (marks it requires_grad) and returns the handle.
  Tensor register_parameter(std::string name, Tensor t);
  Tensor register_buffer(std::string name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> m) {
    add_child(std::move(name), m);
    return m;
  }

  // Child i (in registration order) becomes `m`, keeping its name.
  void replace_child(size_t i, std::shared_ptr<Module> m);

 private:
  void add_child(std::string name, std::shared_ptr<Module> m);
  void collect(const std::string& prefix, bool params, NamedTensors& out) const;

  bool training_ = true;
  NamedTensors params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace braid::nn
