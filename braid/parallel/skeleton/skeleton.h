// Skeleton-network model partition (`parallel.strategy = skeleton`,
// docs/skeleton.md): a replica-aggregation rule in the spirit of DistBelief's
// random model partition. Every replica steps its own optimizer on its own
// data (no gradient all-reduce); afterwards
//
//   every step       entries outside the skeleton that this rank does not own
//                    go back to their last merged values (each is trained by
//                    its owner alone); the skeleton's entries are averaged
//                    over the data axis, packed into one all-reduce of k of
//                    the model's n entries
//   every N steps    merge: each entry outside the skeleton is taken from its
//                    owner (one all-gather of the owners' values and
//                    gradients), buffers are averaged, so every rank holds the
//                    same model; then the skeleton becomes the top fraction by
//                    |w| + |grad w| (weights merged, gradients the skeleton's
//                    averaged ones or the owner's) and the rest get new random
//                    owners, drawn alike on every rank from (seed, merge round)
//   finish()         a last merge, so the evaluated and saved model is the
//                    merged one on every rank
//
// With fraction 1 every entry is in the skeleton: plain model averaging after
// every local step, with nothing to merge or choose. The first skeleton, at
// setup, is chosen by |w| alone.
//
// Bytes each rank sends, counted as bandwidth-optimal algorithms send them
// (all-reduce of B bytes: 2 (W-1)/W B; all-gather of b bytes per rank: (W-1) b),
// with s the bytes of one entry:
//   per step         2 (W-1)/W k s                      (full averaging: 2 (W-1)/W n s)
//   per merge        (W-1) 2 m s, m = max entries a rank owns ~ (n-k)/W,
//                    + 2 (W-1)/W k s for the skeleton's gradients
// so about f + (1 - f)/N of full averaging per step.
#pragma once

#include <cstdint>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/parallel/aggregation.h"
#include "braid/parallel/flat_replica.h"

namespace braid::parallel::skeleton {

struct SkeletonOptions {
  double fraction = 0.1;  // of the entries in the skeleton, (0, 1]
  int64_t every = 20;     // steps between merges (and new skeletons), >= 1
  uint64_t seed = 0;      // the owners' draw; the same on every rank
  comm::Algorithm algorithm = comm::Algorithm::automatic;  // the skeleton's all-reduce
  Duration timeout = std::chrono::seconds(300);
};

class SkeletonPartition final : public Aggregation {
 public:
  // `data_axis`: the replicas of this rank's shard of the model.
  SkeletonPartition(comm::Communicator data_axis, SkeletonOptions options);

  std::string name() const override { return "skeleton"; }
  // Checks that the replicas agree on the model and `description`, makes
  // them start from data rank 0's parameters and buffers, and picks the first
  // skeleton (or the one a checkpoint restored). Parameters must be
  // contiguous, all f32 or all f64.
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void after_step() override;
  void finish() override;
  // Steps, merge round and the skeleton's mask: with the merged model a
  // checkpoint holds, enough for a resumed run to go on with the same
  // skeleton and owners.
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;
  // The merged model (collective; the live replicas are left as they are).
  nn::NamedTensors model_state(const nn::Module& model) override;
  int replica() const override { return comm_.rank(); }
  int replicas() const override { return comm_.size(); }
  nlohmann::json stats() const override;
  std::string report() const override;

  // Merges now (collective): what every N steps and finish() do, without
  // choosing a new skeleton.
  void merge();

  int64_t entries() const { return flat_.entries(); }
  const std::vector<uint8_t>& in_skeleton() const { return skeleton_; }  // [entries]
  const std::vector<int32_t>& owners() const { return owner_; }         // [entries], -1 in the skeleton
  int64_t rounds() const { return round_; }
  // Bytes this rank has sent since setup (the count above) and what full
  // averaging would have sent over the same steps.
  double bytes_sent() const { return bytes_; }
  double full_averaging_bytes() const;

 private:
  void snapshot();                                     // merged_ <- the parameters
  std::vector<double> values() const;                  // [n] the parameters
  std::vector<double> local_grads() const;             // [n] this replica's step gradient
  void choose(const std::vector<double>& importance);  // new skeleton, then owners
  void use_skeleton(std::vector<uint8_t> mask);        // [n] this skeleton, then owners
  void assign_owners();                                // owners of round_ for skeleton_
  double agree_on_skeleton();                          // rank 0's where the ranks' choices differ
  // Each works on `into` (the parameters, or copies of them) and returns the
  // bytes it sent (the count above). `grads` ([n], in: this replica's
  // gradients; out: each entry's gradient as its trainers saw it) travels
  // along where given.
  double average_skeleton(const std::vector<Tensor>& into, std::vector<double>* grads);
  double gather_owned(const std::vector<Tensor>& into, std::vector<double>* grads);  // the rest from owners
  double average(const std::vector<Tensor>& tensors);  // in place
  double average_buffers();
  void commit_merge();  // the parameters are the merged model
  void wait(comm::Work work, const char* what) const;
  void apply_pending();

  comm::Communicator comm_;
  SkeletonOptions o_;
  FlatParams flat_;                    // the parameters, entries numbered in registration order
  std::vector<NamedParameter> buffers_;  // floating ones, averaged at merges
  Tensor merged_;                      // [n] every entry's value at the last merge
  std::vector<uint8_t> skeleton_;      // [n] 1: in the skeleton
  std::vector<int32_t> owner_;         // [n]
  std::vector<uint8_t> keep_;          // [n] skeleton or owned here: not restored after a step
  std::vector<int64_t> skeleton_index_, mine_;  // sorted entry numbers
  int64_t most_owned_ = 0;             // m: entries of the rank that owns most
  int64_t steps_ = 0, last_merge_ = 0, round_ = 0;
  int64_t steps_here_ = 0, merges_ = 0;  // this process's, for stats()
  double bytes_ = 0;
  nlohmann::json pending_;             // state loaded before setup
  bool ready_ = false;
};

}  // namespace braid::parallel::skeleton
