#include "braid/train/sparse_training.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/base/float_env.h"
#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/data/libsvm.h"
#include "braid/data/sampler.h"
#include "braid/data/sparse_batch.h"
#include "braid/ops/index.h"
#include "braid/ops/autocast.h"
#include "braid/ops/linear.h"
#include "braid/ops/loss.h"
#include "braid/parallel/process_group.h"
#include "braid/ps/client.h"
#include "braid/tensor/device.h"
#include "braid/train/config_data.h"
#include "braid/train/trainer_setup.h"

namespace braid::train {

namespace {

constexpr int kTable = 0;

struct Dense {
  int64_t classes, dim;
  std::vector<float> flat;  // W [classes, dim] then b [classes]
  Tensor w() const { return Tensor::from_vector(std::vector<float>(flat.begin(), flat.begin() + classes * dim), {classes, dim}); }
  Tensor b() const { return Tensor::from_vector(std::vector<float>(flat.begin() + classes * dim, flat.end()), {classes}); }
};

struct Batch {
  data::SparseBatch sparse;
  std::vector<float> rows;  // [keys, dim], pulled
};

// Forward on pulled rows; returns the loss and leaves gradients on the leaves.
Tensor forward(const Batch& b, const Tensor& table_rows, const Tensor& w, const Tensor& bias) {
  const Tensor h = embedding_bag(table_rows, b.sparse.index, b.sparse.offsets, b.sparse.values);
  return cross_entropy(linear(h, w, bias), b.sparse.targets);
}

}  // namespace

SparseSummary train_sparse(const Config& c, const std::function<void(const std::string&)>& report) {
  const std::string& strategy = c.get_string("parallel.strategy");
  if (strategy != "ps" && strategy != "auto")
    fail<ConfigError>("model.name = sparse_linear trains through parameter servers: set parallel.strategy = ps (or "
                      "auto) and start it with braid launch --servers S --workers W");
  if (c.get_string("data.name") != "libsvm")
    fail<ConfigError>("model.name = sparse_linear reads libsvm data (data.name = libsvm), got data.name = {}",
                      c.get_string("data.name"));
  // The pulled rows, the dense values and their gradients are host vectors
  // exchanged with the servers; nothing here would ever reach a device.
  require_cpu_device(c, "model.name = sparse_linear",
                     "its workers compute on the CPU between pulls and pushes to the parameter servers");
  const int64_t threads = c.get_int("train.threads");
  set_num_threads(threads > 0 ? static_cast<int>(threads) : 1);
  set_flush_denormals(c.get_bool("train.flush_denormals"));
  // train.precision for the worker's forward, backward and evaluation (all on this thread).
  Autocast autocast(train_precision(c));
  const parallel::ProcessGroupOptions group_options = process_group_options(c);
  const Duration timeout = group_options.timeout;
  auto group = parallel::ProcessGroup::join(group_options);
  const int servers = group->env().ps_servers;
  if (servers < 1) fail<ConfigError>("parallel.strategy = ps needs parameter servers (braid launch --servers S)");
  const parallel::ParameterServerOptions po = ps_options(c, servers, timeout);
  ps::Client client(*group->transport(), {.servers = servers, .timeout = timeout});
  const int worker = client.worker(), workers = client.workers();

  const data::LibsvmDataset all(c.get_string("data.path"), {.class_targets = true});
  const int64_t n = all.size(), n_test = n / 10, n_train = n - n_test;
  if (n_train < workers) fail<ConfigError>("{} has {} training rows for {} workers", c.get_string("data.path"), n_train, workers);
  const auto buckets = static_cast<uint64_t>(c.get_int("data.hash_buckets"));
  const uint64_t seed = static_cast<uint64_t>(c.get_int("train.seed"));
  const int64_t dim = c.get_int("model.hidden"), classes = static_cast<int64_t>(all.classes().size());
  const int64_t batch = c.get_int("train.batch_size"), epochs = c.get_int("train.epochs");
  const int64_t log_every = c.get_int("train.log_every");
  const double lr = c.get_float("optim.lr");
  const std::shared_ptr<const data::Sampler> sampler = make_train_sampler(c, n_train, {.rank = worker, .world = workers});

  c.refuse_unread("braid train");  // every key this run uses has been read by now
  int64_t clock = client.hello(po.config, classes * dim + classes);
  client.define_table(kTable, dim, 0.01);
  Dense dense{classes, dim, std::vector<float>(static_cast<size_t>(classes * dim + classes), 0.0f)};
  if (worker == 0) {
    Generator g(seed, /*stream=*/7);
    const double bound = 1.0 / std::sqrt(static_cast<double>(dim));
    for (int64_t i = 0; i < classes * dim; ++i) dense.flat[static_cast<size_t>(i)] = static_cast<float>((2 * g.uniform_f64() - 1) * bound);
    client.init_dense(dense.flat).wait(Deadline::after(timeout));
  }
  client.pull_dense(dense.flat, -1).wait(Deadline::after(timeout * 3));
  const bool gated = po.config.consistency == ps::Consistency::bsp || po.config.consistency == ps::Consistency::ssp;

  SparseSummary s{.workers = workers, .leader = worker == 0};
  const auto t0 = Clock::now();
  auto window_start = t0;
  double window_loss = 0;
  int64_t window_steps = 0, samples = 0;
  const int64_t per_epoch = (sampler->size() + batch - 1) / batch;
  std::vector<float> dense_grad(dense.flat.size()), row_grad;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    const std::vector<int64_t> order = sampler->indices(epoch);
    for (int64_t first = 0; first < static_cast<int64_t>(order.size()); first += batch) {
      const auto count = std::min<int64_t>(batch, static_cast<int64_t>(order.size()) - first);
      Batch b{data::make_sparse_batch(all, std::span(order).subspan(static_cast<size_t>(first), static_cast<size_t>(count)), buckets), {}};
      const auto keys = static_cast<int64_t>(b.sparse.keys.size());
      b.rows.resize(static_cast<size_t>(keys * dim));
      client.pull_sparse(kTable, b.sparse.keys, b.rows, gated ? clock : -1).wait(Deadline::after(timeout * 3));
      s.rows_pulled += keys;
      Tensor rows = Tensor::from_vector(b.rows, {keys, dim}), w = dense.w(), bias = dense.b();
      for (Tensor* t : {&rows, &w, &bias}) t->set_requires_grad();
      const Tensor loss = forward(b, rows, w, bias);
      backward(loss);
      row_grad = rows.grad().contiguous().to_vector<float>();
      const auto gw = w.grad().contiguous().to_vector<float>(), gb = bias.grad().contiguous().to_vector<float>();
      std::copy(gw.begin(), gw.end(), dense_grad.begin());
      std::copy(gb.begin(), gb.end(), dense_grad.begin() + static_cast<ptrdiff_t>(gw.size()));
      // Rows first: the dense push ends this worker's clock.
      client.push_sparse(kTable, b.sparse.keys, row_grad, clock, lr);
      client.push_dense(dense_grad, clock, lr).wait(Deadline::after(timeout * 3));
      ++clock;
      ++s.steps;
      if (s.steps % po.n_fetch == 0) client.pull_dense(dense.flat, gated ? clock : -1).wait(Deadline::after(timeout * 3));
      samples += count;
      window_loss += loss.item();
      ++window_steps;
      if (s.leader && (s.steps % log_every == 0)) {
        const double dt = seconds_since(window_start);
        report(fmt::format("epoch {}/{} step {}/{}: loss {:.4f}, {:.0f} samples/s on this worker", epoch + 1, epochs,
                           s.steps, per_epoch * epochs, window_loss / static_cast<double>(window_steps),
                           static_cast<double>(window_steps * batch) / std::max(dt, 1e-9)));
        window_loss = 0, window_steps = 0, window_start = Clock::now();
      }
    }
  }
  s.train_seconds = seconds_since(t0);
  s.samples_per_s = static_cast<double>(samples) / std::max(s.train_seconds, 1e-9);

