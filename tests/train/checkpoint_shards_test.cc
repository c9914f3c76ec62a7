// Sharded checkpoints merged into one process's: tensor-parallel slices
// along rows and columns, replicated tensors, pipeline stages holding
// different layers, optimizer buffers renumbered by the whole model's order;
// shards of two runs and truncated shards refused, naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "braid/ops/shape.h"
#include "braid/parallel/shard_spec.h"
#include "braid/train/checkpoint_shards.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tensors.h"

namespace braid::train {
namespace {

using test::cut;
using test::iota;

// Writes one shard's checkpoint of `step` with its specs.
void write_shard(const std::string& dir, const std::string& shard, const nn::NamedTensors& model,
                 const optim::OptimizerState& opt, const parallel::ShardSpecs& specs, int64_t step,
                 const std::string& run_id = "run-a") {
  Checkpoint c;
  c.model = model;
  c.optimizer = opt;
  c.step = step;
  std::vector<std::string> order;
  for (const auto& [name, t] : model) order.push_back(name);
  c.extra = {{"shard", {{"name", shard}, {"specs", parallel::to_json(specs)}, {"params", order}}}, {"run_id", run_id}};
  save_checkpoint(dir + "/shard-" + shard, c);
}

void expect_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>()) << what;
}

TEST(CheckpointShards, TensorSlicesAndStagesMergeIntoTheWholeModel) {
  test::TempDir tmp;
  const std::string dir = tmp.path();
  // The whole model: a column-parallel weight (rows split), a row-parallel
  // weight (columns split), a replicated bias, and a second stage's layer.
  const Tensor w1 = iota({4, 3}, 0), w2 = iota({2, 4}, 100), b2 = iota({2}, 200), w3 = iota({3, 2}, 300);
  const Tensor m1 = iota({4, 3}, 1000);  // w1's momentum
  parallel::ShardSpecs specs;
  for (int t = 0; t < 2; ++t) {
    specs["1.weight"] = {.dim = 0, .full_shape = {4, 3}, .offset = 2 * t};
    specs["2.weight"] = {.dim = 1, .full_shape = {2, 4}, .offset = 2 * t};
    write_shard(dir, "t" + std::to_string(t) + "-p0",
                {{"1.weight", cut(w1, 0, 2 * t, 2 * t + 2)}, {"2.weight", cut(w2, 1, 2 * t, 2 * t + 2)}, {"2.bias", b2}},
                {.tensors = {{"0.momentum_buffer", cut(m1, 0, 2 * t, 2 * t + 2)}},
                 .scalars = {{"name", "sgd"}, {"num_params", 3}}},
                specs, 20);
    write_shard(dir, "t" + std::to_string(t) + "-p1", {{"3.weight", w3}}, {}, {}, 20);
  }
  write_shard(dir, "t0-p1", {{"3.weight", w3}}, {}, {}, 30);  // a newer step not every shard finished
  ASSERT_EQ(shard_folders(dir).size(), 4u);
  ASSERT_EQ(latest_common_shard_step(dir), std::optional<int64_t>(20));

  const Checkpoint c = merge_shard_checkpoints(dir, 20, {"1.weight", "2.weight", "2.bias", "3.weight"});
  std::map<std::string, Tensor> got(c.model.begin(), c.model.end());
  ASSERT_EQ(got.size(), 4u);
  expect_equal(got.at("1.weight"), w1, "column-parallel weight");
  expect_equal(got.at("2.weight"), w2, "row-parallel weight");
  expect_equal(got.at("2.bias"), b2, "replicated bias");
  expect_equal(got.at("3.weight"), w3, "second stage");
  ASSERT_EQ(c.optimizer.tensors.size(), 1u);
  EXPECT_EQ(c.optimizer.tensors[0].first, "0.momentum_buffer");
  expect_equal(c.optimizer.tensors[0].second, m1, "momentum");
  EXPECT_EQ(c.step, 20);
  EXPECT_EQ(c.optimizer.scalars.at("num_params"), 4);
  EXPECT_EQ(c.extra.at("run_id"), "run-a");
  // Without a model at hand, the shards' own lists give the same order.
  EXPECT_EQ(shard_param_order(dir, 20), (std::vector<std::string>{"1.weight", "2.weight", "2.bias", "3.weight"}));
}

