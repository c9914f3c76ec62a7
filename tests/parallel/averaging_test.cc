// The model-averaging family (parallel/averaging/) against references
// computed here, one thread playing every replica: averaging every step with
// plain SGD is synchronous SGD; warm-up steps are synchronous SGD; BMUF with
// eta = 0, zeta = 1 is model averaging and otherwise follows its block update;
// EASGD with beta = 0 is independent training and otherwise follows the
// elastic update (asynchronous with one worker included); ADMM reaches the
// least-squares optimum of the whole data, synchronously and through
// parameter servers with a partial barrier.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/comm/transport/inproc.h"
#include "braid/ops/linear.h"
#include "braid/parallel/averaging/admm.h"
#include "braid/parallel/averaging/easgd.h"
#include "braid/parallel/averaging/model_averaging.h"
#include "braid/ps/server.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/parallel/toy_model.h"
#include "tests/testing/first_error.h"

namespace braid::parallel::averaging {
namespace {

using namespace braid::parallel::testing;
using Values = std::vector<std::vector<double>>;

// Replica `rank`'s rows of global batch `step`.
std::pair<Tensor, Tensor> rows_of(int64_t step, int rank, int world) {
  auto [x, t] = global_batch<float>(step, world * kBatch);
  return {slice(x, 0, rank * kBatch, (rank + 1) * kBatch), slice(t, 0, rank * kBatch, (rank + 1) * kBatch)};
}

void zero_grads(ToyModel<float>& m) {
  for (auto& p : m.params) {
    if (p.tensor.grad().defined()) p.tensor.grad().fill(0);
  }
}

// `steps` plain SGD steps of replica `rank` on its rows, under aggregation `a`.
void train_steps(ToyModel<float>& m, Aggregation& a, int64_t steps, int rank, int world) {
  for (int64_t s = 0; s < steps; ++s) {
    zero_grads(m);
    auto [x, t] = rows_of(s, rank, world);
    backward(m.loss(x, t));
    a.combine_gradients();
    m.sgd_step();
    a.after_step();
  }
}

// Each rank trains ToyModel on its rows with plain SGD under `make`'s
// aggregation for `steps` steps; returns every rank's final parameters.
template <class Make>
std::vector<Values> train(int world, int64_t steps, Make make, bool finish = true) {
  std::vector<Values> out(static_cast<size_t>(world));
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyModel<float> m(rank == 0 ? 7 : 40 + static_cast<uint64_t>(rank));  // rank 0's start must win
    std::unique_ptr<Aggregation> a = make(comm);
    a->setup(m.params, {}, {});
    train_steps(m, *a, steps, rank, world);
    if (finish) a->finish();
    out[static_cast<size_t>(rank)] = m.values();
  });
  return out;
}

// The same replicas in one thread: `combine(models, step)` runs after every
// SGD step; `warm(s)` says whether step s averages gradients first.
template <class Combine>
std::vector<Values> simulate(int world, int64_t steps, Combine combine, int64_t warmup = 0) {
  std::vector<ToyModel<float>> models;
  for (int r = 0; r < world; ++r) models.emplace_back(7);
  for (int64_t s = 0; s < steps; ++s) {
    for (int r = 0; r < world; ++r) {
      zero_grads(models[static_cast<size_t>(r)]);
      auto [x, t] = rows_of(s, r, world);
      backward(models[static_cast<size_t>(r)].loss(x, t));
    }
    if (s < warmup) {  // gradients' mean on every replica
      for (size_t p = 0; p < models[0].params.size(); ++p) {
        std::vector<double> mean(static_cast<size_t>(models[0].params[p].tensor.numel()), 0.0);
        for (auto& m : models) {
          const auto g = m.params[p].tensor.grad().to_vector<double>();
          for (size_t i = 0; i < g.size(); ++i) mean[i] += g[i] / world;
        }
        for (auto& m : models) {
          float* g = m.params[p].tensor.grad().data<float>();
          for (size_t i = 0; i < mean.size(); ++i) g[i] = static_cast<float>(mean[i]);
        }
      }
    }
    for (auto& m : models) m.sgd_step();
    combine(models, s);
  }
  std::vector<Values> out;
  for (auto& m : models) out.push_back(m.values());
  return out;
}

