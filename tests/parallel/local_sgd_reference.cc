// braid's half of the comparison with PyTorch's post-local SGD
// (local_sgd_vs_torch.py): reads an MLP's initial weights and K global
// batches from a safetensors file, trains them with local SGD (SGD with
// momentum; the first W steps' gradients all-reduced, then parameters averaged
// every H steps) on N in-process ranks, each on its contiguous share of every
// batch, and writes every rank's final weights ("r<rank>.<name>") to another
// safetensors file, without a last averaging, as PyTorch leaves them.
//
//   braid_local_sgd_reference IN OUT --ranks N --period H --warmup W --lr LR
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "braid/autograd/engine.h"
#include "braid/base/safetensors.h"
#include "braid/nn/activation.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/sequential.h"
#include "braid/ops/shape.h"
#include "braid/optim/sgd.h"
#include "braid/parallel/plan_factory.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/parallel/reference_io.h"

namespace braid {
namespace {

using testing::to_tensor;

int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s IN OUT [--ranks N] [--period H] [--warmup W] [--lr LR]\n", argv[0]);
    return 2;
  }
  const std::string in = argv[1], out = argv[2];
  int ranks = 2;
  int64_t period = 3, warmup = 2;
  double lr = 0.05;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--ranks") ranks = std::stoi(argv[i + 1]);
    else if (k == "--period") period = std::stoll(argv[i + 1]);
    else if (k == "--warmup") warmup = std::stoll(argv[i + 1]);
    else if (k == "--lr") lr = std::stod(argv[i + 1]);
    else fail<ValueError>("unknown option {}", k);
  }
  const safetensors::File f = safetensors::read(in);
  const Tensor x = to_tensor(f.tensors.at("data.x")), y = to_tensor(f.tensors.at("data.y"));  // [K, B, in], [K, B]
  const int64_t steps = x.size(0), rows = x.size(1);
  nn::NamedTensors init;
  for (const auto& [name, t] : f.tensors) {
    if (!name.starts_with("data.")) init.emplace_back(name, to_tensor(t));
  }
  std::mutex mu;
  std::map<std::string, Tensor> final_weights;
  parallel::testing::on_ranks(ranks, [&](int rank, comm::Communicator comm) {
    Generator g(0);
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Linear>(x.size(2), 32, g));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::Linear>(32, 4, g));
    model->load_state_dict(init);
    parallel::PlannedModel pm = parallel::make_plan(
        {.strategy = "local_sgd",
         .averaging = {.period = period, .warmup = warmup, .timeout = std::chrono::seconds(20)}},
        comm, nullptr, model, nn::cross_entropy_loss);
    optim::SGD sgd(pm.model->parameters(), {.lr = lr, .momentum = 0.9});
    pm.plan->setup(*pm.model, {}, &sgd);
    const int64_t per = rows / ranks, first = per * rank;
    for (int64_t s = 0; s < steps; ++s) {
      sgd.zero_grad(false);
      const Tensor xs = slice(squeeze(slice(x, 0, s, s + 1), 0), 0, first, first + per);
      const Tensor ys = slice(squeeze(slice(y, 0, s, s + 1), 0), 0, first, first + per);
      pm.plan->forward_backward(*pm.model, pm.loss, xs.contiguous(), ys.contiguous());
      pm.plan->finish_gradients();
      sgd.step();
      pm.plan->after_step();
    }
    std::lock_guard lock(mu);
    for (const auto& [name, t] : pm.model->state_dict()) final_weights["r" + std::to_string(rank) + "." + name] = t.contiguous().clone();
  });
  testing::write_f32(out, final_weights);
  std::printf("braid: local SGD, %d ranks, period %lld, warm-up %lld, %lld steps of %lld rows -> %s\n", ranks,
              static_cast<long long>(period), static_cast<long long>(warmup), static_cast<long long>(steps),
              static_cast<long long>(rows), out.c_str());
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  try {
    return braid::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid_local_sgd_reference: %s\n", e.what());
    return 1;
  }
}
