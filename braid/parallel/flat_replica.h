// A replica's parameters as one flat vector of entries, for aggregations that
// move whole replicas or whole gradients point-to-point (gossip, hybrid):
// packing and unpacking in registration order, the setup that makes replicas
// start equal, exact averages, and a wait whose error tells the story.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/nn/module.h"
#include "braid/parallel/grad_sync.h"

namespace braid::parallel {

// fn(T{}) for the dtypes FlatParams allows (f32, f64); nothing for others.
template <class Fn>
void visit_flat_dtype(DType t, Fn&& fn) {
  visit_dtype(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) fn(v);
  });
}

class FlatParams {
 public:
  FlatParams() = default;
  // Parameters must be contiguous, all f32 or all f64, all on one device
  // (ValueError naming the parameter and `who`, the strategy, otherwise).
  FlatParams(const std::vector<NamedParameter>& params, const std::string& who);

  int64_t entries() const { return offset_.back(); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t bytes() const { return static_cast<size_t>(entries()) * itemsize(dtype_); }
  const std::vector<Tensor>& tensors() const { return params_; }
  const std::vector<std::string>& names() const { return names_; }
  // [params + 1]: parameter p's entries are [offsets()[p], offsets()[p + 1]).
  const std::vector<int64_t>& offsets() const { return offset_; }
  Tensor empty() const { return Tensor::empty({entries()}, dtype_, device_); }  // [n], beside the parameters

  // [n] <-> the parameters' values, or their gradients (an undefined gradient
  // packs as zeros; unpacking gives it one). On a device the copies stay there
  // (device-to-device, in stream order); `into`/`from` must be on the
  // parameters' device.
  void pack_values(const Tensor& into) const;
  void unpack_values(const Tensor& from) const;
  void pack_grads(const Tensor& into) const;
  void unpack_grads(const Tensor& from) const;
  // `model`'s state with these parameters' values taken from `values` ([n],
  // copied): a checkpoint of a mean, a center or a consensus model.
  nn::NamedTensors state_with(const nn::Module& model, const Tensor& values) const;

 private:
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<int64_t> offset_{0};  // [params + 1] first entry of each parameter
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

// Waits for `work` until `deadline`. A TimeoutError or PeerError comes back
// as the same type with `context()` ("rank 2 of 4 on the data axis: gossip's
// receive of rank 1's weights of step 17") and the time waited in front.
void wait_explained(const comm::Work& work, Deadline deadline, const std::function<std::string()>& context);

// Setup for aggregations whose replicas start equal: checks that the data
// axis agrees on `description` and the shapes, then copies data rank 0's
// parameters and buffers to every rank. Returns the float buffers (integer
// counters stay local), the ones worth averaging.
std::vector<NamedParameter> start_replicas_equal(comm::Communicator& comm, const std::vector<NamedParameter>& params,
                                                 const std::vector<NamedParameter>& buffers,
                                                 const nlohmann::json& description, Duration timeout,
                                                 const std::string& who);

// Averages each tensor over `comm`, in place (contiguous ones; others through
// a copy). Returns the bytes this rank sent, counted as a bandwidth-optimal
// all-reduce sends them: 2 (W-1)/W B per tensor of B bytes.
double average_over(comm::Communicator& comm, const std::vector<Tensor>& tensors, Duration timeout,
                    const std::string& who);

// What a bandwidth-optimal all-reduce of `bytes` sends per rank.
inline double allreduce_bytes(double bytes, int world) { return world > 1 ? 2.0 * (world - 1) / world * bytes : 0.0; }

}  // namespace braid::parallel
