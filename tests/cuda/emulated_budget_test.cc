// The step budgets of issue 52, measured on the emulated device (emulated.h)
// for GPT-2's structure scaled down in width: layer norm, learned positions,
// GELU (tanh), biases, tied head, AdamW with weight decay, gradient clipping,
// bf16 products, as examples/configs/gpt2_124m.toml trains it, through the
// same trainer `braid train` runs. Where a budget is met the test asserts it;
// where not yet, it asserts today's figure as a ceiling (a regression fails)
// and docs/gpu.md ("Step budgets") says the gap and why.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "braid/autograd/engine.h"
#include "braid/cuda/emulated.h"
#include "braid/ops/autocast.h"
#include "braid/ops/ops.h"
#include "braid/text/shards.h"
#include "braid/train/trainer_setup.h"
#include "tests/testing/temp_dir.h"

namespace braid::train {
namespace {

using cuda::emulated::StepProfile;

constexpr int64_t kContext = 24;  // no other dim of the model is 24, so [.., 24, 24] outputs are scores

class GptBudget : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    text::ShardWriter w({.prefix = dir_->file("tok"), .vocab_size = 80, .ids_per_shard = 4000});
    std::vector<uint32_t> ids(4000);
    for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = (i * 7 + i / 13) % 80;
    w.add(ids);
    w.finish();
  }
  static void TearDownTestSuite() { delete dir_; }

  // The run of a GPT-2-shaped model of `layers` blocks on the emulated GPU.
  static TrainingRun make_run(int64_t layers) {
    Config c = load_config("", {}, /*use_env=*/false);
    for (const std::string& s : std::vector<std::string>{
             "train.out_dir=" + dir_->file("out"), "train.threads=1", "data.workers=0", "data.name=tokens",
             "data.path=" + dir_->file("tok-*.tok"), "model.name=gpt", "model.n_layers=" + std::to_string(layers),
             "model.n_heads=2", "model.d_model=32", "model.context=" + std::to_string(kContext), "model.vocab=80",
             "model.norm=layer", "model.position=learned", "model.activation=gelu_tanh", "model.bias=true",
             "model.tie_embeddings=true", "model.dropout=0", "train.batch_size=2", "train.grad_clip=1.0",
             "train.precision=bf16", "train.device=cuda", "optim.name=adamw", "optim.weight_decay=0.1",
             "parallel.strategy=none"}) {
      c.set(s);
    }
    return make_training_run(c);
  }

  // One step after another of a GPT-2-shaped model of `layers` blocks.
  static StepProfile profile(int64_t layers) {
    TrainingRun run = make_run(layers);
    data::Loader& loader = *run.train_loader;
    loader.start_epoch(0);
    int64_t epoch = 0;
    const StepProfile p = cuda::emulated::profile_steps(
        [&] {
          std::optional<data::Batch> b = loader.next();
          if (!b) {
            loader.start_epoch(++epoch);
            b = loader.next();
          }
          run.trainer->train_step(*b);
        },
        {.warmup = 3, .steps = 4, .null_device = true, .square = kContext});
    std::printf("%lld block(s): %s\n", static_cast<long long>(layers), cuda::emulated::to_json(p).dump().c_str());
    return p;
  }

  static test::TempDir* dir_;
};

test::TempDir* GptBudget::dir_ = nullptr;

// CUDA graph capture as the emulated device enforces it (emulated::Capture).
// The trainer's step is refused today: it reads the loss. The step without
// the reads — forward, backward and AdamW's update, the batch already on the
// device — asks nothing a captured stream may not do: no wait, no memory from
// the system, no pageable copy.
TEST_F(GptBudget, CaptureOfAStep) {
  TrainingRun run = make_run(2);
  data::Loader& loader = *run.train_loader;
  loader.start_epoch(0);
  const data::Batch b = *loader.next();
  for (int i = 0; i < 5; ++i) run.trainer->train_step(b);  // warm-up: optimizer state, the cache
  try {
    cuda::emulated::Capture capture;
    run.trainer->train_step(b);
    ADD_FAILURE() << "the trainer's step was captured";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("a copy to the host"), std::string::npos) << e.what();
  }
  const Tensor x = b.input.to(Device::cuda(0)), y = b.target.to(Device::cuda(0));
  nn::Module& model = *run.model;
  optim::Optimizer& adamw = run.trainer->optimizer();
  auto step = [&] {
    adamw.zero_grad(/*set_to_none=*/false);
    {
      Autocast autocast(DType::bf16);
      const Tensor logits = model.forward(x);
      backward(cross_entropy(reshape(logits, {-1, logits.size(-1)}), reshape(y, {-1})));
    }
    adamw.step();
  };
  for (int i = 0; i < 3; ++i) step();
  cuda::emulated::Capture capture;
  EXPECT_NO_THROW(step());
}

