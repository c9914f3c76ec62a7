// D-PSGD, decentralised parallel SGD (Lian et al. 2017; `parallel.strategy =
// gossip`, docs/aggregation.md). Replicas never all meet: each step every
// replica averages with its neighbours in a fixed graph (mixing.h) while
// taking its own optimizer step,
//
//   x_i(k+1) = sum_j W_ij x_j(k) - gamma u_i(k)
//
// with u_i(k) the local optimizer's update at x_i(k) on replica i's batch.
// Per step:
//
//   before_forward   snapshot x_i(k); send it to the out-neighbours and post
//                    the receives of the in-neighbours' x_j(k): the exchange
//                    runs while forward and backward compute
//   (optimizer)      x_i <- x_i(k) - gamma u_i(k)
//   after_step       wait for the neighbours, then
//                    x_i += sum_{j != i} W_ij (x_j(k) - x_i(k))
//   finish           one exact average (all-reduce) of parameters and float
//                    buffers, so the evaluated and saved model is the
//                    consensus x-bar (gossip.final_average; off: each keeps
//                    its own)
//
// BatchNorm running statistics are not mixed: each replica keeps its own and
// they are averaged at finish (with the parameters) and in checkpoints.
// Checkpoints hold the average x-bar (model_state, a collective on copies;
// the live replicas go on as they were). The average of the replicas moves
// only by the mean update, since W is doubly stochastic.
//
// gossip.mode = async (latest_exchange.h) waits for no neighbour: at
// before_forward a rank sends x_i(k) to its out-neighbours if its previous
// message has left; at after_step it takes what has arrived and mixes, once
// each, with the in-neighbours' latest weights that are new since its last
// step, unless their sender's step is more than gossip.max_staleness behind
// its own (a weight not mixed stays on x_i):
//
//   x_i <- x_i + sum_{j new} W_ij (x_j(latest) - x_i)
//
// A slow replica then slows no one (its neighbours mix with its weights when
// they come, and without them once it is too far behind), at the price of the exact
// average: stale values make the mixing no longer doubly stochastic, so the
// replicas' mean drifts by what the stale differences carry; the final
// exact average is unchanged. At finish every rank tells its neighbours it is
// done and waits for theirs (a fast rank waits there for a slow one's budget).
//
// Bytes each rank sends per step: |D| n s (n entries of s bytes to each of its
// |D| out-neighbours; ring 2 n s, exponential ceil(log2 P) n s), against
// 2 (P-1)/P n s for a bandwidth-optimal all-reduce: gossip saves latency and
// global synchronisation, not bytes per rank.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/parallel/aggregation.h"
#include "braid/parallel/flat_replica.h"
#include "braid/parallel/gossip/latest_exchange.h"
#include "braid/parallel/gossip/mixing.h"

namespace braid::parallel::gossip {

struct GossipOptions {
  Topology topology = Topology::ring;
  int torus_rows = 0;            // torus: rows of the grid; 0 = auto (mixing.h)
  bool final_average = true;     // finish() leaves every replica at the exact average
  int64_t consensus_every = 0;   // steps between consensus-distance measurements (0: at finish only)
  bool async = false;            // gossip.mode = async: never wait for a neighbour within the run
  int64_t max_staleness = 8;     // async: weights sent more than this many steps behind this rank's are not mixed
  Duration timeout = std::chrono::seconds(300);
};

class Gossip final : public Aggregation {
 public:
  // `data_axis`: the replicas of this rank's shard of the model.
  Gossip(comm::Communicator data_axis, GossipOptions options);

  std::string name() const override { return "gossip"; }
  // Checks that the replicas agree on the model and `description` and makes
  // them start from data rank 0's parameters and buffers. Logs the topology,
  // the neighbours, W (small worlds) and the spectral gap.
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void before_forward() override;
  void after_step() override;
  void finish() override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;
  // x-bar and the averaged buffers (collective; the replicas stay as they are).
  nn::NamedTensors model_state(const nn::Module& model) override;
  int replica() const override { return comm_.rank(); }
  int replicas() const override { return comm_.size(); }
  nlohmann::json stats() const override;
  std::string report() const override;

  const MixingGraph& graph() const { return graph_; }
  // mean_i ||x_i - x-bar||^2 over the data axis (collective, f64 sums; one
  // all-reduce of the parameters and one of a number). Not counted in bytes.
  double consensus_distance();
  double bytes_sent() const { return bytes_; }
  int64_t steps() const { return steps_; }

 private:
  struct Exchange {
    std::vector<comm::Work> sends, recvs;
  };
  // x-bar into `mean` ([n]) and mean_i ||x_i - x-bar||^2.
  double measure(const Tensor& mean);
  void mix();
  void mix_latest();  // async
  double mean_staleness() const {  // async: of the neighbour weights mixed
    return mixed_ > 0 ? static_cast<double>(age_sum_) / static_cast<double>(mixed_) : 0.0;
  }
  void wait(const comm::Work& work, const std::string& what) const;

  comm::Communicator comm_;
  GossipOptions o_;
  MixingGraph graph_;
  std::vector<int> in_, out_;  // neighbours of this rank
  FlatParams flat_;
  std::vector<NamedParameter> buffers_;
  // One step's exchange at a time, so its buffers live here, allocated once:
  // [n] x_i(k), and [in-neighbours][n] x_j(k).
  Tensor sent_;
  std::vector<Tensor> got_;
  std::optional<Exchange> exchange_;  // started by before_forward, done by after_step
  std::unique_ptr<LatestExchange> latest_;  // async
  bool stepping_ = false;                   // async: between before_forward and after_step
  int64_t mixed_ = 0, age_sum_ = 0, too_old_ = 0;  // async: weights mixed, their staleness summed, too old
  int64_t steps_ = 0, steps_here_ = 0;
  int64_t averaged_at_ = 0;    // steps_ when the replicas last were all equal
  double bytes_ = 0;
  std::optional<double> consensus_;  // the last measurement, before any final average
  int64_t consensus_step_ = 0;
  bool ready_ = false;
};

}  // namespace braid::parallel::gossip