void average_models(std::vector<ToyModel<float>>& models) {
  autograd::NoGradGuard no_grad;
  for (size_t p = 0; p < models[0].params.size(); ++p) {
    const int64_t n = models[0].params[p].tensor.numel();
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (auto& m : models) sum += m.params[p].tensor.data<float>()[i];
      for (auto& m : models) m.params[p].tensor.data<float>()[i] = static_cast<float>(sum / models.size());
    }
  }
}

void expect_near(const Values& got, const Values& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(got[k].size(), want[k].size());
    for (size_t i = 0; i < want[k].size(); ++i) ASSERT_NEAR(got[k][i], want[k][i], tol) << what << " param " << k << " elem " << i;
  }
}

std::function<std::unique_ptr<Aggregation>(comm::Communicator)> averaging(ModelAveragingOptions o) {
  return [o](comm::Communicator c) { return std::make_unique<ModelAveraging>(c, o); };
}

class AveragingWorlds : public ::testing::TestWithParam<int> {};

TEST_P(AveragingWorlds, AveragingEveryStepWithPlainSgdIsSynchronousSgd) {
  const int world = GetParam();
  const Values want = train_single<float>(world);
  const auto got = train(world, kSteps, averaging({.period = 1}));
  for (int r = 0; r < world; ++r) expect_near(got[static_cast<size_t>(r)], want, 2e-5, "rank " + std::to_string(r));
}

TEST_P(AveragingWorlds, WarmupStepsAreSynchronousSgd) {
  const int world = GetParam();
  const Values want = train_single<float>(world);
  const auto got = train(world, kSteps, averaging({.period = 1000, .warmup = kSteps}));
  for (int r = 0; r < world; ++r) expect_near(got[static_cast<size_t>(r)], want, 2e-5, "rank " + std::to_string(r));
}

INSTANTIATE_TEST_SUITE_P(OneToNine, AveragingWorlds, ::testing::Values(1, 2, 3, 4, 5, 7, 9));

TEST(LocalSgd, AveragesAfterStepsCountedAsPyTorchDoes) {
  // Warm-up 1, period 2: gradients averaged at step 0, parameters after steps 1, 3, 5 (k >= 1, (k - 1) % 2 == 0).
  const int world = 3;
  const int64_t steps = 7;
  const auto want = simulate(world, steps, [](std::vector<ToyModel<float>>& models, int64_t k) {
    if (k >= 1 && (k - 1) % 2 == 0) average_models(models);
  }, /*warmup=*/1);
  // Without finish(): step 6 leaves the replicas apart, as the reference does.
  const auto got = train(world, steps, averaging({.period = 2, .warmup = 1}), /*finish=*/false);
  for (int r = 0; r < world; ++r) expect_near(got[static_cast<size_t>(r)], want[static_cast<size_t>(r)], 2e-5, "rank " + std::to_string(r));
  EXPECT_NE(got[0], got[1]);
}

TEST(LocalSgd, HierarchicalAveragesInsideHostsBetweenGlobalAverages) {
  // Hosts a, a, b, b; period 4, host period 2: after steps 0..2 ranks on a
  // host agree (step 2 averaged inside hosts), the hosts do not.
  const int world = 4;
  auto inproc = comm::InprocWorld::create(world);
  std::vector<Values> got(world);
  test::run_threads_first_error(
      world,
      [&](int rank) {
        set_num_threads(1);
        comm::Communicator comm(std::shared_ptr<comm::Transport>(inproc->transport(rank)),
                                {.timeout = std::chrono::seconds(20), .host = rank < 2 ? "a" : "b"});
        ToyModel<float> m(7);
        ModelAveraging a(comm, {.period = 4, .host_period = 2});
        a.setup(m.params, {}, {});
        for (int64_t s = 0; s < 3; ++s) {
          zero_grads(m);
          auto [x, t] = rows_of(s, rank, world);
          backward(m.loss(x, t));
          m.sgd_step();
          a.after_step();
        }
        EXPECT_EQ(a.averagings(), 1);
        EXPECT_EQ(a.host_averagings(), 1);
        got[static_cast<size_t>(rank)] = m.values();
      },
      [&] { inproc->shutdown("a rank failed"); });
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got[2], got[3]);
  EXPECT_NE(got[0], got[2]);
}

