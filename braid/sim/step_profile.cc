#include "braid/sim/step_profile.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <thread>

#include "braid/autograd/engine.h"
#include "braid/base/log.h"
#include "braid/base/median.h"
#include "braid/base/thread_pool.h"
#include "braid/graph/passes.h"
#include "braid/graph/step.h"
#include "braid/nn/init.h"
#include "braid/nn/sequential.h"
#include "braid/ops/autocast.h"
#include "braid/sim/moe_cost.h"
#include "braid/tensor/cpu/autotune.h"
#include "braid/train/config_data.h"
#include "braid/train/trainer_setup.h"

namespace braid::sim {

namespace {

enum Phase : int { kForward = 0, kBackward = 1, kUpdate = 2 };

// Eager steps before timing: enough for every autotuner key of the step to
// settle (kTuningTrials calls of each of at most 10 candidates; op_table.cc).
constexpr int kSettleSteps = cpu::kTuningTrials * 10;

// The median seconds of `fn`, called for `window` seconds and at least
// `at_least` times: what measure_eager_step and measure_batch_load time.
template <class Fn>
double median_call(Fn&& fn, double window, int at_least) {
  std::vector<double> times;
  const auto begin = std::chrono::steady_clock::now();
  auto since = [](auto t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); };
  while (static_cast<int>(times.size()) < at_least || since(begin) < window) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(since(t0));
  }
  return upper_median(std::move(times));
}

// The model as layers: a Sequential as it is; any other model as the one
// layer of a Sequential, profiled under the name "model".
struct Layered {
  std::shared_ptr<nn::Sequential> model;
  std::vector<std::string> names;
  bool wrapped = false;
};

Layered layered(const std::shared_ptr<nn::Module>& model) {
  if (auto s = std::dynamic_pointer_cast<nn::Sequential>(model)) {
    Layered l{s, {}, false};
    for (size_t i = 0; i < s->size(); ++i) l.names.push_back(s->name_of(i));
    return l;
  }
  return {std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{model}), {"model"}, true};
}

Shape batch_shape(int64_t n, const Shape& example) {
  Shape s{n};
  s.insert(s.end(), example.begin(), example.end());
  return s;
}

// n examples: floating inputs from N(0, 1); integer inputs and targets zero,
// a valid token and class id whatever the vocabulary (the work does not
// depend on which ids they are).
std::pair<Tensor, Tensor> random_batch(const data::ExampleSpec& e, int64_t n) {
  Generator gen(1);
  Tensor x = Tensor::zeros(batch_shape(n, e.input_shape), is_floating(e.input_dtype) ? DType::f32 : e.input_dtype);
  if (is_floating(e.input_dtype)) {
    nn::init::normal_(x, 0, 1, gen);
    x = x.to(e.input_dtype);
  }
  return {x, Tensor::zeros(batch_shape(n, e.target_shape), e.target_dtype)};
}

// Each node's phase, from its position: capture records calls in the order
// the step makes them, the forward up to the loss, then the backward pass,
// then the optimizer's step, which begins with its first read of its state
// or scalars (the inputs named "optimizer.*").
std::vector<Phase> phases(const graph::Graph& g) {
  int loss = -1;
  for (const auto& [name, v] : g.outputs()) {
    if (name == "loss") loss = g.value(v).producer;
  }
  BRAID_CHECK(loss >= 0, "the captured step has no loss node");
  std::vector<Phase> phase(g.nodes().size(), kForward);
  Phase now = kBackward;
  for (size_t k = static_cast<size_t>(loss) + 1; k < phase.size(); ++k) {
    for (int v : g.nodes()[k].inputs) {
      if (v >= 0 && g.value(v).kind == graph::ValueKind::input && g.value(v).name.rfind("optimizer.", 0) == 0) {
        now = kUpdate;
      }
    }
    phase[k] = now;
  }
  return phase;
}

// The backward node that computed value v's numbers: back through clones,
// copies and views, which only move them (-1 when v is not a result).
int computed_by(const graph::Graph& g, const std::vector<Phase>& phase, int v) {
  int node = g.value(v).kind == graph::ValueKind::result ? g.value(v).producer : -1;
  while (node >= 0) {
    const graph::Node& n = g.nodes()[static_cast<size_t>(node)];
    int source = -1;
    if (n.op->name == "copy_") {
      source = n.inputs[1];  // copy_(dst, src)
    } else if (n.op->name == "clone" || n.op->effect == op::Effect::view) {
      source = n.inputs[0];
    }
    if (source < 0 || g.value(source).kind != graph::ValueKind::result) return node;
    const int earlier = g.value(source).producer;
    if (phase[static_cast<size_t>(earlier)] != kBackward) return node;
    node = earlier;
  }
  return node;
}

