// Ensembles (`parallel.strategy = ensemble`, docs/aggregation.md): every rank
// of the job trains a model of its own, member k = world rank k (the trainer
// setup seeds it train.seed + k), and the members never talk while they
// train: no gradient, weight or statistic crosses the wire and nothing is
// merged. They meet only after training, through two collectives:
//
//   average(probs)   the members' mean of their [N, C] class probabilities on
//                    the same N examples (the ensemble's prediction, or a
//                    distillation teacher's soft targets): one all-reduce,
//                    after an all-gather of each member's (N, C) that refuses
//                    members that disagree
//   gather(figures)  every member's few figures (accuracies): one all-gather
//
// Bytes each member sends, counted as bandwidth-optimal algorithms send them
// (all-reduce of B bytes: 2 (K-1)/K B; all-gather of b bytes per rank: (K-1) b):
//   per step        0
//   average         2 (K-1)/K 4 N C  +  (K-1) 16
//   gather(m)       (K-1) 8 m
//
// Each member reads the whole training set (data = whole: replica 0 of 1, in
// its own order since its seed differs) or its 1/K shard (data = shard:
// replica k of K, the shards disjoint). Either way every member writes its
// own checkpoints and member 0 reports for the job (Aggregation::member).
// Given the job's store, members also beat through it (MemberWatch: a few
// bytes per second, no model data), so a member that dies mid-run stops the
// others within the timeout, whatever launched them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/parallel/aggregation.h"
#include "braid/parallel/member_watch.h"

namespace braid::parallel {

enum class EnsembleData { whole, shard };
// "whole" | "shard"; ConfigError otherwise.
EnsembleData parse_ensemble_data(const std::string& name);

struct EnsembleOptions {
  EnsembleData data = EnsembleData::whole;
  comm::Algorithm algorithm = comm::Algorithm::automatic;  // average()'s all-reduce
  Duration timeout = std::chrono::seconds(300);
  // The job's store (read at setup; null: no watch). With it the members beat
  // through the store while they train (MemberWatch), and a member silent for
  // `timeout` fails every other member's next step, naming it: members that
  // exchange nothing would otherwise notice a dead one only after training.
  const comm::Store* store = nullptr;
  // The job's attempt (BRAID_RESTART): its heartbeats get keys of their own.
  // (Not a string prefix: a std::string here trips GCC 12's
  // maybe-uninitialized on PlanOptions temporaries in every caller.)
  int attempt = 0;
};

class Ensemble final : public Aggregation {
 public:
  // `members`: one rank per member (the job's world).
  Ensemble(comm::Communicator members, EnsembleOptions options);

  std::string name() const override { return "ensemble"; }
  // Counts the parameters and starts the watch; no communication between
  // members (they may differ in anything but the shapes average() checks).
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  // PeerError naming the members the watch found dead.
  void after_step() override;
  int replica() const override { return o_.data == EnsembleData::shard ? comm_.rank() : 0; }
  int replicas() const override { return o_.data == EnsembleData::shard ? comm_.size() : 1; }
  int member() const override { return comm_.rank(); }
  nlohmann::json stats() const override;
  std::string report() const override;

  int members() const { return comm_.size(); }
  // Collective: `probs` [N, C] f32 becomes the members' mean, on every
  // member. ConfigError naming the members whose N or C differ from member 0's.
  void average(Tensor& probs);
  // Collective: every member's `figures` (the same count on each),
  // member-major: [members() * figures.size()].
  std::vector<double> gather(const std::vector<double>& figures);
  // The members are done training: collectives from here on are the end's.
  void finish() override { training_ = false; }
  // Bytes this member has sent (the count above), and how many of them while
  // it trained (between setup and finish; stats() reports both).
  double bytes_sent() const { return bytes_; }
  double bytes_sent_training() const { return bytes_training_; }

 private:
  void wait(comm::Work work, const char* what) const;
  std::string dead_members() const;  // "members [1, 3] silent for over 10 s", "" when none known

  comm::Communicator comm_;
  EnsembleOptions o_;
  int64_t parameters_ = 0;
  int64_t steps_ = 0;
  double bytes_ = 0, bytes_training_ = 0;
  bool training_ = false;
  std::unique_ptr<MemberWatch> watch_;
};

}  // namespace braid::parallel