TEST(Bmuf, ZeroMomentumAndUnitBlockLrIsModelAveraging) {
  for (int world : {2, 3, 5}) {
    const auto plain = train(world, 9, averaging({.period = 3}));
    const auto bmuf = train(world, 9, averaging({.period = 3, .bmuf = true, .block_momentum = 0.0, .block_lr = 1.0}));
    for (int r = 0; r < world; ++r) expect_near(bmuf[static_cast<size_t>(r)], plain[static_cast<size_t>(r)], 1e-6, "world " + std::to_string(world));
  }
}

TEST(Bmuf, FollowsTheBlockUpdate) {
  for (bool nesterov : {false, true}) {
    const int world = 3;
    const double eta = 0.6, zeta = 0.8;
    const int64_t period = 2, steps = 8;
    // Reference: W_g, Delta and W_init per flat entry.
    std::vector<double> wg, delta, start;
    auto flat = [](ToyModel<float>& m) {
      std::vector<double> v;
      for (auto& p : m.params) {
        auto x = p.tensor.to_vector<double>();
        v.insert(v.end(), x.begin(), x.end());
      }
      return v;
    };
    const auto want = simulate(world, steps, [&](std::vector<ToyModel<float>>& models, int64_t k) {
      if (wg.empty()) {  // W_g = W_init = the common start; recover it from the step just taken
        ToyModel<float> init(7);
        wg = start = flat(init);
        delta.assign(wg.size(), 0.0);
      }
      if (k % period != 0) return;
      average_models(models);
      const std::vector<double> mean = flat(models[0]);
      for (size_t i = 0; i < wg.size(); ++i) {
        delta[i] = eta * delta[i] + zeta * (mean[i] - start[i]);
        wg[i] += delta[i];
        start[i] = nesterov ? wg[i] + eta * delta[i] : wg[i];
      }
      autograd::NoGradGuard no_grad;
      for (auto& m : models) {
        size_t at = 0;
        for (auto& p : m.params) {
          float* w = p.tensor.data<float>();
          for (int64_t i = 0; i < p.tensor.numel(); ++i) w[i] = static_cast<float>(start[at++]);
        }
      }
    });
    const auto got = train(world, steps, averaging({.period = period, .bmuf = true, .block_momentum = eta,
                                                     .block_lr = zeta, .nesterov = nesterov}),
                           /*finish=*/false);
    for (int r = 0; r < world; ++r) expect_near(got[static_cast<size_t>(r)], want[static_cast<size_t>(r)], 2e-5, nesterov ? "nesterov" : "classical");
  }
}

TEST(Easgd, ZeroBetaIsIndependentTraining) {
  const int world = 3;
  const auto want = simulate(world, 6, [](std::vector<ToyModel<float>>&, int64_t) {});
  const auto got = train(world, 6, [](comm::Communicator c) { return std::make_unique<Easgd>(c, EasgdOptions{.beta = 0.0, .tau = 1}); },
                         /*finish=*/false);
  for (int r = 0; r < world; ++r) expect_near(got[static_cast<size_t>(r)], want[static_cast<size_t>(r)], 1e-6, "rank " + std::to_string(r));
}

TEST(Easgd, SynchronousFollowsTheElasticUpdate) {
  const int world = 3;
  const double beta = 0.6, alpha = beta / world;
  const int64_t tau = 2, steps = 8;
  std::vector<ToyModel<float>> center_holder;
  center_holder.emplace_back(7);
  auto& center = center_holder[0];
  const auto want = simulate(world, steps, [&](std::vector<ToyModel<float>>& models, int64_t k) {
    if ((k + 1) % tau != 0) return;
    autograd::NoGradGuard no_grad;
    for (size_t p = 0; p < center.params.size(); ++p) {
      float* c = center.params[p].tensor.data<float>();
      for (int64_t i = 0; i < center.params[p].tensor.numel(); ++i) {
        double mean = 0;
        for (auto& m : models) mean += m.params[p].tensor.data<float>()[i] / world;
        for (auto& m : models) {
          float& x = m.params[p].tensor.data<float>()[i];
          x = static_cast<float>(x - alpha * (x - c[i]));
        }
        c[i] = static_cast<float>(c[i] + beta * (mean - c[i]));
      }
    }
  });
  const auto got = train(world, steps, [&](comm::Communicator c) {
    return std::make_unique<Easgd>(c, EasgdOptions{.beta = beta, .tau = tau});
  }, /*finish=*/false);
  for (int r = 0; r < world; ++r) expect_near(got[static_cast<size_t>(r)], want[static_cast<size_t>(r)], 2e-5, "rank " + std::to_string(r));
  // finish(): every worker takes the center.
  const auto finished = train(world, steps, [&](comm::Communicator c) {
    return std::make_unique<Easgd>(c, EasgdOptions{.beta = beta, .tau = tau});
  });
  for (int r = 0; r < world; ++r) expect_near(finished[static_cast<size_t>(r)], center.values(), 2e-5, "center");
}