// When each parameter's gradient is final: the backward node that computed
// the gradient its update reads (the update's input made in the backward
// pass), timed from the start of the backward pass in node order.
std::vector<GradientReady> gradients(const graph::Graph& g, const std::vector<Phase>& phase,
                                     const std::vector<double>& seconds,
                                     const std::map<std::string, GradientReady>& params) {
  std::vector<double> done(seconds.size());  // backward seconds when node k ends
  double t = 0;
  for (size_t k = 0; k < seconds.size(); ++k) done[k] = t += phase[k] == kBackward ? seconds[k] : 0;
  std::vector<GradientReady> out;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const graph::Node& n = g.nodes()[k];
    if (phase[k] != kUpdate || n.op->effect != op::Effect::inplace) continue;
    for (int m : n.op->mutates) {
      // An optional buffer left out (SGD's momentum when optim.momentum = 0).
      if (n.inputs[static_cast<size_t>(m)] < 0) continue;
      const graph::Value& written = g.value(n.inputs[static_cast<size_t>(m)]);
      auto it = params.find(written.name);
      if (it == params.end() || written.kind != graph::ValueKind::input) continue;
      int ready = -1;
      for (int v : n.inputs) {
        if (v < 0 || g.value(v).kind != graph::ValueKind::result) continue;
        if (phase[static_cast<size_t>(g.value(v).producer)] != kBackward) continue;
        ready = std::max(ready, computed_by(g, phase, v));
      }
      GradientReady r = it->second;
      r.ready = ready >= 0 ? done[static_cast<size_t>(ready)] : 0;
      out.push_back(r);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.ready < b.ready; });
  return out;
}

// The step of `m` on `batch` examples, each layer's nodes on its own rank,
// simplified as graph::TrainingStep simplifies it, with each node's phase in
// its rank: rank = phase * layers + layer. `outputs`: each layer's output.
graph::Graph capture(train::ModelAndBatch& m, const Layered& l, optim::Optimizer& optimizer, int64_t batch,
                     std::vector<op::TensorMeta>& outputs) {
  {
    // One eager step first (two examples), so that the optimizer's buffers
    // exist and the captured update is the steady-state one, as
    // graph::TrainingStep does (SGD's first momentum step differs).
    const auto [x, y] = random_batch(m.example, 2);
    optimizer.zero_grad(true);
    backward(m.loss((*l.model)(x), y));
    optimizer.step();
  }
  const int layers = static_cast<int>(l.names.size());
  std::vector<int> stages(static_cast<size_t>(layers));
  std::iota(stages.begin(), stages.end(), 0);
  const data::ExampleSpec& e = m.example;
  graph::Graph g =
      graph::capture_staged_step_meta(*l.model, optimizer, m.loss, batch_shape(batch, e.input_shape), e.input_dtype,
                                      batch_shape(batch, e.target_shape), e.target_dtype, stages, &outputs);
  // The passes may remove, merge and fuse nodes, so each node's phase rides
  // through them in its rank: they keep a node's rank (graph/rebuild.h) and
  // fuse only nodes of one rank.
  const std::vector<Phase> phase = phases(g);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    graph::Node& n = g.mutable_nodes()[k];
    BRAID_CHECK(n.rank >= 0 && n.rank < layers, "node {} placed on layer {} of {}", n.op->name, n.rank, layers);
    n.rank += phase[k] * layers;
  }
  return graph::simplify(g);
}

// The profile's layers without their times (names, parameter and output
// bytes), and every parameter by its name in the captured step.
std::map<std::string, GradientReady> describe_layers(const Layered& l, const std::vector<op::TensorMeta>& outputs,
                                                     StepProfile& p) {
  std::map<std::string, GradientReady> params;
  for (size_t i = 0; i < l.names.size(); ++i) {
    LayerProfile& lp = p.layers.emplace_back();
    lp.name = l.names[i];
    for (const auto& [name, t] : (*l.model)[i].named_parameters()) {
      const std::string captured = l.model->name_of(i) + "." + name;
      const auto bytes = static_cast<int64_t>(t.nbytes());
      params[captured] = {.name = l.wrapped ? name : captured, .layer = static_cast<int>(i), .bytes = bytes};
      lp.parameter_bytes += bytes;
    }
    lp.output_bytes = numel(outputs.at(i).shape) * static_cast<int64_t>(itemsize(outputs.at(i).dtype));
    p.parameter_bytes += lp.parameter_bytes;
  }
  return params;
}

// The products tensor parallelism shards and its overlap pipelines.
bool is_gemm(const std::string& op) {
  return op == "linear" || op == "matmul" || op == "matmul_backward_a" || op == "matmul_backward_b" ||
         op == "linear_backward_bias";
}

// The work on whole sequences that sequence parallelism moves to segments.
bool is_sequence_wise(const std::string& op) {
  return op == "layer_norm" || op == "layer_norm_backward" || op == "rms_norm" || op == "rms_norm_backward" ||
         op == "dropout" || op == "add";
}

}  // namespace

