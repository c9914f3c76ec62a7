// Built against an installed braid: the umbrella header first and alone (so
// every header it pulls in must be installed), then code from the lowest
// layer to the highest, so the link needs every library and dependency.
#include <braid/braid.h>

#include <cstdio>

using namespace braid;

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
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    const Tensor loss = cross_entropy(model.forward(x), y);
    sgd.zero_grad();
    backward(loss);
    sgd.step();
    (step == 0 ? first : last) = loss.item();
  }
  const train::TopK top = train::count_topk(model.forward(x), y);
  const double accuracy = static_cast<double>(top.top1) / static_cast<double>(top.n);
  std::printf("consumer: world %d, loss %.4f -> %.4f, accuracy %.3f\n", group->comm().size(), first, last, accuracy);
  return last < first && accuracy > 0.9 ? 0 : 1;
} catch (const braid::Error& e) {
  std::fprintf(stderr, "consumer: %s\n", e.what());
  return 1;
}