// Servers and workers as threads over the in-process transport; each worker
// runs `body(worker, transport)`.
void with_servers(int servers, int workers, const std::function<void(int, std::shared_ptr<comm::Transport>)>& body) {
  auto world = comm::InprocWorld::create(servers + workers);
  auto t = world->transports();
  test::run_threads_first_error(
      servers + workers,
      [&](int r) {
        if (r < servers) {
          ps::Server server(*t[static_cast<size_t>(r)], {.servers = servers, .workers = workers});
          server.run();
          return;
        }
        set_num_threads(1);
        body(r - servers, std::shared_ptr<comm::Transport>(std::move(t[static_cast<size_t>(r)])));
      },
      [&] { world->shutdown("a rank failed"); });
}

TEST(Easgd, AsynchronousWithOneWorkerIsTheSynchronousUpdate) {
  const int64_t steps = 8;
  const EasgdOptions o{.beta = 0.5, .tau = 2};
  const auto sync = train(1, steps, [&](comm::Communicator c) { return std::make_unique<Easgd>(c, o); });
  Values async;
  with_servers(1, 1, [&](int, std::shared_ptr<comm::Transport> t) {
    ToyModel<float> m(7);
    Easgd a(std::move(t), 1, o);
    a.setup(m.params, {}, {});
    for (int64_t s = 0; s < steps; ++s) {
      zero_grads(m);
      auto [x, y] = rows_of(s, 0, 1);
      backward(m.loss(x, y));
      m.sgd_step();
      a.after_step();
    }
    // An evaluation before finish() sees the center as this worker knows it
    // (its last pull plus its own push: here the servers' whole center) and
    // leaves the replica as it was.
    const Values own = m.values();
    a.begin_evaluation();
    const Values evaluated = m.values();
    a.end_evaluation();
    EXPECT_EQ(m.values(), own);
    a.finish();
    EXPECT_EQ(a.exchanges(), steps / o.tau);
    async = m.values();
    expect_near(evaluated, async, 1e-6, "evaluated center vs the servers' at finish");
    EXPECT_NE(evaluated, own);
  });
  expect_near(async, sync[0], 2e-5, "async vs sync");
}

// Synchronous EASGD and ADMM evaluate the center / z every worker holds, and
// give each replica its own values back afterwards.
TEST(Averaging, EvaluationSeesTheJobsModelAndRestoresTheReplica) {
  const int world = 3;
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    for (const bool admm : {false, true}) {
      ToyModel<float> m(rank == 0 ? 7 : 40 + static_cast<uint64_t>(rank));
      std::unique_ptr<Aggregation> a;
      if (admm) {
        a = std::make_unique<Admm>(comm, AdmmOptions{.rho = 0.5, .tau = 2});
      } else {
        a = std::make_unique<Easgd>(comm, EasgdOptions{.beta = 0.6, .tau = 2});
      }
      a->setup(m.params, {}, {});
      train_steps(m, *a, 5, rank, world);  // an odd count: the replica moved since the last exchange
      const std::vector<float>& center = admm ? static_cast<Admm&>(*a).consensus() : static_cast<Easgd&>(*a).center();
      const std::vector<double> job(center.begin(), center.end());
      auto flat = [&] {
        std::vector<double> out;
        for (const auto& v : m.values()) out.insert(out.end(), v.begin(), v.end());
        return out;
      };
      const std::vector<double> own = flat();
      EXPECT_NE(own, job);  // the replica moved since the last exchange
      a->begin_evaluation();
      EXPECT_EQ(flat(), job) << (admm ? "admm" : "easgd");
      a->end_evaluation();
      EXPECT_EQ(flat(), own) << (admm ? "admm" : "easgd");
      a->finish();
      a->begin_evaluation();  // after finish() the parameters are the job's model already
      a->end_evaluation();
      EXPECT_EQ(flat(), job);
    }
  });
}

