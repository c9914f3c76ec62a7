// `train.budget = job`: the epochs count every replica's steps together, so
// with one replica slowed a fast one goes on past its own epochs and takes the
// slow one's share, and the job still ends on the budget. Workers and a
// parameter server are threads over the in-process transport.
#include <gtest/gtest.h>

#include <numeric>

#include "braid/base/thread_pool.h"
#include "braid/comm/transport/inproc.h"
#include "braid/data/loader.h"
#include "braid/data/sampler.h"
#include "braid/nn/activation.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/sequential.h"
#include "braid/optim/schedule.h"
#include "braid/optim/sgd.h"
#include "braid/parallel/averaging/easgd.h"
#include "braid/parallel/parameter_server.h"
#include "braid/ps/server.h"
#include "braid/train/trainer.h"
#include "tests/testing/first_error.h"
#include "tests/train/blobs.h"

namespace braid::train {
namespace {

using testing::Blobs;

constexpr int kWorkers = 2;
constexpr int64_t kExamples = 320, kBatch = 16, kEpochs = 2;
constexpr double kLr = 0.05;
constexpr int64_t kPlanned = kEpochs * kExamples / kWorkers / kBatch;  // each replica's own steps: 20

struct JobRun {
  std::vector<int64_t> steps;      // per worker
  std::vector<int64_t> job_steps;  // what each counted at the end
  std::vector<double> lr;          // each one's learning rate at its own step kPlanned (0: it took fewer)
};

class LrAtPlannedEnd final : public Callback {
 public:
  void on_step(const StepMetrics& m) override {
    if (m.step == kPlanned) lr = m.lr;
  }
  double lr = 0;
};

// One server and kWorkers workers train the blobs under the aggregation
// `make(transport)` returns; worker 1 sleeps `slow_ms` every step.
template <class Make>
JobRun train_job(bool job_budget, double slow_ms, Make make) {
  auto world = comm::InprocWorld::create(1 + kWorkers);
  auto t = world->transports();
  JobRun run{std::vector<int64_t>(kWorkers), std::vector<int64_t>(kWorkers), std::vector<double>(kWorkers)};
  test::run_threads_first_error(
      1 + kWorkers,
      [&](int r) {
        if (r == 0) {
          ps::Server server(*t[0], {.servers = 1, .workers = kWorkers});
          server.run();
          return;
        }
        set_num_threads(1);
        const int w = r - 1;
        Generator gen(11);
        auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
            std::make_shared<nn::Linear>(4, 16, gen), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Linear>(16, 3, gen)});
        auto train = std::make_shared<data::Loader>(
            std::make_shared<Blobs>(kExamples, 1),
            std::make_shared<data::DistributedSampler>(kExamples,
                                                       data::DistributedSamplerOptions{.rank = w, .world = kWorkers}),
            data::LoaderOptions{.batch_size = kBatch, .workers = 0});
        auto opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = kLr});
        parallel::PlanParts parts;
        parts.aggregation = make(std::shared_ptr<comm::Transport>(std::move(t[static_cast<size_t>(r)])));
        // Cosine from kLr to 0 over one replica's planned steps.
        Trainer trainer(model, std::move(opt), std::make_unique<optim::CosineLR>(kLr, kPlanned, 0.0),
                        nn::cross_entropy_loss, train, nullptr,
                        {.epochs = kEpochs, .job_budget = job_budget, .checkpoints = false, .straggler_rank = 1,
                         .straggler_ms = slow_ms});
        trainer.set_plan(std::make_shared<parallel::Plan>(std::move(parts)));
        auto lr = std::make_shared<LrAtPlannedEnd>();
        trainer.add_callback(lr);
        trainer.fit();
        run.steps[static_cast<size_t>(w)] = trainer.step();
        run.job_steps[static_cast<size_t>(w)] = *trainer.plan().job_steps();
        run.lr[static_cast<size_t>(w)] = lr->lr;
      },
      [&] { world->shutdown("a rank failed"); });
  return run;
}

auto easgd(int64_t tau) {
  return [tau](std::shared_ptr<comm::Transport> t) -> std::unique_ptr<parallel::Aggregation> {
    return std::make_unique<parallel::averaging::Easgd>(
        std::move(t), 1, parallel::averaging::EasgdOptions{.beta = 0.5, .tau = tau, .async = true});
  };
}

TEST(JobBudget, EachReplicaItsOwnEpochsByDefault) {
  const JobRun run = train_job(false, 5.0, easgd(2));
  EXPECT_EQ(run.steps, std::vector<int64_t>(kWorkers, kPlanned));
  // Worker 0 waited for the other's last exchange: it counts all of them.
  EXPECT_EQ(run.job_steps[0], kWorkers * kPlanned);
}

TEST(JobBudget, AFastReplicaTakesTheSlowOnesSteps) {
  const int64_t tau = 2;
  const JobRun run = train_job(true, 20.0, easgd(tau));
  const int64_t total = std::accumulate(run.steps.begin(), run.steps.end(), int64_t{0});
  const int64_t budget = kWorkers * kPlanned;
  // Each worker notices the spent budget at most an exchange (tau steps) after the fact.
  EXPECT_GE(total, budget);
  EXPECT_LE(total, budget + 2 * kWorkers * tau);
  EXPECT_GT(run.steps[0], kPlanned) << "the fast worker stopped at its own epochs";
  EXPECT_LT(run.steps[1], kPlanned) << "the slow worker was not relieved";
  EXPECT_GE(run.job_steps[0], budget);
  // The schedule follows the job, about half done when the fast worker has
  // taken one replica's planned steps (its own count would be at the end).
  EXPECT_GT(run.lr[0], 0.2 * kLr);
}

// Downpour-style asp pushes every n_push steps: the count is pushes x n_push.
TEST(JobBudget, CountsParameterServerPushes) {
  const int64_t n_push = 2;
  const JobRun run = train_job(true, 20.0, [&](std::shared_ptr<comm::Transport> t) -> std::unique_ptr<parallel::Aggregation> {
    return std::make_unique<parallel::ParameterServer>(
        std::move(t), parallel::ParameterServerOptions{.config = {.consistency = ps::Consistency::asp},
                                                       .servers = 1, .n_push = n_push});
  });
  const int64_t total = std::accumulate(run.steps.begin(), run.steps.end(), int64_t{0});
  EXPECT_GE(total, kWorkers * kPlanned);
  EXPECT_LE(total, kWorkers * kPlanned + 2 * kWorkers * n_push);
  EXPECT_GT(run.steps[0], kPlanned);
}

TEST(JobBudget, RefusedWhereReplicasDoNotCountTogether) {
  Generator gen(1);
  auto model = std::make_shared<nn::Sequential>(
      std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(4, 3, gen)});
  auto train = std::make_shared<data::Loader>(std::make_shared<Blobs>(32, 1),
                                              std::make_shared<data::SequentialSampler>(32),
                                              data::LoaderOptions{.batch_size = 16, .workers = 0});
  auto opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.05});
  Trainer trainer(model, std::move(opt), nullptr, nn::cross_entropy_loss, train, nullptr,
                  {.epochs = 1, .job_budget = true, .checkpoints = false});
  EXPECT_THROW(trainer.fit(), ConfigError);
}

}  // namespace
}  // namespace braid::train
