#include "braid/parallel/averaging/replica_exchange.h"

#include <fmt/format.h>

#include <algorithm>

#include "braid/autograd/node.h"
#include "braid/base/deadline.h"
#include "braid/base/error.h"

namespace braid::parallel::averaging {

Exchange::Exchange(comm::Communicator comm, std::string rule, Duration timeout, comm::Algorithm algorithm)
    : comm_(std::move(comm)), rule_(std::move(rule)), timeout_(timeout), algorithm_(algorithm) {
  if (!comm_.valid()) fail<ValueError>("{}: needs a valid data-axis communicator", rule_);
}

void Exchange::average(std::span<float> values, const char* what, int64_t step) {
  average_ref(comm::BufferRef(values), what, step);
}

void Exchange::average(const Tensor& values, const char* what, int64_t step) {
  if (values.dtype() != DType::f32 || !values.is_contiguous()) {
    fail<ValueError>("{}: averages contiguous f32 values, got {}", rule_, braid::name(values.dtype()));
  }
  const comm::BufferRef ref(values.raw_data(), static_cast<size_t>(values.numel()), DType::f32, values.device());
  average_ref(ref, what, step);
}

void Exchange::average_ref(comm::BufferRef values, const char* what, int64_t step) {
  if (comm_.size() == 1 || values.count == 0) return;
  wait_explained(comm_.allreduce(values, {.op = comm::Op::avg, .algorithm = algorithm_, .timeout = timeout_}),
                 Deadline::after(timeout_ * 2), [&] {
                   return fmt::format("rank {} of {} on the data axis: {}'s {} at step {}", comm_.rank(), comm_.size(),
                                      rule_, what, step);
                 });
  bytes_ += allreduce_bytes(static_cast<double>(values.bytes()));
}

void Exchange::average_buffers(const std::vector<NamedParameter>& buffers) {
  std::vector<Tensor> tensors;
  for (const auto& b : buffers) tensors.push_back(b.tensor);
  bytes_ += average_over(comm_, tensors, timeout_, rule_);
}

void EvaluationSwap::begin(const FlatParams& params, std::span<const float> job_model) {
  if (active_) fail<ValueError>("EvaluationSwap: begin() twice without end()");
  autograd::NoGradGuard no_grad;
  own_ = params.empty();
  params.pack_values(own_);
  Tensor job = params.empty();
  if (static_cast<size_t>(job.numel()) != job_model.size()) {
    fail<ValueError>("EvaluationSwap: the job's model has {} entries, the replica {}", job_model.size(), job.numel());
  }
  std::copy(job_model.begin(), job_model.end(), job.data<float>());
  params.unpack_values(job);
  active_ = true;
}

void EvaluationSwap::end(const FlatParams& params) {
  if (!active_) return;
  autograd::NoGradGuard no_grad;
  params.unpack_values(own_);
  own_ = Tensor();
  active_ = false;
}

FlatParams flat_f32(const std::vector<NamedParameter>& params, const std::string& rule) {
  FlatParams flat(params, rule);
  if (flat.entries() > 0 && flat.dtype() != DType::f32) {
    fail<ValueError>("{}: parameters are {}; the averaging rules need f32", rule, braid::name(flat.dtype()));
  }
  return flat;
}

}  // namespace braid::parallel::averaging
