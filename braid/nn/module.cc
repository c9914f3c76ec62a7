#include "braid/nn/module.h"

#include <map>

#include "braid/base/error.h"

namespace braid::nn {

namespace {

void check_name(const std::string& name) {
  if (name.empty() || name.find('.') != std::string::npos) {
    fail<ValueError>("module: '{}' is not a valid name (non-empty, no dots)", name);
  }
}

}  // namespace

Tensor Module::register_parameter(std::string name, Tensor t) {
  check_name(name);
  t.set_requires_grad(true);
  t.set_memory_category(MemoryCategory::parameters);
  params_.emplace_back(std::move(name), t);
  return t;
}

Tensor Module::register_buffer(std::string name, Tensor t) {
  check_name(name);
  buffers_.emplace_back(std::move(name), t);
  return t;
}

void Module::add_child(std::string name, std::shared_ptr<Module> m) {
  check_name(name);
  if (!m) fail<ValueError>("module: child '{}' is null", name);
  children_.emplace_back(std::move(name), std::move(m));
}

void Module::replace_child(size_t i, std::shared_ptr<Module> m) {
  if (i >= children_.size()) fail<IndexError>("module: child {} of {}", i, children_.size());
  if (!m) fail<ValueError>("module: replacement for child '{}' is null", children_[i].first);
  m->train(training_);
  children_[i].second = std::move(m);
}

void Module::collect(const std::string& prefix, bool params, NamedTensors& out) const {
  for (const auto& [n, t] : params ? params_ : buffers_) out.emplace_back(prefix + n, t);
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", params, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", true, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, out);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out = named_parameters();
  for (auto& nt : named_buffers()) out.push_back(nt);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::map<std::string, Tensor> given(state.begin(), state.end());
  const NamedTensors mine = state_dict();
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source)
  for (const auto& [n, t] : mine) {
    auto it = given.find(n);
    if (it == given.end()) {
      if (strict) fail<ValueError>("load_state_dict: missing key '{}'", n);
      continue;
    }
    if (it->second.shape() != t.shape()) {
      fail<ValueError>("load_state_dict: '{}' has shape {} in the state, {} in the module", n,
                       to_string(it->second.shape()), to_string(t.shape()));
    }
    copies.emplace_back(t, it->second);
    given.erase(it);
  }
  if (!given.empty()) fail<ValueError>("load_state_dict: unexpected key '{}'", given.begin()->first);
  for (auto& [dst, src] : copies) dst.copy_from(src);
}

namespace {

// Points t (every handle of it) at a copy on `device`, keeping its allocator
// label. The gradient moves the same way, keeping its handle too: a plan's
// bucket view or the grad_is_zero mark stay valid on the new memory.
void move_to(const Tensor& t, Device device) {
  if (!t.defined() || t.device() == device) return;
  const MemoryCategory category = t.storage()->category();
  t.set_data(t.to(device).set_memory_category(category));
  const std::shared_ptr<Tensor>& g = t.grad_meta().grad;
  if (g && g->defined() && g->device() != device) {
    const MemoryCategory grad_category = g->storage()->category();
    g->set_data(g->to(device).set_memory_category(grad_category));
  }
}

}  // namespace

Module& Module::to(Device device) {
  for (const auto& [n, t] : params_) move_to(t, device);
  for (const auto& [n, t] : buffers_) move_to(t, device);
  for (const auto& [n, c] : children_) c->to(device);
  return *this;
}

Module& Module::to(DType dtype) {
  auto convert = [dtype](const NamedTensors& tensors) {
    for (const auto& [n, t] : tensors) {
      if (!t.defined() || t.dtype() == dtype || !is_floating(t.dtype())) continue;
      const MemoryCategory category = t.storage()->category();
      t.set_grad(Tensor());
      t.set_data_and_dtype(t.to(dtype).set_memory_category(category));
    }
  };
  convert(params_);
  convert(buffers_);
  for (const auto& [n, c] : children_) c->to(dtype);
  return *this;
}

Device Module::device() const {
  const NamedTensors params = named_parameters();
  if (!params.empty()) return params.front().second.device();
  const NamedTensors buffers = named_buffers();
  return buffers.empty() ? Device::cpu : buffers.front().second.device();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

}  // namespace braid::nn
