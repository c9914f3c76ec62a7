#include "braid/parallel/flat_replica.h"

#include <cstring>
#include <map>

#include "braid/base/deadline.h"
#include "braid/parallel/agreement.h"

namespace braid::parallel {

FlatParams::FlatParams(const std::vector<NamedParameter>& params, const std::string& who) {
  for (const auto& p : params) {
    const DType t = p.tensor.dtype();
    if (t != DType::f32 && t != DType::f64) {
      fail<ValueError>("{}: parameter {} is {}, not f32 or f64", who, p.name, braid::name(t));
    }
    if (!params_.empty() && t != dtype_) {
      fail<ValueError>("{}: parameters mix {} and {}", who, braid::name(dtype_), braid::name(t));
    }
    if (!p.tensor.is_contiguous()) fail<ValueError>("{}: parameter {} is not contiguous", who, p.name);
    if (!params_.empty() && p.tensor.device() != device_) {
      fail<ValueError>("{}: parameters on {} and {}", who, braid::name(device_), braid::name(p.tensor.device()));
    }
    dtype_ = t;
    device_ = p.tensor.device();
    params_.push_back(p.tensor);
    names_.push_back(p.name);
    offset_.push_back(offset_.back() + p.tensor.numel());
  }
}

namespace {

// Parameter p's entries of a flat [n] tensor, shaped as the parameter.
Tensor entries_of(const Tensor& flat, const Tensor& param, int64_t offset) {
  return flat.as_strided(param.shape(), contiguous_strides(param.shape()), flat.offset() + offset);
}

void check_device(const Tensor& flat, Device device, const char* what) {
  if (flat.device() != device) {
    fail<ValueError>("FlatParams::{}: a flat tensor on {} for parameters on {}", what, braid::name(flat.device()),
                     braid::name(device));
  }
}

}  // namespace

void FlatParams::pack_values(const Tensor& into) const {
  check_device(into, device_, "pack_values");
  if (!device_.is_cpu()) {
    for (size_t p = 0; p < params_.size(); ++p) entries_of(into, params_[p], offset_[p]).copy_from(params_[p]);
    return;
  }
  auto* dst = static_cast<std::byte*>(into.raw_data());
  const size_t item = itemsize(dtype_);
  for (size_t p = 0; p < params_.size(); ++p) {
    std::memcpy(dst + static_cast<size_t>(offset_[p]) * item, params_[p].raw_data(), params_[p].nbytes());
  }
}

void FlatParams::unpack_values(const Tensor& from) const {
  check_device(from, device_, "unpack_values");
  if (!device_.is_cpu()) {
    for (size_t p = 0; p < params_.size(); ++p) params_[p].copy_from(entries_of(from, params_[p], offset_[p]));
    return;
  }
  const auto* src = static_cast<const std::byte*>(from.raw_data());
  const size_t item = itemsize(dtype_);
  for (size_t p = 0; p < params_.size(); ++p) {
    std::memcpy(params_[p].raw_data(), src + static_cast<size_t>(offset_[p]) * item, params_[p].nbytes());
  }
}

void FlatParams::pack_grads(const Tensor& into) const {
  check_device(into, device_, "pack_grads");
  if (!device_.is_cpu()) {
    for (size_t p = 0; p < params_.size(); ++p) {
      const Tensor at = entries_of(into, params_[p], offset_[p]);
      const Tensor g = params_[p].grad();
      if (g.defined()) {
        at.copy_from(g);  // converts a gradient of another dtype, as below
      } else {
        at.fill(0.0);
      }
    }
    return;
  }
  auto* dst = static_cast<std::byte*>(into.raw_data());
  const size_t item = itemsize(dtype_);
  for (size_t p = 0; p < params_.size(); ++p) {
    std::byte* at = dst + static_cast<size_t>(offset_[p]) * item;
    const Tensor g = params_[p].grad();
    if (!g.defined()) {
      std::memset(at, 0, params_[p].nbytes());
      continue;
    }
    const Tensor c = g.to(dtype_).contiguous();
    std::memcpy(at, c.raw_data(), c.nbytes());
  }
}

void FlatParams::unpack_grads(const Tensor& from) const {
  check_device(from, device_, "unpack_grads");
  if (!device_.is_cpu()) {
    for (size_t p = 0; p < params_.size(); ++p) {
      const Tensor at = entries_of(from, params_[p], offset_[p]);
      if (const Tensor g = params_[p].grad(); g.defined()) {
        g.copy_from(at);  // keeps the buffer (a bucket's view) and its dtype
      } else {
        params_[p].set_grad(at.clone());
      }
    }
    return;
  }
  const auto* src = static_cast<const std::byte*>(from.raw_data());
  const size_t item = itemsize(dtype_);
  for (size_t p = 0; p < params_.size(); ++p) {
    const std::byte* at = src + static_cast<size_t>(offset_[p]) * item;
    Tensor g = params_[p].grad();
    if (!g.defined() || g.dtype() != dtype_ || !g.is_contiguous()) {
      Tensor fresh = Tensor::empty(params_[p].shape(), dtype_);
      std::memcpy(fresh.raw_data(), at, fresh.nbytes());
      if (g.defined()) {
        g.copy_from(fresh);  // keeps the buffer (a bucket's view) and its dtype
      } else {
        params_[p].set_grad(fresh);
      }
      continue;
    }
    std::memcpy(g.raw_data(), at, g.nbytes());
  }
}

nn::NamedTensors FlatParams::state_with(const nn::Module& model, const Tensor& values) const {
  if (values.numel() != entries() || values.dtype() != dtype_) {
    fail<ValueError>("FlatParams::state_with: {} {} values for {} {} entries", values.numel(), braid::name(values.dtype()),
                     entries(), braid::name(dtype_));
  }
  const Tensor host = values.to(Device::cpu);  // checkpoints hold host tensors
  const auto* src = static_cast<const std::byte*>(host.raw_data());
  const size_t item = itemsize(dtype_);
  std::map<const void*, Tensor> by_storage;  // a parameter is known by its data
  for (size_t p = 0; p < params_.size(); ++p) {
    Tensor t = Tensor::empty(params_[p].shape(), dtype_);
    std::memcpy(t.raw_data(), src + static_cast<size_t>(offset_[p]) * item, t.nbytes());
    by_storage[params_[p].raw_data()] = t;
  }
  nn::NamedTensors out = model.state_dict();
  for (auto& [name, t] : out) {
    if (auto it = by_storage.find(t.raw_data()); it != by_storage.end()) t = it->second;
  }
  return out;
}

void wait_explained(const comm::Work& work, Deadline deadline, const std::function<std::string()>& context) {
  const auto start = Clock::now();
  auto waited = [&] { return format_duration(std::chrono::duration_cast<Duration>(Clock::now() - start)); };
  try {
    work.wait(deadline);
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("{} waited {}: {}", context(), waited(), e.what());
  } catch (const PeerError& e) {
    fail<PeerError>("{} failed after {}: {}", context(), waited(), e.what());
  }
}

std::vector<NamedParameter> start_replicas_equal(comm::Communicator& comm, const std::vector<NamedParameter>& params,
                                                 const std::vector<NamedParameter>& buffers,
                                                 const nlohmann::json& description, Duration timeout,
                                                 const std::string& who) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& p : params) shapes.push_back({p.name, p.tensor.shape(), std::string(braid::name(p.tensor.dtype()))});
  for (const auto& b : buffers) shapes.push_back({b.name, b.tensor.shape(), std::string(braid::name(b.tensor.dtype()))});
  check_agreement(comm, {{"config", description}, {"params", shapes}}, timeout);
  std::vector<NamedParameter> floats;
  for (const auto& b : buffers) {
    if (b.tensor.dtype() == DType::f32 || b.tensor.dtype() == DType::f64) floats.push_back(b);
  }
  if (comm.size() == 1) return floats;
  std::vector<NamedParameter> all = params;
  all.insert(all.end(), buffers.begin(), buffers.end());
  for (const auto& p : all) {
    const Tensor t = p.tensor.contiguous();
    wait_explained(comm.broadcast({t.raw_data(), static_cast<size_t>(t.numel()), t.dtype(), t.device()},
                                  {.root = 0, .timeout = timeout}),
                   Deadline::after(timeout * 2), [&] {
                     return fmt::format("rank {} of {} on the data axis: {}'s broadcast of data rank 0's {} at setup",
                                        comm.rank(), comm.size(), who, p.name);
                   });
    if (t.raw_data() != p.tensor.raw_data()) p.tensor.copy_from(t);
  }
  return floats;
}

double average_over(comm::Communicator& comm, const std::vector<Tensor>& tensors, Duration timeout,
                    const std::string& who) {
  if (comm.size() == 1) return 0;
  double bytes = 0;
  for (const Tensor& t : tensors) {
    const Tensor c = t.contiguous();
    wait_explained(comm.allreduce({c.raw_data(), static_cast<size_t>(c.numel()), c.dtype(), c.device()},
                                  {.op = comm::Op::avg, .timeout = timeout}),
                   Deadline::after(timeout * 2), [&] {
                     return fmt::format("rank {} of {} on the data axis: {}'s all-reduce (average) of {} entries",
                                        comm.rank(), comm.size(), who, c.numel());
                   });
    if (c.raw_data() != t.raw_data()) t.copy_from(c);
    bytes += allreduce_bytes(static_cast<double>(c.nbytes()), comm.size());
  }
  return bytes;
}

}  // namespace braid::parallel
