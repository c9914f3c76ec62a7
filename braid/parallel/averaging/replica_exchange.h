// The collectives the model-averaging family (local SGD, BMUF, EASGD, ADMM)
// runs over the data axis on a replica's flat f32 vectors (parallel/
// flat_replica.h packs them). Every wait has a deadline (twice the timeout)
// and its error names the rank, the rule, the operation and the step; every
// collective is counted in bytes as a bandwidth-optimal algorithm sends them
// (all-reduce of B bytes: 2 (W-1)/W B per rank; broadcast: B).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/parallel/flat_replica.h"

namespace braid::parallel::averaging {

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
  const std::string& rule() const { return rule_; }

  // The mean over the group, in place: host values, or f32 values on any
  // device (a device tensor's all-reduce stays on the device: NCCL or the
  // communicator's staging).
  void average(std::span<float> values, const char* what, int64_t step);
  void average(const Tensor& values, const char* what, int64_t step);
  // The group's mean of the buffers, in place.
  void average_buffers(const std::vector<NamedParameter>& buffers);

  double bytes_sent() const { return bytes_; }
  double allreduce_bytes(double bytes) const { return parallel::allreduce_bytes(bytes, comm_.size()); }

 private:
  void average_ref(comm::BufferRef values, const char* what, int64_t step);

  comm::Communicator comm_;
  std::string rule_;
  Duration timeout_{};
  comm::Algorithm algorithm_ = comm::Algorithm::automatic;
  double bytes_ = 0;
};

// The parameters as one f32 flat vector: FlatParams over `params`, refusing
// f64 (the averaging rules compute in f32).
FlatParams flat_f32(const std::vector<NamedParameter>& params, const std::string& rule);

// A [n] f32 tensor's values as a span, and a vector copied from / into one.
inline std::span<float> values(const Tensor& t) { return {t.data<float>(), static_cast<size_t>(t.numel())}; }

// The job's model (EASGD's center, ADMM's z) in a replica's parameters while
// it is evaluated, and the replica's own values back afterwards
// (Aggregation::begin_evaluation / end_evaluation).
class EvaluationSwap {
 public:
  void begin(const FlatParams& params, std::span<const float> job_model);
  void end(const FlatParams& params);

 private:
  Tensor own_;
  bool active_ = false;
};

}  // namespace braid::parallel::averaging