StepProfile profile_step(const train::Config& config, OpTable& table, int64_t batch, int threads) {
  if (has_moe(config)) return profile_moe_step(config, table, batch, threads);
  train::ModelAndBatch m = train::model_and_batch(config);
  if (batch <= 0) batch = m.batch;
  const Layered l = layered(m.model);
  const int layers = static_cast<int>(l.names.size());
  auto optimizer = train::make_optimizer(config, m.model->parameters());
  Autocast autocast(train::train_precision(config));
  std::vector<op::TensorMeta> outputs;
  const graph::Graph g = capture(m, l, *optimizer, batch, outputs);

  StepProfile p;
  p.model = config.get_string("model.name");
  p.batch = batch;
  p.threads = threads;
  p.nodes = static_cast<int64_t>(g.nodes().size());
  const std::map<std::string, GradientReady> params = describe_layers(l, outputs, p);
  std::vector<Phase> phase(g.nodes().size());
  std::vector<double> seconds(g.nodes().size(), 0);
  std::map<std::string, int> refused;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const graph::Node& n = g.nodes()[k];
    phase[k] = static_cast<Phase>(n.rank / layers);
    LayerProfile& lp = p.layers[static_cast<size_t>(n.rank % layers)];
    // A node the table cannot time (an op that talks to another rank; a
    // captured training step has none) counts as 0 s here: its time is the
    // simulator's network model's.
    try {
      seconds[k] = table.seconds(*n.op, n.attrs, graph::input_metas(g, n), threads);
    } catch (const ValueError&) {
      ++refused[n.op->name];
    }
    // The totals add up in node order, as the gradients' ready times do, so
    // the last of those is exactly `backward`.
    (phase[k] == kForward ? lp.forward : phase[k] == kBackward ? lp.backward : lp.update) += seconds[k];
    if (phase[k] != kUpdate) {
      const bool fwd = phase[k] == kForward;
      if (is_gemm(n.op->name)) (fwd ? lp.gemm_forward : lp.gemm_backward) += seconds[k];
      if (is_sequence_wise(n.op->name)) (fwd ? lp.sequence_forward : lp.sequence_backward) += seconds[k];
    }
    (phase[k] == kForward ? p.forward : phase[k] == kBackward ? p.backward : p.update) += seconds[k];
    ++lp.nodes;
  }
  for (const auto& [name, count] : refused) {
    logging::warn("profile_step: {} {} nodes the op table cannot time count as 0 s", count, name);
  }
  p.gradients = gradients(g, phase, seconds, params);
  return p;
}

void scale_to(StepProfile& p, double step, int microbatches) {
  const double sum = p.step(microbatches);
  if (!(sum > 0) || !(step > 0)) return;
  const double f = step / sum;
  for (LayerProfile& l : p.layers) {
    l.forward *= f;
    l.backward *= f;
    l.gemm_forward *= f;
    l.gemm_backward *= f;
    l.sequence_forward *= f;
    l.sequence_backward *= f;
    l.update *= f;
    l.expert_forward *= f;
    l.expert_backward *= f;
    l.expert_update *= f;
  }
  for (GradientReady& g : p.gradients) g.ready *= f;
  p.forward *= f;
  p.backward *= f;
  p.update *= f;
}

double measure_eager_step(const train::Config& config, const EagerStep& how) {
  train::ModelAndBatch m = train::model_and_batch(config);
  const int64_t batch = how.batch > 0 ? how.batch : m.batch;
  const int micro = std::max(1, how.microbatches);
  auto optimizer = train::make_optimizer(config, m.model->parameters());
  // The same work with the weights held where they start: hundreds of steps
  // on one batch of one class saturate the logits, and the gradients sink
  // into subnormal floats, which Intel cores compute several times slower
  // (measured: the MLP's step 1.6 ms with lr 0.05, 0.73 ms with subnormals
  // flushed), a regime real training does not time.
  optimizer->set_lr(0);
  ThreadsScope scope(how.threads);
  Autocast autocast(train::train_precision(config));
  const auto [x, y] = random_batch(m.example, batch);
  // What the captured step holds (graph/step.cc): gradients set to none, so
  // the first backward makes them afresh; later micro-batches accumulate.
  auto step = [&] {
    optimizer->zero_grad(true);
    for (int i = 0; i < micro; ++i) backward(m.loss((*m.model)(x), y));
    optimizer->step();
  };
  for (int i = 0; i < kSettleSteps; ++i) step();
  std::this_thread::sleep_until(how.start);
  return median_call(step, EagerStep::kWindow, EagerStep::kMinSteps);
}

double measure_batch_load(const train::Config& config, int64_t batch) {
  train::Config c = config;
  c.set("data.workers=0");  // filled inside next(), on this thread
  c.set(fmt::format("train.batch_size={}", batch));
  const train::ModelAndBatch m = train::model_and_batch(c);
  auto loader = train::make_train_loader(c, m.train, {});
  int64_t epoch = 0;
  loader->start_epoch(epoch);
  auto next = [&] {
    while (!loader->next()) loader->start_epoch(++epoch);
  };
  for (int i = 0; i < 3; ++i) next();
  return median_call(next, /*window=*/0.2, /*at_least=*/10);
}

}  // namespace braid::sim
