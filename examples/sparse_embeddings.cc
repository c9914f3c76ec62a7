// Sparse embeddings through parameter servers: logistic regression over hashed
// sparse features (libsvm input), written as an embedding bag,
//
//   logits = embedding_bag(E, features, values) W^T + b      E: [kBuckets, kDim]
//
// The table E lives on the servers (rows created on first touch) and never
// has to fit on a worker: each step a worker pulls only the rows its batch
// touches, runs forward and backward on them, and pushes their gradients.
// W and b are small dense values on the servers. Asynchronous (asp) with
// AdaGrad on the servers, as for click logs.
//   python3 scripts/make_sparse_data.py --out /tmp/sparse.svm
//   build/bin/braid launch --servers 1 --workers 2 -- build/bin/sparse_embeddings /tmp/sparse.svm [steps]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>

#include <braid/braid.h>

using namespace braid;

constexpr int kTable = 0;              // the servers' id for E
constexpr uint64_t kBuckets = 1 << 18;  // feature ids are hashed into this many rows of E
constexpr int64_t kDim = 8;             // embedding width
constexpr double kLr = 0.1;

int main(int argc, char** argv) try {
  if (argc < 2) fail<ConfigError>("usage: sparse_embeddings DATA.libsvm [steps]");
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 1000;
  auto group = parallel::ProcessGroup::join({});
  const int servers = group->env().ps_servers;
  if (servers < 1) fail<ConfigError>("no parameter servers: start with braid launch --servers S --workers W -- ...");
  const Duration timeout = std::chrono::seconds(60);  // for every push and pull
  ps::Client client(*group->transport(), {.servers = servers, .timeout = timeout});

  const data::LibsvmDataset data(argv[1], {.class_targets = true});
  const auto classes = static_cast<int64_t>(data.classes().size());
  std::vector<float> dense(static_cast<size_t>(classes * kDim + classes));  // W [classes, kDim] then b [classes]
  // Registers with the servers (the first worker's settings become the job's).
  int64_t clock = client.hello({.consistency = ps::Consistency::asp, .updater = {.name = "adagrad"}},
                               static_cast<int64_t>(dense.size()));
  client.define_table(kTable, kDim, /*init_std=*/0.01);
  if (client.worker() == 0) {  // W ~ U(-1/sqrt(kDim), 1/sqrt(kDim)) as nn::Linear draws it, b = 0
    Generator g(/*seed=*/1);
    for (int64_t i = 0; i < classes * kDim; ++i) dense[i] = static_cast<float>((2 * g.uniform_f64() - 1) / std::sqrt(kDim));
    client.init_dense(dense).wait(Deadline::after(timeout));
  }
  client.pull_dense(dense, /*clock: do not wait*/ -1).wait(Deadline::after(timeout));

  const data::DistributedSampler shard(data.size(), {.rank = client.worker(), .world = client.workers()});
  const size_t batch = 128;
  double window_loss = 0, last_loss = 0;  // mean over the latest window of up to 100 steps
  int64_t step = 0, window = 0;
  for (int64_t epoch = 0; step < steps; ++epoch) {
    const std::vector<int64_t> order = shard.indices(epoch);  // this worker's shard, reshuffled every epoch
    for (size_t first = 0; first < order.size() && step < steps; first += batch, ++step) {
      // The batch's distinct keys, and per example a bag of positions into them with values.
      const data::SparseBatch b =
          data::make_sparse_batch(data, std::span(order).subspan(first, std::min(batch, order.size() - first)), kBuckets);
      const auto keys = static_cast<int64_t>(b.keys.size());
      std::vector<float> rows(static_cast<size_t>(keys * kDim));
      client.pull_sparse(kTable, b.keys, rows, -1).wait(Deadline::after(timeout));

      Tensor table = Tensor::from_vector(rows, {keys, kDim});  // [keys, kDim]: only the rows in use
      Tensor w = Tensor::from_vector(std::vector<float>(dense.begin(), dense.end() - classes), {classes, kDim});
      Tensor bias = Tensor::from_vector(std::vector<float>(dense.end() - classes, dense.end()), {classes});
      for (Tensor* t : {&table, &w, &bias}) t->set_requires_grad();
      const Tensor loss = cross_entropy(linear(embedding_bag(table, b.index, b.offsets, b.values), w, bias), b.targets);
      backward(loss);

      // Rows first: the dense push ends this worker's clock.
      std::vector<float> grad_dense = w.grad().to_vector<float>();
      for (float g : bias.grad().to_vector<float>()) grad_dense.push_back(g);
      client.push_sparse(kTable, b.keys, table.grad().to_vector<float>(), clock, kLr).wait(Deadline::after(timeout));
      client.push_dense(grad_dense, clock++, kLr).wait(Deadline::after(timeout));
      client.pull_dense(dense, -1).wait(Deadline::after(timeout));

      window_loss += loss.item();
      if (++window == 100 || step + 1 == steps) {
        last_loss = window_loss / static_cast<double>(window);
        if (client.worker() == 0) std::printf("step %lld: loss %.4f\n", static_cast<long long>(step + 1), last_loss);
        window_loss = 0, window = 0;
      }
    }
  }
  std::printf("worker %d of %d: trained %lld steps: final loss %.4f\n", client.worker(), client.workers(),
              static_cast<long long>(step), last_loss);
  client.done();
  return 0;
} catch (const braid::Error& e) {
  std::fprintf(stderr, "sparse_embeddings: %s\n", e.what());
  return 1;
}
