#include "braid/optim/optimizer.h"

#include <algorithm>

#include "braid/base/error.h"
#include "braid/base/json_number.h"

namespace braid::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr)
    : params_(std::move(params)), lr_(lr), buffers_(params_.size()) {
  if (!(lr >= 0)) fail<ValueError>("optimizer: learning rate must be >= 0, got {}", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.defined()) fail<ValueError>("optimizer: parameter {} is undefined", i);
    if (p.dtype() != DType::f32) fail<ValueError>("optimizer: parameter {} is {}, only f32 is supported", i, braid::name(p.dtype()));
    if (!p.is_contiguous()) fail<ValueError>("optimizer: parameter {} is not contiguous", i);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const Tensor& p : params_) {
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      p.zero_grad();
    }
  }
}

void Optimizer::set_decay_mask(std::vector<bool> decays) {
  if (!decays.empty() && decays.size() != params_.size()) {
    fail<ValueError>("optimizer: a decay mask of {} flags for {} parameters", decays.size(), params_.size());
  }
  decays_ = std::move(decays);
}

std::vector<bool> matrix_decay_mask(const std::vector<int64_t>& ndims) {
  std::vector<bool> out;
  for (const int64_t n : ndims) out.push_back(n >= 2);
  return out;
}

std::vector<bool> matrix_decay_mask(const std::vector<Tensor>& params) {
  std::vector<int64_t> ndims;
  for (const Tensor& p : params) ndims.push_back(p.ndim());
  return matrix_decay_mask(ndims);
}

Tensor& Optimizer::buffer(size_t i, const std::string& buf_name, bool* created) {
  auto& m = buffers_.at(i);
  auto it = m.find(buf_name);
  if (created) *created = it == m.end();
  if (it == m.end()) {
    // On the parameter's device: a step captured on the meta device makes
    // meta buffers, not real memory.
    Tensor t = Tensor::empty(params_[i].shape(), DType::f32, params_[i].device());
    t.fill(0.0);
    t.set_memory_category(MemoryCategory::optimizer_state);
    it = m.emplace(buf_name, t).first;
  }
  return it->second;
}

const Tensor& Optimizer::refresh_scalars() {
  double* s = scalars_.data<double>();
  s[0] = lr_;
  s[1] = static_cast<double>(steps_ + 1);
  ++scalars_version_;
  return scalars_;
}

const Tensor& Optimizer::scalars_on(Device device) {
  if (device.is_cpu() || device == Device::meta) return scalars_;
  auto it = std::find_if(scalars_copies_.begin(), scalars_copies_.end(),
                         [&](const ScalarsCopy& c) { return c.device == device; });
  if (it == scalars_copies_.end()) {
    scalars_copies_.push_back({device, Tensor::empty(scalars_.shape(), scalars_.dtype(), device)});
    it = scalars_copies_.end() - 1;
  }
  if (it->version != scalars_version_) {
    it->values.copy_from(scalars_);
    it->version = scalars_version_;
  }
  return it->values;
}

bool Optimizer::has_buffer(size_t i, const std::string& buf_name) const {
  return buffers_.at(i).count(buf_name) != 0;
}

float* Optimizer::HostStaging::stage(const Tensor& t, bool write) {
  if (t.dtype() != DType::f32 || !t.is_contiguous()) {
    fail<ValueError>("optimizer: parameters, gradients and state must be contiguous f32 (got {} {})",
                     braid::name(t.dtype()), to_string(t.shape()));
  }
  if (t.device().is_cpu() || t.is_meta()) return t.data<float>();  // meta: data() says why not
  auto it = std::find_if(staged_.begin(), staged_.end(), [&](const Staged& s) { return s.source.same(t); });
  if (it == staged_.end()) {
    staged_.push_back({t, t.to(Device::cpu)});
    it = staged_.end() - 1;
  }
  it->dirty = it->dirty || write;
  return it->host.data<float>();
}

float* Optimizer::HostStaging::writable(const Tensor& t) { return stage(t, true); }

const float* Optimizer::HostStaging::readable(const Tensor& t) { return stage(t, false); }

const float* Optimizer::HostStaging::grad(const Tensor& param) {
  const Tensor g = param.grad();
  if (g.dtype() != DType::f32 || !g.is_contiguous()) {
    fail<ValueError>("optimizer: gradient must be contiguous f32 (got {})", braid::name(g.dtype()));
  }
  return readable(g);
}

void Optimizer::HostStaging::write_back() {
  for (Staged& s : staged_) {
    if (s.dirty) s.source.copy_from(s.host);
    s.dirty = false;
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState s;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    for (const auto& [buf_name, t] : buffers_[i]) s.tensors.emplace_back(fmt::format("{}.{}", i, buf_name), t);
  }
  s.scalars = {{"name", name()}, {"lr", lr_}, {"steps", steps_}, {"num_params", params_.size()},
               {"hyper", hyper_parameters()}};
  return s;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  const nlohmann::json& j = state.scalars;
  if (!j.is_object() || !j.contains("name")) fail<ValueError>("optimizer state: missing scalars");
  if (j.at("name").get<std::string>() != name()) {
    fail<ValueError>("optimizer state is for '{}', this optimizer is '{}'", j.at("name").get<std::string>(), name());
  }
  if (json_integer<size_t>(j.at("num_params")) != params_.size()) {
    fail<ValueError>("optimizer state has {} parameters, this optimizer has {}", json_integer<size_t>(j.at("num_params")),
                     params_.size());
  }
  std::vector<std::map<std::string, Tensor>> bufs(params_.size());
  for (const auto& [key, t] : state.tensors) {
    const size_t dot = key.find('.');
    if (dot == std::string::npos) fail<ValueError>("optimizer state: bad buffer name '{}'", key);
    size_t i = 0;
    try {
      i = std::stoul(key.substr(0, dot));
    } catch (const std::exception&) {
      fail<ValueError>("optimizer state: bad buffer name '{}'", key);
    }
    if (i >= params_.size()) fail<ValueError>("optimizer state: buffer '{}' names parameter {} of {}", key, i, params_.size());
    if (t.shape() != params_[i].shape()) {
      fail<ValueError>("optimizer state: buffer '{}' has shape {}, parameter has {}", key, to_string(t.shape()),
                       to_string(params_[i].shape()));
    }
    // On the parameter's device, whatever device and dtype the state was saved
    // from (checkpoints hold host tensors).
    Tensor b = Tensor::empty(params_[i].shape(), DType::f32, params_[i].device());
    b.copy_from(t);
    b.set_memory_category(MemoryCategory::optimizer_state);
    bufs[i][key.substr(dot + 1)] = b;
  }
  buffers_ = std::move(bufs);
  lr_ = j.at("lr").get<double>();
  steps_ = json_integer<int64_t>(j.at("steps"));
  set_hyper_parameters(j.value("hyper", nlohmann::json::object()));
}

}  // namespace braid::optim