// Least squares y = A x + b on each worker's own rows (different per worker):
// the whole job's optimum solves the normal equations over all rows.
struct LeastSquares {
  static constexpr int64_t kRows = 12, kInputs = 3;
  std::vector<Tensor> x, y;  // per worker
  explicit LeastSquares(int workers) {
    Generator g(5);
    for (int w = 0; w < workers; ++w) {
      Tensor xi = randn<float>({kRows, kInputs}, g);
      std::vector<float> yi(kRows);
      for (int64_t r = 0; r < kRows; ++r) {
        // A different line per worker: the local optima disagree.
        yi[static_cast<size_t>(r)] = static_cast<float>(1.0 + 0.3 * w + xi.data<float>()[r * kInputs] * (2.0 - w) -
                                                        xi.data<float>()[r * kInputs + 2] + 0.1 * g.normal());
      }
      x.push_back(xi);
      y.push_back(Tensor::from_vector(yi, {kRows, 1}));
    }
  }
  // [weights..., bias] minimising the sum over workers of each one's mean squared error.
  std::vector<double> optimum() const {
    const int64_t n = kInputs + 1;
    std::vector<double> a(static_cast<size_t>(n * (n + 1)), 0.0);  // [n x (n+1)] augmented normal equations
    for (size_t w = 0; w < x.size(); ++w) {
      for (int64_t r = 0; r < kRows; ++r) {
        std::vector<double> f(static_cast<size_t>(n), 1.0);
        for (int64_t j = 0; j < kInputs; ++j) f[static_cast<size_t>(j)] = x[w].data<float>()[r * kInputs + j];
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < n; ++j) a[static_cast<size_t>(i * (n + 1) + j)] += f[static_cast<size_t>(i)] * f[static_cast<size_t>(j)];
          a[static_cast<size_t>(i * (n + 1) + n)] += f[static_cast<size_t>(i)] * y[w].data<float>()[r];
        }
      }
    }
    for (int64_t c = 0; c < n; ++c) {  // Gauss-Jordan; the matrix is positive definite
      const double pivot = a[static_cast<size_t>(c * (n + 1) + c)];
      for (int64_t j = 0; j <= n; ++j) a[static_cast<size_t>(c * (n + 1) + j)] /= pivot;
      for (int64_t i = 0; i < n; ++i) {
        if (i == c) continue;
        const double f = a[static_cast<size_t>(i * (n + 1) + c)];
        for (int64_t j = 0; j <= n; ++j) a[static_cast<size_t>(i * (n + 1) + j)] -= f * a[static_cast<size_t>(c * (n + 1) + j)];
      }
    }
    std::vector<double> sol;
    for (int64_t i = 0; i < n; ++i) sol.push_back(a[static_cast<size_t>(i * (n + 1) + n)]);
    return sol;
  }
};

// Full-batch gradient descent on worker w's rows under the ADMM aggregation;
// returns [weights..., bias] after finish().
std::vector<double> admm_worker(const LeastSquares& ls, int w, Admm& admm, int64_t steps, double lr) {
  Tensor weight = Tensor::zeros({1, LeastSquares::kInputs}, DType::f32), bias = Tensor::zeros({1}, DType::f32);
  weight.set_requires_grad(), bias.set_requires_grad();
  std::vector<NamedParameter> params{{"weight", weight}, {"bias", bias}};
  admm.setup(params, {}, {});
  for (int64_t s = 0; s < steps; ++s) {
    for (auto& p : params) {
      if (p.tensor.grad().defined()) p.tensor.grad().fill(0);
    }
    backward(mse(linear(ls.x[static_cast<size_t>(w)], weight, bias), ls.y[static_cast<size_t>(w)]));
    admm.combine_gradients();
    {
      autograd::NoGradGuard no_grad;
      for (auto& p : params) {
        float* v = p.tensor.data<float>();
        const float* g = p.tensor.grad().data<float>();
        for (int64_t i = 0; i < p.tensor.numel(); ++i) v[i] -= static_cast<float>(lr) * g[i];
      }
    }
    admm.after_step();
  }
  admm.finish();
  std::vector<double> out = weight.to_vector<double>();
  out.push_back(bias.to_vector<double>()[0]);
  return out;
}