// Issue 52's budgets, and today's figures where they are not met yet (the
// ceilings a regression would cross). Lower a ceiling when a change meets
// more of its budget.
struct Budget {
  double syncs = 0;              // met: 0
  double allocations = 0;        // after warm-up; met: 0
  double score_outputs = 0;      // f32 [.., T, T] outputs per block and step; met: 0
  double launches_per_block = 30;
  double host_us_per_op = 5;
};
constexpr Budget kIssue{};
// Measured 2026-12-08 (this file's model, 3 warm-up steps): 2 syncs, 0
// allocations, 0 score tensors (fused attention on the device; 8 before) and
// 64 launches per block (148 before; fused attention 126, the multi-tensor
// AdamW 102, clipping's norm in one op), 1.2-2.4 us per op.
constexpr Budget kToday{.syncs = 2, .allocations = 0, .score_outputs = 0, .launches_per_block = 64,
                        .host_us_per_op = 5};

class GptBudgets : public GptBudget {
 protected:
  static void SetUpTestSuite() {
    GptBudget::SetUpTestSuite();
    one_ = new StepProfile(profile(1));
    two_ = new StepProfile(profile(2));
  }
  static void TearDownTestSuite() {
    delete one_;
    delete two_;
    GptBudget::TearDownTestSuite();
  }
  static StepProfile* one_;
  static StepProfile* two_;
};

StepProfile* GptBudgets::one_ = nullptr;
StepProfile* GptBudgets::two_ = nullptr;

// The figure beside the issue's budget, in the test's output.
void report(const char* what, double today, double budget) {
  std::printf("%s: %g (budget %g: %s)\n", what, today, budget, today <= budget ? "met" : "not yet");
}

// Each wait of the host for the GPU drains its queue. Today's two: the loss
// read and the gradient norm clipping reads (cross-entropy's targets and the
// embedding's indices are checked on the device).
TEST_F(GptBudgets, SyncsPerStep) {
  EXPECT_LE(two_->syncs, kToday.syncs);
  EXPECT_LE(one_->syncs, kToday.syncs);
  report("syncs a step", two_->syncs, kIssue.syncs);
}

TEST_F(GptBudgets, NoAllocationAfterWarmup) {
  EXPECT_LE(two_->allocations, kToday.allocations) << two_->allocated_bytes << " bytes a step from the system";
  EXPECT_LE(one_->allocations, kToday.allocations);
  report("allocations a step", two_->allocations, kIssue.allocations);
}

// Scores and probabilities [B*H, T, T] in f32: the composed attention held 8
// a block (matmul, scale, mask, softmax and their gradients); the fused
// kernel on the device (braid/cuda/attention_kernels.h) holds none.
TEST_F(GptBudgets, ScoreTensorsPerBlock) {
  const double per_block = two_->square_f32_outputs - one_->square_f32_outputs;
  EXPECT_LE(per_block, kToday.score_outputs);
  EXPECT_EQ(two_->square_f32_outputs, 2 * per_block) << "score-shaped outputs outside the blocks";
  report("f32 [.., T, T] outputs a block", per_block, kIssue.score_outputs);
}

// Forward and backward of one block (and its share of the optimizer's
// update): the step of 2 blocks minus the step of 1.
TEST_F(GptBudgets, LaunchesPerBlock) {
  const double per_block = two_->launches - one_->launches;
  EXPECT_GT(per_block, 0);
  EXPECT_LE(per_block, kToday.launches_per_block);
  report("launches a block", per_block, kIssue.launches_per_block);
}

// The framework's own time per op call with no kernel run (shapes, autograd,
// dispatch, the caching allocator): the fastest of the counted steps.
TEST_F(GptBudgets, HostTimePerOp) {
  EXPECT_GT(two_->op_calls, 0);
  EXPECT_LE(two_->host_us_per_op, kToday.host_us_per_op);
  report("host us an op", two_->host_us_per_op, kIssue.host_us_per_op);
}

}  // namespace
}  // namespace braid::train
