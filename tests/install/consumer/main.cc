// Built against an installed braid: the umbrella header first and alone (so
// every header it pulls in must be installed), then code from the lowest
// layer to the highest — the graph, linear and sim layers, pipeline and
// tensor-parallel planning, population-based training, the loss scaler and
// weight norm included — so the link needs every library and dependency.
#include <braid/braid.h>

#include <algorithm>
#include <cstdio>

using namespace braid;

namespace {

// Fails the program with `what` unless `ok`.
void expect(bool ok, const char* what) {
  if (!ok) fail<Error>("consumer: {}", what);
}

}  // namespace

int main() try {
  // A group of one (no launcher variables): comm and its transports, MPI included, are linked.
  auto group = parallel::ProcessGroup::join({});
  // Two Gaussian blobs, [256, 2] points, class = which blob.
  Generator g(/*seed=*/0);
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int i = 0; i < 256; ++i) {
    ys.push_back(i % 2);
    xs.push_back(static_cast<float>(g.normal() + (i % 2 ? 2 : -2)));
    xs.push_back(static_cast<float>(g.normal()));
  }
  const Tensor x = Tensor::from_vector(xs, {256, 2}), y = Tensor::from_vector(ys, {256});
  nn::Sequential model({std::make_shared<nn::Linear>(2, 16, g), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(16, 2, g)});
  optim::SGD sgd(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  // Eager steps through the loss scaler, then the same step as a captured graph.
  optim::LossScaler scaler({.init_scale = 1024});
  double first = 0, last = 0;
  for (int step = 0; step < 25; ++step) {
    const Tensor loss = cross_entropy(model.forward(x), y);
    sgd.zero_grad();
    backward(scaler.scale(loss));
    const bool found_inf = scaler.unscale_and_check(model.parameters());
    if (!found_inf) sgd.step();
    scaler.update(found_inf);
    if (step == 0) first = loss.item();
  }
  graph::TrainingStep graph_step(model, sgd, [](const Tensor& out, const Tensor& t) { return cross_entropy(out, t); },
                                 x, y);
  for (int step = 0; step < 25; ++step) last = graph_step.run(x, y).item();
  const train::TopK top = train::count_topk(model.forward(x), y);
  const double accuracy = static_cast<double>(top.top1) / static_cast<double>(top.n);
  std::printf("consumer: world %d, loss %.4f -> %.4f, accuracy %.3f\n", group->comm().size(), first, last, accuracy);
  expect(last < first && accuracy > 0.9, "the model did not learn");

  // Planning a pipeline's cut and a tensor-parallel rewrite of the same model.
  const std::vector<int> starts =
      parallel::pipeline::balanced_starts(parallel::pipeline::parameter_costs(model), /*stages=*/2);
  expect(starts.size() == 2, "balanced_starts did not cut two stages");
  expect(parallel::tensor_parallel::tensor_parallel_roles(model).size() == model.size(), "one role per layer");

  // Weight normalisation of a copy of the layers.
  nn::Sequential normed({std::make_shared<nn::Linear>(2, 4, g), std::make_shared<nn::Linear>(4, 2, g)});
  expect(nn::apply_weight_norm(normed) == 2, "weight norm did not wrap both layers");
  expect(normed.forward(x).shape() == Shape{256, 2}, "weight-normed forward");

  // Population-based training's decision logic on a board in this process.
  train::LocalBoard board;
  const train::HyperSpace space{{"lr", {.lo = 1e-3, .hi = 1}}};
  for (int member = 0; member < 4; ++member) {
    board.publish({.member = member, .round = 1, .score = 0.1 * member, .hyper = train::sample_hyper(space, {}, g)});
  }
  const std::vector<train::Report> reports = board.latest();
  const train::Report& worst = *std::min_element(
      reports.begin(), reports.end(), [](const train::Report& a, const train::Report& b) { return a.score < b.score; });
  const train::Decision d = train::decide(worst, reports, {.space = space}, g);
  expect(d.exploit, "the worst member of four did not exploit a better one");

  // A linear solver by name, and two ranks' step simulated.
  expect(!linear_model::solver_names().empty(), "no linear solvers");
  sim::Simulator simulator(sim::Cluster{.ranks = 2});
  const sim::TaskId forward = simulator.compute(0, 1e-3, {}, {"forward", "layer 0"});
  simulator.transfer(0, 1, 1 << 20, {forward}, {"net", "activation"});
  expect(simulator.run().makespan > 1e-3, "the simulated step took no time");
  std::printf("consumer: pipeline, tensor parallel, weight norm, pbt, linear and sim used\n");
  return 0;
} catch (const braid::Error& e) {
  std::fprintf(stderr, "consumer: %s\n", e.what());
  return 1;
}
