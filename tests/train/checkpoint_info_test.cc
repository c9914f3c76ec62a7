// A checkpoint folder described from the outside (whole-model and sharded
// runs, steps some shards lack, a broken shard), and one step consolidated
// into a single safetensors file equal to what merging the shards gives.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "braid/base/safetensors.h"
#include "braid/ops/shape.h"
#include "braid/parallel/shard_spec.h"
#include "braid/train/checkpoint_info.h"
#include "braid/train/checkpoint_shards.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tensors.h"

namespace braid::train {
namespace {

using test::cut;
using test::iota;

// A ZeRO-1 data-parallel run's whole-model checkpoint of `step`.
void write_whole(const std::string& dir, int64_t step) {
  Checkpoint c;
  c.model = {{"0.weight", iota({3, 2}, 0)}, {"0.bias", iota({3}, 10)}};
  c.optimizer = {.tensors = {{"0.momentum_buffer", iota({3, 2}, 20)}, {"1.momentum_buffer", iota({3}, 30)}},
                 .scalars = {{"name", "sgd"}, {"steps", step}, {"num_params", 2}}};
  c.step = step, c.epoch = 1, c.batch = 4;
  c.extra = {{"run_id", "whole-run"}, {"zero", {{"stage", 1}, {"data_world", 2}}}};
  save_checkpoint(dir, c);
}

// The whole tensors of the sharded run below.
const Tensor kW1 = iota({4, 3}, 0), kW2 = iota({2, 4}, 100), kB2 = iota({2}, 200), kW3 = iota({3, 2}, 300);
const Tensor kM1 = iota({4, 3}, 1000);  // kW1's momentum

void write_shard(const std::string& dir, int t, int p, const nn::NamedTensors& model, const nn::NamedTensors& optim,
                 const parallel::ShardSpecs& specs, int64_t step) {
  Checkpoint c;
  c.model = model;
  c.optimizer = {.tensors = optim, .scalars = {{"name", "sgd"}, {"steps", step}, {"num_params", model.size()}}};
  c.step = step, c.epoch = 0, c.batch = step;
  std::vector<std::string> order;
  for (const auto& [name, x] : model) order.push_back(name);
  const std::string name = fmt::format("t{}-p{}", t, p);
  const std::string mesh = fmt::format("data 2 x tensor 2 x pipeline 2; rank {} = (d 0, t {}, p {})", 4 * p + t, t, p);
  c.extra = {{"run_id", "sharded-run"},
             {"shard", {{"name", name}, {"mesh", mesh}, {"specs", parallel::to_json(specs)}, {"params", order}}}};
  save_checkpoint(dir + "/shard-" + name, c);
}

// Tensor x pipeline 2 x 2 at step 20 (a column- and a row-parallel weight, a
// replicated bias, a second stage), and a step 30 only shard t0-p1 reached.
void write_sharded(const std::string& dir) {
  for (int t = 0; t < 2; ++t) {
    const parallel::ShardSpecs specs = {{"1.weight", {.dim = 0, .full_shape = {4, 3}, .offset = 2 * t}},
                                        {"2.weight", {.dim = 1, .full_shape = {2, 4}, .offset = 2 * t}}};
    write_shard(dir, t, 0,
                {{"1.weight", cut(kW1, 0, 2 * t, 2 * t + 2)}, {"2.weight", cut(kW2, 1, 2 * t, 2 * t + 2)}, {"2.bias", kB2}},
                {{"0.momentum_buffer", cut(kM1, 0, 2 * t, 2 * t + 2)}}, specs, 20);
    write_shard(dir, t, 1, {{"3.weight", kW3}}, {}, {}, 20);
  }
  write_shard(dir, 0, 1, {{"3.weight", kW3}}, {}, {}, 30);
}

std::vector<float> floats(const safetensors::TensorData& d) {
  std::vector<float> v(d.data.size() / sizeof(float));
  std::memcpy(v.data(), d.data.data(), d.data.size());
  return v;
}

TEST(CheckpointInfo, AWholeModelFolder) {
  test::TempDir tmp;
  write_whole(tmp.str(), 10);
  write_whole(tmp.str(), 20);
  const CheckpointInfo info = describe_checkpoints(tmp.str());
  EXPECT_TRUE(info.shard_folders.empty());
  EXPECT_EQ(info.whole_steps, (std::vector<int64_t>{10, 20}));
  EXPECT_TRUE(info.shard_steps.empty());
  ASSERT_EQ(info.steps.size(), 2u);
  const StepSummary& s = info.steps[1];
  EXPECT_EQ(s.problem, "");
  EXPECT_EQ(s.step, 20);
  EXPECT_FALSE(s.sharded);
  EXPECT_EQ(s.epoch, 1);
  EXPECT_EQ(s.batch, 4);
  EXPECT_EQ(s.optimizer, "sgd");
  EXPECT_EQ(s.optimizer_steps, 20);
  EXPECT_EQ(s.run_id, "whole-run");
  EXPECT_EQ(s.zero_stage, 1);
  EXPECT_EQ(s.data_world, 2);
  EXPECT_EQ(s.model_elements, 9);
  ASSERT_EQ(s.shards.size(), 1u);
  EXPECT_EQ(s.shards[0].name, "");
  EXPECT_EQ(s.shards[0].file, checkpoint_stem(tmp.str(), 20) + ".safetensors");
  EXPECT_EQ(s.shards[0].model_bytes, 9 * 4);
  EXPECT_EQ(s.shards[0].optimizer_bytes, 9 * 4);

  const CheckpointInfo one = describe_checkpoints(tmp.str(), 10);
  ASSERT_EQ(one.steps.size(), 1u);
  EXPECT_EQ(one.steps[0].step, 10);
  EXPECT_THROW(describe_checkpoints(tmp.str(), 15), IoError);
  EXPECT_THROW(describe_checkpoints(tmp.file("absent")), IoError);
}

TEST(CheckpointInfo, AShardedFolder) {
  test::TempDir tmp;
  write_sharded(tmp.str());
  const CheckpointInfo info = describe_checkpoints(tmp.str());
  EXPECT_EQ(info.shard_folders, (std::vector<std::string>{"shard-t0-p0", "shard-t0-p1", "shard-t1-p0", "shard-t1-p1"}));
  EXPECT_TRUE(info.whole_steps.empty());
  EXPECT_EQ(info.shard_steps, (std::vector<int64_t>{20}));
  ASSERT_EQ(info.incomplete.count(30), 1u);
  EXPECT_EQ(info.incomplete.at(30), (std::vector<std::string>{"shard-t0-p0", "shard-t1-p0", "shard-t1-p1"}));
  ASSERT_EQ(info.steps.size(), 1u);
  const StepSummary& s = info.steps[0];
  EXPECT_EQ(s.problem, "");
  EXPECT_TRUE(s.sharded);
  EXPECT_EQ(s.mesh, "data 2 x tensor 2 x pipeline 2");
  EXPECT_EQ(s.data_world, 2);
  EXPECT_EQ(s.zero_stage, 0);
  EXPECT_EQ(s.run_id, "sharded-run");
  EXPECT_EQ(s.model_elements, 12 + 8 + 2 + 6);  // slices counted by their whole shape, the bias once
  ASSERT_EQ(s.shards.size(), 4u);
  EXPECT_EQ(s.shards[0].name, "shard-t0-p0");
  EXPECT_EQ(s.shards[0].elements, 6 + 4 + 2);
  EXPECT_EQ(s.shards[0].optimizer_bytes, 6 * 4);
  EXPECT_EQ(s.shards[1].elements, 6);
  EXPECT_EQ(s.shards[1].mesh, "data 2 x tensor 2 x pipeline 2; rank 4 = (d 0, t 0, p 1)");
  EXPECT_EQ(to_json(info).at("steps").at(0).at("model_elements"), 28);

  // A broken shard is described, not thrown: the step names the file.
  const std::string file = checkpoint_stem(tmp.str() + "/shard-t1-p0", 20) + ".safetensors";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  const CheckpointInfo broken = describe_checkpoints(tmp.str());
  ASSERT_EQ(broken.steps.size(), 1u);
  EXPECT_NE(broken.steps[0].problem.find(file), std::string::npos) << broken.steps[0].problem;
  EXPECT_THROW(load_whole_checkpoint(tmp.str()), IoError);
}

TEST(CheckpointInfo, ConsolidatingShardsEqualsMergingThem) {
  test::TempDir tmp;
  const std::string dir = tmp.file("run");
  write_sharded(dir);
  const Checkpoint merged = merge_shard_checkpoints(dir, 20, {"1.weight", "2.weight", "2.bias", "3.weight"});
  const Checkpoint whole = load_whole_checkpoint(dir);  // newest complete step, order from the shards
  EXPECT_EQ(whole.step, 20);
  save_consolidated(tmp.file("whole.safetensors"), whole);

  const safetensors::File f = safetensors::read(tmp.file("whole.safetensors"));
  EXPECT_EQ(f.tensors.size(), merged.model.size() + merged.optimizer.tensors.size());
  for (const auto& [name, t] : merged.model) {
    ASSERT_EQ(f.tensors.count(name), 1u) << name;
    EXPECT_EQ(f.tensors.at(name).shape, t.shape()) << name;
    EXPECT_EQ(floats(f.tensors.at(name)), t.to_vector<float>()) << name;
  }
  for (const auto& [name, t] : merged.optimizer.tensors) {
    ASSERT_EQ(f.tensors.count("optim." + name), 1u) << name;
    EXPECT_EQ(floats(f.tensors.at("optim." + name)), t.to_vector<float>()) << name;
  }
  EXPECT_EQ(floats(f.tensors.at("1.weight")), kW1.to_vector<float>());
  EXPECT_EQ(f.metadata.at("format"), "braid-consolidated");
  EXPECT_EQ(f.metadata.at("step"), "20");
  EXPECT_EQ(f.metadata.at("run_id"), "sharded-run");
  EXPECT_EQ(nlohmann::json::parse(f.metadata.at("optimizer")).at("num_params"), 4);
}

TEST(CheckpointInfo, ConsolidatingAWholeModelCheckpointKeepsIt) {
  test::TempDir tmp;
  const std::string dir = tmp.file("run");
  write_whole(dir, 10);
  write_whole(dir, 20);
  const Checkpoint c = load_whole_checkpoint(dir);
  EXPECT_EQ(c.step, 20);
  save_consolidated(tmp.file("whole.safetensors"), c);
  const safetensors::File f = safetensors::read(tmp.file("whole.safetensors"));
  EXPECT_EQ(floats(f.tensors.at("0.weight")), iota({3, 2}, 0).to_vector<float>());
  EXPECT_EQ(floats(f.tensors.at("optim.1.momentum_buffer")), iota({3}, 30).to_vector<float>());
  EXPECT_EQ(load_whole_checkpoint(dir, 10).step, 10);
  EXPECT_THROW(load_whole_checkpoint(dir, 15), IoError);

  Checkpoint clash = c;
  clash.model.emplace_back("optim.0.x", iota({1}, 0));
  EXPECT_THROW(save_consolidated(tmp.file("clash.safetensors"), clash), ValueError);
}

}  // namespace
}  // namespace braid::train
