// `braid linear`: linear models on sparse data (braid/linear/), one solver per
// run, with the primal objective, the duality gap (dual solvers) and the test
// score after every epoch on the console and in OUT/metrics.jsonl.
//   braid linear --data fortunes --loss logistic --C 1 --solver sdca
//   braid linear --data synthetic:rows=200000 --solver hogwild --threads 2
//   braid launch -n 3 -- braid linear --data heart_scale --solver cocoa
//   braid linear --data heart_scale --solver features --ranks 3   (ranks as threads)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "braid/base/error.h"
#include "braid/comm/transport/inproc.h"
#include "braid/linear/datasets.h"
#include "braid/linear/solvers.h"
#include "braid/parallel/process_group.h"
#include "braid/train/metrics.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

struct LinearArgs {
  std::string data = "fortunes";
  std::string test;
  std::string loss = "logistic";
  std::string penalty = "l2";
  double c = 1.0;
  double l2 = -1, l1 = -1;
  std::string solver = "sdca";
  linear_model::SolverOptions o;
  int ranks = 1;
  double timeout_s = 300;
  std::string out;
  bool stats = false;
};

std::string figure(double v) { return std::isnan(v) ? "-" : fmt::format("{:.6g}", v); }

linear_model::Problem make_problem(const LinearArgs& a, int64_t n) {
  linear_model::Problem p{.loss = linear_model::parse_loss(a.loss), .reg = {}};
  if (a.l2 >= 0 || a.l1 >= 0) {
    p.reg = {std::max(a.l2, 0.0), std::max(a.l1, 0.0)};
  } else {
    if (!(a.c > 0)) fail<ConfigError>("--C must be > 0, got {}", a.c);
    const double lambda = 1 / (a.c * static_cast<double>(n));
    if (a.penalty == "l2") p.reg.l2 = lambda;
    else if (a.penalty == "l1") p.reg.l1 = lambda;
    else fail<ConfigError>("--penalty must be l2 or l1, got '{}'", a.penalty);
  }
  return p;
}

// One rank's run; rank 0 prints and writes the metrics.
linear_model::Result run_rank(const LinearArgs& a, const linear_model::Problem& p, const linear_model::Examples& train,
                        const linear_model::Examples& test, comm::Communicator* comm, int rank) {
  std::unique_ptr<train::JsonlWriter> jsonl;
  if (rank == 0 && !a.out.empty()) {
    std::filesystem::create_directories(a.out);
    jsonl = std::make_unique<train::JsonlWriter>(a.out + "/metrics.jsonl");
  }
  const std::string score = linear_model::score_name(p.loss);
  auto monitor = [&](const linear_model::Progress& pr) {
    if (rank != 0) return true;
    std::printf("epoch %3d  primal %-12s gap %-11s test %s %-8s (%.3f s)\n", pr.epoch, figure(pr.primal).c_str(),
                figure(pr.gap).c_str(), score.c_str(), figure(pr.test_score).c_str(), pr.seconds);
    std::fflush(stdout);
    if (jsonl) {
      nlohmann::json j{{"event", "epoch"}, {"solver", a.solver}, {"epoch", pr.epoch},   {"seconds", pr.seconds},
                       {"primal", pr.primal}, {"time", std::time(nullptr)}};
      if (!std::isnan(pr.gap)) j["gap"] = pr.gap;
      if (!std::isnan(pr.test_score)) j["test_" + score] = pr.test_score;
      jsonl->write(j);
    }
    return true;
  };
  linear_model::Result r = linear_model::solve(a.solver, p, train, test.size() ? &test : nullptr, a.o, comm, monitor);
  if (rank == 0 && !r.history.empty()) {
    const auto& last = r.history.back();
    std::printf("%s: %d epochs in %.3f s, primal %s, test %s %s\n", a.solver.c_str(), last.epoch, last.seconds,
                figure(last.primal).c_str(), score.c_str(), figure(last.test_score).c_str());
    if (jsonl)
      jsonl->write({{"event", "end"}, {"solver", a.solver}, {"epochs", last.epoch}, {"seconds", last.seconds},
                    {"primal", last.primal}, {"time", std::time(nullptr)}});
  }
  return r;
}