  if (s.leader && n_test > 0) {
    // The latest model: the servers' dense values and, per test batch, its rows.
    client.pull_dense(dense.flat, po.config.consistency == ps::Consistency::bsp ? clock : -1)
        .wait(Deadline::after(timeout * 3));
    autograd::NoGradGuard no_grad;
    const Tensor w = dense.w(), bias = dense.b();
    double loss_sum = 0;
    int64_t correct = 0;
    for (int64_t first = n_train; first < n; first += 1024) {
      std::vector<int64_t> rows(static_cast<size_t>(std::min<int64_t>(1024, n - first)));
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = first + static_cast<int64_t>(i);
      Batch b{data::make_sparse_batch(all, rows, buckets), {}};
      const auto keys = static_cast<int64_t>(b.sparse.keys.size());
      b.rows.resize(static_cast<size_t>(keys * dim));
      client.pull_sparse(kTable, b.sparse.keys, b.rows, -1).wait(Deadline::after(timeout * 3));
      const Tensor table = Tensor::from_vector(b.rows, {keys, dim});
      const Tensor logits = linear(embedding_bag(table, b.sparse.index, b.sparse.offsets, b.sparse.values), w, bias);
      loss_sum += cross_entropy(logits, b.sparse.targets).item() * static_cast<double>(rows.size());
      const auto l = logits.to_vector<float>();
      const auto t = b.sparse.targets.to_vector<int64_t>();
      for (size_t r = 0; r < rows.size(); ++r) {
        const auto begin = l.begin() + static_cast<ptrdiff_t>(r * static_cast<size_t>(classes));
        correct += std::max_element(begin, begin + classes) - begin == t[r];
      }
    }
    s.has_eval = true;
    s.test_loss = loss_sum / static_cast<double>(n_test);
    s.test_top1 = static_cast<double>(correct) / static_cast<double>(n_test);
  }
  client.done();
  return s;
}

}  // namespace braid::train