// Both warm starts: the rounds' local steps from z and from each replica's own x.
TEST(Admm, SynchronousReachesTheCentralisedOptimum) {
  for (const bool from_z : {true, false}) {
    for (int world : {2, 3, 4}) {
      const LeastSquares ls(world);
      const std::vector<double> want = ls.optimum();
      std::vector<std::vector<double>> got(static_cast<size_t>(world));
      on_ranks(world, [&](int rank, comm::Communicator comm) {
        Admm admm(comm, {.rho = 1.0, .tau = 10, .start_from_z = from_z});
        got[static_cast<size_t>(rank)] = admm_worker(ls, rank, admm, 3000, 0.1);
      });
      for (int r = 0; r < world; ++r) {
        for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[static_cast<size_t>(r)][i], want[i], 1e-3) << "from z " << from_z << " world " << world << " rank " << r << " entry " << i;
      }
    }
  }
}

// warm_start = z: a round leaves every replica at z (so they agree bit for
// bit until their next local step); warm_start = x leaves each where it was.
TEST(Admm, ARoundStartsEveryReplicaFromZOrLeavesItsOwnX) {
  const int world = 3;
  for (const bool from_z : {true, false}) {
    std::vector<Values> got(world);
    std::vector<std::vector<float>> z(world);
    on_ranks(world, [&](int rank, comm::Communicator comm) {
      ToyModel<float> m(7);
      Admm a(comm, {.rho = 0.5, .tau = 3, .start_from_z = from_z});
      a.setup(m.params, {}, {});
      train_steps(m, a, 6, rank, world);  // two rounds, the last one just done
      got[static_cast<size_t>(rank)] = m.values();
      z[static_cast<size_t>(rank)] = a.consensus();
    });
    for (int r = 0; r < world; ++r) {
      std::vector<float> flat;
      for (const auto& v : got[static_cast<size_t>(r)]) flat.insert(flat.end(), v.begin(), v.end());
      EXPECT_EQ(z[static_cast<size_t>(r)], z[0]) << "rank " << r;
      if (from_z) {
        EXPECT_EQ(flat, z[0]) << "rank " << r;
      } else {
        EXPECT_NE(flat, z[0]) << "rank " << r;
      }
    }
    if (!from_z) {
      EXPECT_NE(got[0], got[1]);
    }
  }
}

TEST(Admm, AsynchronousWithAPartialBarrierReachesTheCentralisedOptimum) {
  const int workers = 3;
  const LeastSquares ls(workers);
  const std::vector<double> want = ls.optimum();
  for (const bool from_z : {true, false}) {
    for (int64_t barrier : {3, 2}) {
      std::vector<std::vector<double>> got(workers);
      with_servers(1, workers, [&](int w, std::shared_ptr<comm::Transport> t) {
        Admm admm(std::move(t), 1,
                  {.rho = 1.0, .tau = 10, .barrier = barrier, .max_delay = 1, .start_from_z = from_z});
        got[static_cast<size_t>(w)] = admm_worker(ls, w, admm, 3000, 0.1);
      });
      for (int w = 0; w < workers; ++w) {
        // A worker's last z may miss a slower worker's last round: close, not exact.
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_NEAR(got[static_cast<size_t>(w)][i], want[i], 2e-3)
              << "from z " << from_z << " barrier " << barrier << " worker " << w << " entry " << i;
        }
      }
    }
  }
}

TEST(Averaging, RefusesBadSettings) {
  on_ranks(1, [](int, comm::Communicator c) {
    EXPECT_THROW(ModelAveraging(c, {.period = 0}), ConfigError);
    EXPECT_THROW(ModelAveraging(c, {.period = 4, .host_period = 3}), ConfigError);
    EXPECT_THROW(ModelAveraging(c, {.bmuf = true, .block_momentum = 1.0}), ConfigError);
    EXPECT_THROW(Easgd(c, {.beta = 1.5}), ConfigError);
    EXPECT_THROW(Admm(c, {.rho = 0.0}), ConfigError);
  });
}

}  // namespace
}  // namespace braid::parallel::averaging