void run(const LinearArgs& a) {
  auto [train, test] = linear_model::load_task(a.data, a.test, linear_model::is_classification(linear_model::parse_loss(a.loss)));
  const linear_model::Problem p = make_problem(a, train.size());
  const bool distributed = linear_model::is_distributed(a.solver);
  if (a.ranks < 1) fail<ConfigError>("--ranks must be >= 1, got {}", a.ranks);
  if (a.ranks > 1 && !distributed) fail<ConfigError>("--ranks is for the distributed solvers (cocoa, features, sandblaster)");
  const auto timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(a.timeout_s));

  std::unique_ptr<parallel::ProcessGroup> group;
  if (distributed && a.ranks == 1) group = parallel::ProcessGroup::join({.timeout = timeout});
  const int rank = group ? group->env().rank : 0;
  if (rank == 0) {
    std::printf("linear: %s, %lld train rows, %lld test rows, %lld features, %lld nonzeros; loss %s, l2 %.4g, l1 %.4g\n",
                a.data.c_str(), static_cast<long long>(train.size()), static_cast<long long>(test.size()),
                static_cast<long long>(train.x.cols), static_cast<long long>(train.x.nonzeros()), a.loss.c_str(),
                p.reg.l2, p.reg.l1);
    if (a.stats) {
      const auto s = linear_model::sparsity_stats(train.x);
      std::printf("sparsity: omega %lld, delta %.4g, rho %.4g%s\n", static_cast<long long>(s.omega), s.delta, s.rho,
                  s.rho_sampled ? " (over a sample of rows)" : "");
    }
  }
  if (a.ranks == 1) {
    run_rank(a, p, train, test, group ? &group->comm() : nullptr, rank);
    return;
  }
  // Ranks as threads over the in-process transport.
  auto world = comm::InprocWorld::create(a.ranks);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(a.ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < a.ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        comm::Communicator c(std::shared_ptr<comm::Transport>(world->transport(r)), {.timeout = timeout});
        run_rank(a, p, train, test, &c, r);
      } catch (...) {
        errors[r] = std::current_exception();
        world->shutdown(fmt::format("rank {} failed", r));
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

void add_linear(CLI::App& app) {
  auto a = std::make_shared<LinearArgs>();
  auto* cmd = app.add_subcommand("linear", "Linear models on sparse data: SDCA, CD, L-BFGS, Hogwild!, Cyclades, CoCoA+, ...");
  cmd->add_option("--data", a->data,
                  "A libsvm file, 'fortunes[:positive=a+b,buckets=N,max_df=F,dir=D]' or "
                  "'synthetic[:rows=N,cols=D,nonzeros_per_row=K,skew=S,flip=F,seed=S]'")
      ->capture_default_str();
  cmd->add_option("--test", a->test, "A libsvm test file (for --data FILE)");
  cmd->add_option("--loss", a->loss, "squared, logistic, hinge or squared_hinge")->capture_default_str();
  cmd->add_option("--penalty", a->penalty, "l2 or l1: the regulariser --C sets")->capture_default_str();
  cmd->add_option("--C", a->c, "LIBLINEAR's cost: l2 (or l1) = 1 / (C n)")->capture_default_str();
  cmd->add_option("--l2", a->l2, "The l2 weight lambda2 (overrides --C)");
  cmd->add_option("--l1", a->l1, "The l1 weight lambda1 (overrides --C; with --l2: elastic net)");
  cmd->add_option("--solver", a->solver,
                  "sdca, cd, lbfgs, olbfgs, sgd, hogwild, cyclades; across ranks: cocoa, features, sandblaster")
      ->capture_default_str();
  cmd->add_option("--epochs", a->o.epochs, "Epochs (L-BFGS: iterations; CoCoA+: rounds)")->capture_default_str();
  cmd->add_option("--threads", a->o.threads, "Threads for hogwild and cyclades")->capture_default_str();
  cmd->add_option("--seed", a->o.seed, "Seed of the sample and coordinate orders")->capture_default_str();
  cmd->add_option("--step", a->o.step, "SGD family: step size eta_0")->capture_default_str();
  cmd->add_option("--step-decay", a->o.step_decay, "SGD family: eta_e = eta_0 * decay^e")->capture_default_str();
  cmd->add_option("--batch", a->o.batch, "cyclades: examples per conflict-graph batch; olbfgs: minibatch")
      ->capture_default_str();
  cmd->add_option("--history", a->o.history, "L-BFGS family: curvature pairs kept")->capture_default_str();
  cmd->add_option("--local-passes", a->o.local_passes, "cocoa: local SDCA passes per round")->capture_default_str();
  cmd->add_option("--shards", a->o.shards, "sandblaster: parameter shards (ranks 1..S)")->capture_default_str();
  cmd->add_option("--portion", a->o.portion, "sandblaster: rows per work portion (0: n / (4 workers))")
      ->capture_default_str();
  cmd->add_option("--target", a->o.target, "Stop once the primal objective is at most this");
  cmd->add_option("--gap-tolerance", a->o.gap_tolerance, "Stop once gap <= tol * |primal| (dual solvers)");
  cmd->add_option("--ranks", a->ranks, "Run a distributed solver on N ranks as threads of this process")
      ->capture_default_str();
  cmd->add_option("--timeout", a->timeout_s, "Seconds any collective may wait for a peer")->capture_default_str();
  cmd->add_option("--out", a->out, "Folder for metrics.jsonl");
  cmd->add_flag("--stats", a->stats, "Print the sparsity figures omega, delta, rho of the training rows");
  cmd->callback([a] { run(*a); });
}

}  // namespace braid::cli
