// The step profile of the example configs: its structure against the model
// (layers, parameter bytes, one gradient per parameter in backward order, a
// layer's output), and its predicted step against the same step run eagerly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "braid/nn/sequential.h"
#include "braid/sim/step_profile.h"
#include "braid/train/trainer_setup.h"

namespace braid::sim {
namespace {

namespace fs = std::filesystem;

train::Config config(const std::string& name, std::vector<std::string> sets = {}) {
  return train::load_config((fs::path(BRAID_TESTS_DIR) / "../examples/configs" / (name + ".toml")).string(), sets,
                            false);
}

// An op table in a file of its own, removed after.
struct TempTable {
  std::string path = (fs::temp_directory_path() / fmt::format("braid_step_profile_{}.json", ::getpid())).string();
  OpTable table;
  explicit TempTable(OpTableOptions o = {}) : table([&] {
    o.path = path;
    return o;
  }()) {}
  ~TempTable() { fs::remove(path); }
};

// Tensor parallelism's model reads a block's GEMM and sequence-wise parts
// (plan_model_tensor.cc); SGD without momentum leaves its update's optional
// buffer out, which the gradients' ready times skip.
TEST(StepProfile, TransformerBlocksSplitIntoGemmsAndSequenceWiseWork) {
  const train::Config c = config("char_transformer", {"optim.name=sgd", "optim.momentum=0"});
  TempTable t({.warmup = 1, .repeats = 1, .max_seconds = 0.005});
  const StepProfile p = profile_step(c, t.table, 4, 1);
  int blocks = 0;
  for (const LayerProfile& l : p.layers) {
    SCOPED_TRACE("layer " + l.name);
    EXPECT_LE(l.gemm_forward + l.sequence_forward, l.forward * (1 + 1e-12));
    EXPECT_LE(l.gemm_backward + l.sequence_backward, l.backward * (1 + 1e-12));
    if (l.gemm_forward > 0 && l.sequence_forward > 0) {
      ++blocks;
      EXPECT_GT(l.gemm_backward, 0);
      EXPECT_GT(l.sequence_backward, 0);
    }
  }
  EXPECT_EQ(blocks, c.get_int("model.n_layers"));
  EXPECT_FALSE(p.gradients.empty());
}

TEST(StepProfile, MlpLayersParametersGradientsAndOutputsMatchTheModel) {
  const train::Config c = config("fashion_mlp");
  // Numbers do not matter here: quick measurements.
  TempTable t({.warmup = 1, .repeats = 1, .max_seconds = 0.005});
  const StepProfile p = profile_step(c, t.table, 64, 1);
  const train::ModelAndBatch m = train::model_and_batch(c);
  const auto& model = dynamic_cast<const nn::Sequential&>(*m.model);
  EXPECT_EQ(p.model, "mlp");
  EXPECT_EQ(p.batch, 64);
  ASSERT_EQ(p.layers.size(), model.size());
  int64_t bytes = 0;
  for (const Tensor& w : model.parameters()) bytes += static_cast<int64_t>(w.nbytes());
  EXPECT_EQ(p.parameter_bytes, bytes);
  int64_t layer_bytes = 0, nodes = 0;
  double forward = 0;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const LayerProfile& l = p.layers[i];
    SCOPED_TRACE("layer " + l.name);
    EXPECT_EQ(l.name, model.name_of(i));
    layer_bytes += l.parameter_bytes;
    nodes += l.nodes;
    forward += l.forward;
    EXPECT_GT(l.nodes, 0);
    // A layer with parameters has a backward pass and an update; one without
    // (Flatten, ReLU) updates nothing.
    if (l.parameter_bytes > 0) {
      EXPECT_GT(l.backward, 0);
      EXPECT_GT(l.update, 0);
    } else {
      EXPECT_EQ(l.update, 0);
    }
  }
  EXPECT_EQ(layer_bytes, bytes);
  EXPECT_EQ(nodes, p.nodes);
  EXPECT_NEAR(forward, p.forward, 1e-12 * p.forward);  // summed in another order
  // Flatten's [64, 784] and the first Linear's [64, 256], f32.
  EXPECT_EQ(p.layers[0].output_bytes, 64 * 784 * 4);
  EXPECT_EQ(p.layers[1].output_bytes, 64 * c.get_int("model.hidden") * 4);
  EXPECT_EQ(p.layers.back().output_bytes, 64 * 10 * 4);

