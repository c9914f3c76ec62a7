// Parameter-server aggregation (`parallel.strategy = ps`): data parallelism
// through parameter servers (braid/ps/).
//
// The servers own the weights and the optimizer; a worker computes gradients
// on its shard of the data and, instead of stepping a local optimizer, pushes
// them and pulls fresh weights:
//   every n_push steps   push the gradients summed since the last push (one clock)
//   every n_fetch steps  pull the weights, waiting as the consistency model says
// With n_push = n_fetch = 1 and bsp this is synchronous SGD (the same
// trajectory as one process with the whole batch); with asp it is plain
// asynchronous SGD; with asp, AdaGrad on the servers and n_fetch, n_push > 1
// it is DistBelief's Downpour SGD. The learning rate of each push is the
// trainer's scheduled one.
#pragma once

#include <memory>

#include "braid/comm/transport/transport.h"
#include "braid/ps/client.h"
#include "braid/ps/config.h"
#include "braid/parallel/aggregation.h"

namespace braid::parallel {

struct ParameterServerOptions {
  ps::PsConfig config{};
  int servers = 1;
  int64_t n_fetch = 1;
  int64_t n_push = 1;
  Duration timeout = std::chrono::seconds(300);
};

class ParameterServer final : public Aggregation {
 public:
  // `transport`: servers are ranks 0..servers-1, this worker one of the rest.
  ParameterServer(std::shared_ptr<comm::Transport> transport, ParameterServerOptions options);
  ~ParameterServer() override;

  std::string name() const override { return "ps"; }
  // Buffers stay local: the servers hold parameters only.
  void setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
             const nlohmann::json& description) override;
  bool owns_optimizer() const override { return true; }
  void step(double lr) override;
  void finish() override;
  // Every worker's pushes, each n_push steps.
  std::optional<int64_t> job_steps() const override { return client_.view().pushes * o_.n_push; }
  int replica() const override { return client_.worker(); }
  int replicas() const override { return client_.workers(); }

  nlohmann::json take_stats() override {
    if (o_.config.codec.name == "none") return nlohmann::json::object();
    nlohmann::json j = client_.take_codec_stats().to_json();
    j["codec"] = o_.config.codec.name;
    return j;
  }

  int64_t clock() const { return clock_; }
  ps::ServerView servers() const { return client_.view(); }

 private:
  void pull(int64_t gate);

  std::shared_ptr<comm::Transport> transport_;
  ParameterServerOptions o_;
  ps::Client client_;
  std::vector<Tensor> params_;
  std::vector<float> weights_, grads_, sending_;
  comm::Work push_ = comm::Work::completed();
  int64_t clock_ = 0, steps_ = 0;
  bool finished_ = false;
};

}  // namespace braid::parallel
