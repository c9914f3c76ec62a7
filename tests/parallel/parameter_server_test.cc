// The ps strategy against the same reference as allreduce: with bsp and SGD
// on the servers, W workers x batch b must follow 1 process x batch W*b.
// Servers and workers are threads over the in-process transport.
#include <gtest/gtest.h>

#include "braid/comm/transport/inproc.h"
#include "braid/parallel/parameter_server.h"
#include "braid/ps/server.h"
#include "tests/parallel/toy_model.h"
#include "tests/testing/first_error.h"

namespace braid::parallel {
namespace {

using namespace braid::parallel::testing;

struct JobRun {
  std::vector<std::vector<std::vector<double>>> workers;
  std::vector<ps::ServerStats> servers;
};

JobRun train_through_servers(int servers, int workers, const ps::PsConfig& config, int64_t n_push = 1,
                          int64_t n_fetch = 1) {
  auto world = comm::InprocWorld::create(servers + workers);
  auto t = world->transports();
  JobRun run;
  run.workers.resize(static_cast<size_t>(workers));
  run.servers.resize(static_cast<size_t>(servers));
  test::run_threads_first_error(
      servers + workers,
      [&](int r) {
        if (r < servers) {
          ps::Server server(*t[static_cast<size_t>(r)], {.servers = servers, .workers = workers});
          server.run();
          run.servers[static_cast<size_t>(r)] = server.stats();
          return;
        }
        const int w = r - servers;
        set_num_threads(1);
        // Workers start from different inits; worker 0's must win.
        ToyModel<float> m(w == 0 ? 7 : 50 + static_cast<uint64_t>(w));
        ParameterServer strategy(std::shared_ptr<comm::Transport>(std::move(t[static_cast<size_t>(r)])),
                            {.config = config, .servers = servers, .n_fetch = n_fetch, .n_push = n_push});
        strategy.setup(m.params, {}, {});
        for (int64_t step = 0; step < kSteps; ++step) {
          auto [x, y] = global_batch<float>(step, workers * kBatch);
          const Tensor xs = slice(x, 0, w * kBatch, (w + 1) * kBatch);
          const Tensor ys = slice(y, 0, w * kBatch, (w + 1) * kBatch);
          for (auto& p : m.params) {
            if (p.tensor.grad().defined()) p.tensor.grad().fill(0);
          }
          backward(m.loss(xs, ys));
          strategy.step(kLr);
        }
        strategy.finish();
        run.workers[static_cast<size_t>(w)] = m.values();
      },
      [&] { world->shutdown("a rank failed"); });
  return run;
}

class PsBsp : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(PsBsp, EqualsOneProcessWithTheWholeBatch) {
  const auto [servers, workers] = GetParam();
  const auto expected = train_single<float>(workers);
  const JobRun run = train_through_servers(servers, workers, {.consistency = ps::Consistency::bsp});
  for (int w = 0; w < workers; ++w) {
    const auto& got = run.workers[static_cast<size_t>(w)];
    for (size_t k = 0; k < expected.size(); ++k) {
      for (size_t i = 0; i < expected[k].size(); ++i)
        ASSERT_NEAR(got[k][i], expected[k][i], 1e-5) << "worker " << w << " param " << k << " elem " << i;
    }
  }
  for (const auto& s : run.servers) EXPECT_EQ(s.updates, kSteps);
}

INSTANTIATE_TEST_SUITE_P(Worlds, PsBsp,
                         ::testing::Values(std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 3}, std::pair{3, 4}));

TEST(PsDownpour, PushesAndFetchesEveryNSteps) {
  // n_push = 2: each push carries two steps' gradients, so a server sees kSteps / 2 clocks per worker.
  const JobRun run = train_through_servers(2, 2, {.consistency = ps::Consistency::asp, .updater = {.name = "adagrad"}},
                                        /*n_push=*/2, /*n_fetch=*/2);
  for (const auto& s : run.servers) {
    EXPECT_EQ(s.gradients, 2 * (kSteps / 2));
    EXPECT_EQ(s.updates, s.gradients);  // asp applies each push on arrival
  }
  // The workers trained the shared model: both moved away from worker 0's start.
  const auto start = ToyModel<float>(7).values();
  for (const auto& w : run.workers) EXPECT_NE(w, start);
}

}  // namespace
}  // namespace braid::parallel
