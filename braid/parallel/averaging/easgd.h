// Elastic averaging SGD (Zhang, Choromanska & LeCun, 2015; `parallel.strategy
// = easgd`, docs/aggregation.md). Each of the W workers trains its own x_i
// with its local optimizer; a center variable x~ holds the consensus, and
// every tau steps each worker and the center pull towards each other with the
// moving rate alpha = beta / W:
//
//   synchronous   (collectives; x~ kept identically on every worker)
//     x_i <- x_i - alpha (x_i - x~)
//     x~  <- x~ + beta (mean_i x_i - x~)          (= x~ + alpha sum_i (x_i - x~))
//   asynchronous  (x~ on parameter servers; a worker never waits for another)
//     pull x~;  d = alpha (x_i - x~);  x_i <- x_i - d;  x~ <- x~ + d  (a push)
//
// The center is the model the job produces: finish() and checkpoints hold it.
// beta = 0 is independent training; BatchNorm buffers are averaged at the end
// (synchronous) or stay each worker's own (asynchronous: the servers hold
// parameters only).
#pragma once

#include <memory>
#include <vector>

#include "braid/parallel/aggregation.h"
#include "braid/parallel/averaging/center_on_servers.h"
#include "braid/parallel/averaging/replica_exchange.h"

namespace braid::parallel::averaging {

struct EasgdOptions {
  double beta = 0.9;  // alpha = beta / W, in [0, 1]
  int64_t tau = 4;    // steps between exchanges, >= 1
  bool async = false; // the center on parameter servers (make_plan picks the constructor)
  comm::Algorithm algorithm = comm::Algorithm::automatic;
  Duration timeout = std::chrono::seconds(300);
};

class Easgd final : public Aggregation {
 public:
  // Synchronous, over the data axis.
  Easgd(comm::Communicator data_axis, EasgdOptions options);
  // Asynchronous: the center on `servers` parameter servers (the transport's first ranks).
  Easgd(std::shared_ptr<comm::Transport> transport, int servers, EasgdOptions options);

  std::string name() const override { return center_on_servers_ ? "easgd-async" : "easgd"; }
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  void after_step() override;
  // Asynchronous: every worker's exchanges, tau steps each.
  std::optional<int64_t> job_steps() const override;
  // Every worker takes the center.
  void finish() override;
  // The center in the parameters for an evaluation, and back: synchronous,
  // the one every worker holds; asynchronous, as this worker last pulled it
  // plus its own push (no request to the servers).
  void begin_evaluation() override;
  void end_evaluation() override;
  nlohmann::json state_dict() const override { return {{"steps", steps_}}; }
  void load_state_dict(const nlohmann::json& state) override;
  // The center (synchronous: every worker holds it; asynchronous: pulled).
  nn::NamedTensors model_state(const nn::Module& model) override;
  int replica() const override;
  int replicas() const override;
  nlohmann::json stats() const override;
  std::string report() const override;

  double alpha() const { return o_.beta / replicas(); }
  const std::vector<float>& center() const { return center_; }
  int64_t exchanges() const { return exchanges_; }

 private:
  void exchange();

  EasgdOptions o_;
  Exchange world_;
  std::unique_ptr<CenterOnServers> center_on_servers_;
  FlatParams params_;
  EvaluationSwap evaluation_;
  std::vector<NamedParameter> buffers_;  // floating ones, averaged at the end (synchronous only)
  Tensor flat_;                          // [n] staging
  std::vector<float> center_, mean_, change_;
  int64_t steps_ = 0, steps_here_ = 0, exchanges_ = 0;
  bool ready_ = false, finished_ = false;
};

}  // namespace braid::parallel::averaging