// A step only the first stage of a two-stage run wrote (the second was killed
// first) is no whole checkpoint, though shard-t0-p0 alone looks like a grid
// of one: the writer's degrees in its sidecar say so.
TEST(CheckpointShards, TheFirstStageAloneIsNotAWholeCheckpoint) {
  test::TempDir tmp;
  const std::string dir = tmp.path();
  for (int step : {100, 200}) {
    for (int p = 0; p < 2; ++p) {
      Checkpoint c;
      c.step = step;
      c.model = {{p == 0 ? "1.weight" : "3.weight", iota({2}, 0)}};
      c.extra = {{"shard", {{"name", "t0-p" + std::to_string(p)}, {"tensor", 1}, {"pipeline", 2},
                            {"params", {c.model[0].first}}}},
                 {"run_id", "run-a"}};
      if (step == 100 || p == 0) save_checkpoint(dir + "/shard-t0-p" + std::to_string(p), c);
    }
  }
  EXPECT_EQ(latest_common_shard_step(dir), std::optional<int64_t>(100));
}

// The message must name the file and both runs, for the operator to find
// which run wrote into the folder.
void expect_io_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(CheckpointShards, ShardsOfTwoRunsAreRefusedNamingTheFile) {
  test::TempDir tmp;
  const std::string dir = tmp.path();
  write_shard(dir, "t0-p0", {{"a", iota({2}, 0)}}, {}, {}, 7, "run-a");
  write_shard(dir, "t0-p1", {{"b", iota({2}, 0)}}, {}, {}, 7, "run-b");
  const std::string file = checkpoint_stem(dir + "/shard-t0-p1", 7) + ".json";
  expect_io_error([&] { latest_common_shard_step(dir); }, {file, "\"run-a\"", "\"run-b\""});
  expect_io_error([&] { merge_shard_checkpoints(dir, 7, {"a", "b"}); }, {file, "\"run-a\"", "\"run-b\""});
  // A shard without a run id is another run's too (one trainer writes it on every rank).
  write_shard(dir, "t0-p1", {{"b", iota({2}, 0)}}, {}, {}, 7, "");
  expect_io_error([&] { merge_shard_checkpoints(dir, 7, {"a", "b"}); }, {file, "no run id"});
}

TEST(CheckpointShards, ATruncatedShardIsRefusedNamingTheFile) {
  test::TempDir tmp;
  const std::string dir = tmp.path();
  for (int p = 0; p < 2; ++p) {
    write_shard(dir, "t0-p" + std::to_string(p), {{"w" + std::to_string(p), iota({64}, 0)}}, {}, {}, 3);
  }
  const std::string file = checkpoint_stem(dir + "/shard-t0-p1", 3) + ".safetensors";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);  // cut in the middle
  EXPECT_EQ(latest_common_shard_step(dir), std::optional<int64_t>(3));        // sidecars only: not its job
  expect_io_error([&] { merge_shard_checkpoints(dir, 3, {"w0", "w1"}); }, {file, "truncated"});
}

TEST(CheckpointShards, FoldersSortByTensorRankThenStageAsNumbers) {
  test::TempDir tmp;
  for (const char* s : {"shard-t0-p10", "shard-t1-p0", "shard-t0-p2", "shard-t0-p0"}) {
    std::filesystem::create_directories(tmp.path() / s);
  }
  EXPECT_EQ(shard_folders(tmp.path()),
            (std::vector<std::string>{"shard-t0-p0", "shard-t0-p2", "shard-t0-p10", "shard-t1-p0"}));
}

TEST(CheckpointShards, SlicesThatDoNotTileAreRefused) {
  test::TempDir tmp;
  const std::string dir = tmp.path();
  for (int t = 0; t < 2; ++t) {
    // Both shards claim offset 0: rows 2..3 are never written.
    write_shard(dir, "t" + std::to_string(t) + "-p0", {{"w", iota({2, 3}, 0)}}, {},
                {{"w", {.dim = 0, .full_shape = {4, 3}, .offset = 0}}}, 5);
  }
  try {
    merge_shard_checkpoints(dir, 5, {"w"});
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
}

TEST(CheckpointShards, AnUnshardedFolderHasNoShards) {
  test::TempDir tmp;
  EXPECT_TRUE(shard_folders(tmp.path()).empty());
  EXPECT_EQ(latest_common_shard_step(tmp.path()), std::nullopt);
}

}  // namespace
}  // namespace braid::train
