#include "braid/parallel/ensemble.h"

#include "braid/base/deadline.h"
#include "braid/parallel/flat_replica.h"

namespace braid::parallel {

EnsembleData parse_ensemble_data(const std::string& name) {
  if (name == "whole") return EnsembleData::whole;
  if (name == "shard") return EnsembleData::shard;
  fail<ConfigError>("ensemble.data = {} (known: whole, shard)", name);
}

Ensemble::Ensemble(comm::Communicator members, EnsembleOptions options) : comm_(std::move(members)), o_(options) {
  if (!comm_.valid()) fail<ConfigError>("parallel.strategy = ensemble needs a job's communicator");
}

void Ensemble::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& /*buffers*/,
                     const nlohmann::json& /*description*/) {
  parameters_ = 0;
  for (const auto& p : params) parameters_ += p.tensor.numel();
  training_ = true;
  if (o_.store && comm_.size() > 1 && !watch_) {
    watch_ = std::make_unique<MemberWatch>(*o_.store, fmt::format("braid/restart{}/ensemble", o_.attempt),
                                           comm_.rank(), comm_.size(), o_.timeout);
  }
}

std::string Ensemble::dead_members() const {
  if (!watch_) return "";
  const std::vector<int> dead = watch_->dead();
  if (dead.empty()) return "";
  return fmt::format("member{} {} silent (no heartbeat through the job's store for over {})", dead.size() > 1 ? "s" : "",
                     dead, format_duration(watch_->max_silence()));
}

void Ensemble::after_step() {
  ++steps_;
  if (watch_ && watch_->any_dead()) {
    fail<PeerError>("ensemble member {} of {}: {}; the ensemble cannot be completed, stopping after step {}",
                    comm_.rank(), comm_.size(), dead_members(), steps_);
  }
}

void Ensemble::wait(comm::Work work, const char* what) const {
  // A member that died or never finished training is named by the
  // communicator's error (the peer, or the ranks that never arrived).
  // The watch, when it has seen a member die, says which one: the peer a
  // collective names may be only a neighbour that already stopped.
  wait_explained(work, Deadline::after(o_.timeout * 2), [&] {
    const std::string dead = dead_members();
    return fmt::format("ensemble member {} of {}: {} after training{}", comm_.rank(), comm_.size(), what,
                       dead.empty() ? dead : " (" + dead + ")");
  });
}

std::vector<double> Ensemble::gather(const std::vector<double>& figures) {
  std::vector<double> all(figures.size() * static_cast<size_t>(comm_.size()));
  wait(comm_.allgather(figures, all, {.timeout = o_.timeout}), "gathering the members' figures");
  const double sent = static_cast<double>((comm_.size() - 1) * figures.size() * sizeof(double));
  bytes_ += sent;
  if (training_) bytes_training_ += sent;
  return all;
}

void Ensemble::average(Tensor& probs) {
  if (probs.dtype() != DType::f32 || probs.ndim() != 2 || !probs.is_contiguous()) {
    fail<ValueError>("Ensemble::average: expects contiguous f32 probabilities [N, C], got {} {}", braid::name(probs.dtype()),
                     to_string(probs.shape()));
  }
  // Every member must hold the same examples and classes, or the all-reduce
  // below would mix rows of different examples (or wait for bytes never sent).
  const std::vector<double> shapes = gather({static_cast<double>(probs.size(0)), static_cast<double>(probs.size(1))});
  std::vector<int> differ;
  for (int m = 1; m < comm_.size(); ++m) {
    if (shapes[2 * m] != shapes[0] || shapes[2 * m + 1] != shapes[1]) differ.push_back(m);
  }
  if (!differ.empty()) {
    fail<ConfigError>("ensemble: members {} predict {} x {} where member 0 predicts {} x {} (examples x classes): the "
                      "members must share the data and the classes", differ, shapes[2 * differ[0]],
                      shapes[2 * differ[0] + 1], shapes[0], shapes[1]);
  }
  comm::BufferRef buf(probs.raw_data(), static_cast<size_t>(probs.numel()), DType::f32);
  wait(comm_.allreduce(buf, {.op = comm::Op::avg, .algorithm = o_.algorithm, .timeout = o_.timeout}),
       "averaging the members' probabilities");
  const double k = comm_.size();
  const double sent = 2 * (k - 1) / k * static_cast<double>(buf.bytes());
  bytes_ += sent;
  if (training_) bytes_training_ += sent;
}

nlohmann::json Ensemble::stats() const {
  return {{"members", comm_.size()},
          {"member", comm_.rank()},
          {"data", o_.data == EnsembleData::shard ? "shard" : "whole"},
          {"parameters_per_member", parameters_},
          {"steps", steps_},
          {"bytes_sent", bytes_},
          {"bytes_sent_training", bytes_training_}};
}

std::string Ensemble::report() const {
  return fmt::format("ensemble: member {} of {} trained {} steps alone on {} training set; {:.0f} bytes sent while "
                     "training", comm_.rank(), comm_.size(), steps_,
                     o_.data == EnsembleData::shard ? "its shard of the" : "the whole", bytes_training_);
}

}  // namespace braid::parallel