  ASSERT_EQ(p.gradients.size(), model.named_parameters().size());
  std::set<std::string> names;
  for (size_t i = 0; i < p.gradients.size(); ++i) {
    const GradientReady& g = p.gradients[i];
    names.insert(g.name);
    EXPECT_EQ(g.name.substr(0, g.name.find('.')), p.layers.at(static_cast<size_t>(g.layer)).name) << g.name;
    if (i > 0) {
      EXPECT_GE(g.ready, p.gradients[i - 1].ready) << g.name;
    }
    EXPECT_GT(g.ready, 0) << g.name;
    EXPECT_LE(g.ready, p.backward) << g.name;
  }
  for (const auto& [name, w] : model.named_parameters()) EXPECT_TRUE(names.count(name)) << name;
  // Backward runs from the last layer to the first: the last Linear's
  // gradients are ready first, the first Linear's last.
  EXPECT_EQ(p.gradients.front().layer, 5);
  EXPECT_EQ(p.gradients.back().layer, 1);
}

// The profile's forward + backward + update against the eager step of the
// same model, batch and threads. The profile sums isolated op timings with
// hot caches, so it misses what an eager step adds around the ops (autograd
// bookkeeping, operands fetched from memory in a step larger than the cache)
// and reads low. Measured on the development machine (2 shared cores, AMD
// EPYC, 2026-11): MLP -5% to -8%, CNN -20% to +10% (its convolution
// autotuner's choice varies by run), char transformer -9% to -19%; on a
// 2-core Intel Xeon with AVX-512 (2026-11-28), where the same kernels run
// faster and the per-op overhead weighs more: MLP -24% to -41%, CNN -3% to
// -10%, char transformer -31% to -39% (the higher figures in a fresh Debian
// root, scripts/check-fresh). The simulator scales the profile to the
// measured step anyway (docs/sim.md); what this test guards is the profile's
// structure. A profile that lost a phase (forward and backward are each
// about half the step: MLP -63% and -66%, CNN -55% and -57%, transformer
// -68%) or a large layer reads below -50%.
constexpr double kTolerance = 0.5;

// On shared cores another process's burst can slow either side several
// times over (seen: an eager step of 84 ms timed at 744 ms while a compiler
// ran). So an attempt counts only when the eager step timed before and after
// the profile agrees within 15%, and a miss is measured again, up to 3
// attempts; with no quiet attempt the case is reported as not measurable
// rather than passed or failed on noise. Returns predicted / eager.
std::optional<double> profile_over_eager(const std::string& name, int64_t batch, int threads) {
  const train::Config c = config(name);
  std::optional<double> ratio;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const double before = measure_eager_step(c, {.batch = batch, .threads = threads});
    TempTable t;
    const StepProfile p = profile_step(c, t.table, batch, threads);
    const double after = measure_eager_step(c, {.batch = batch, .threads = threads});
    const double predicted = p.forward + p.backward + p.update, eager = std::min(before, after);
    std::printf("%s batch %lld t%d: profile %.3f ms (forward %.3f, backward %.3f, update %.3f), eager %.3f / %.3f ms: "
                "%+.1f%%\n",
                name.c_str(), static_cast<long long>(batch), threads, predicted * 1e3, p.forward * 1e3,
                p.backward * 1e3, p.update * 1e3, before * 1e3, after * 1e3, (predicted / eager - 1) * 100);
    if (std::abs(before / after - 1) > 0.15) continue;
    ratio = predicted / eager;
    if (std::abs(*ratio - 1) <= kTolerance) break;
  }
  return ratio;
}

void expect_profiles_near_eager(const std::string& name, int64_t batch) {
  int measured = 0;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(name + " on " + std::to_string(threads) + " threads");
    const std::optional<double> ratio = profile_over_eager(name, batch, threads);
    if (!ratio) {
      std::printf("%s t%d: the machine was too busy to time the eager step twice alike; not checked\n", name.c_str(),
                  threads);
      continue;
    }
    ++measured;
    EXPECT_NEAR(*ratio, 1.0, kTolerance);
  }
  if (measured == 0) GTEST_SKIP() << "the machine was too busy to time " << name;
}

TEST(StepProfile, MlpStepWithinToleranceOfTheEagerStep) { expect_profiles_near_eager("fashion_mlp", 64); }

TEST(StepProfile, CnnStepWithinToleranceOfTheEagerStep) { expect_profiles_near_eager("fashion_cnn", 64); }

TEST(StepProfile, CharTransformerStepWithinToleranceOfTheEagerStep) {
  expect_profiles_near_eager("char_transformer", 32);
}

}  // namespace
}  // namespace braid::sim
