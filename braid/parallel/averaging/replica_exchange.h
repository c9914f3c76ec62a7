// What the model-averaging family (local SGD, BMUF, EASGD, ADMM) shares: a
// replica's parameters as one flat f32 vector, and the collectives the rules
// run on such vectors over the data axis. Every wait has a deadline (twice the
// timeout) and its error names the rank, the rule, the operation and the step;
// every collective is counted in bytes as a bandwidth-optimal algorithm sends
// them (all-reduce of B bytes: 2 (W-1)/W B per rank; broadcast: B).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/nn/module.h"
#include "braid/parallel/grad_sync.h"

namespace braid::parallel::averaging {

class FlatReplica {
 public:
  // Parameters must be contiguous f32; f32 buffers (BatchNorm running
  // statistics) are kept for averaging, others (counters) stay local.
  void bind(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
            const std::string& rule);
  int64_t size() const { return n_; }
  // The parameters into `out` (resized), and back.
  void read(std::vector<float>& out) const;
  void write(std::span<const float> in) const;
  // The parameters' gradients into `out` (zeros where a parameter has none), and back.
  void read_grads(std::vector<float>& out) const;
  void write_grads(std::span<const float> in) const;
  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<NamedParameter>& buffers() const { return buffers_; }
  // `model`'s state with the parameters replaced by copies of `values` (a
  // flat vector laid out as read()): a checkpoint of a center or a mean.
  nn::NamedTensors state_with(const nn::Module& model, std::span<const float> values) const;
  // The parameters' and buffers' names and shapes, for check_agreement.
  nlohmann::json shapes() const { return shapes_; }

 private:
  std::vector<Tensor> params_;
  std::vector<NamedParameter> buffers_;
  nlohmann::json shapes_;
  int64_t n_ = 0;
};

class Exchange {
 public:
  Exchange() = default;
  // `rule` names the strategy in errors ("local SGD").
  Exchange(comm::Communicator comm, std::string rule, Duration timeout,
           comm::Algorithm algorithm = comm::Algorithm::automatic);

  bool valid() const { return comm_.valid(); }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  comm::Communicator& comm() { return comm_; }

  // The mean over the group, in place.
  void average(std::span<float> values, const char* what, int64_t step);
  // The group's mean of the buffers, in place.
  void average_buffers(const std::vector<NamedParameter>& buffers, int64_t step);
  // Group rank `root`'s values on every rank, in place.
  void broadcast(std::span<float> values, int root, const char* what, int64_t step);
  // Waits for `work` (twice the timeout); TimeoutError/PeerError naming the
  // rank, the rule, `what` and the step otherwise.
  void wait(comm::Work work, const char* what, int64_t step) const;

  double bytes_sent() const { return bytes_; }
  void count(double bytes) { bytes_ += bytes; }
  double allreduce_bytes(double bytes) const;

 private:
  comm::Communicator comm_;
  std::string rule_;
  Duration timeout_{};
  comm::Algorithm algorithm_ = comm::Algorithm::automatic;
  double bytes_ = 0;
};

// Starts every replica from group rank 0's parameters and buffers, after
// checking that the replicas train the same model under the same
// configuration (collective).
void start_equal(Exchange& exchange, const FlatReplica& replica, const nlohmann::json& description,
                 Duration timeout);

}  // namespace braid::parallel::averaging
