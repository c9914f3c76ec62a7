// Asynchronous sharded checkpoints through the trainer: the files equal a
// synchronous save's byte for byte and hold what a whole checkpoint holds;
// a save cut short (no manifest) or a damaged shard is passed over for the
// previous complete checkpoint; train.keep_checkpoints keeps the newest K
// and never the save in flight; world rank 0 waits for a missing rank's
// shard only until its deadline, naming the rank.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"
#include "braid/data/loader.h"
#include "braid/data/sampler.h"
#include "braid/nn/activation.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/sequential.h"
#include "braid/optim/adam.h"
#include "braid/parallel/plan_factory.h"
#include "braid/tensor/cpu/autotune.h"
#include "braid/train/checkpoint.h"
#include "braid/train/checkpoint_async.h"
#include "braid/train/checkpoint_info.h"
#include "braid/train/checkpoint_manifest.h"
#include "braid/train/checkpoint_sharded.h"
#include "braid/train/trainer.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/testing/temp_dir.h"
#include "tests/train/blobs.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

class Messages final : public Callback {
 public:
  void on_message(const std::string& t) override { text += t + "\n"; }
  void on_checkpoint(const std::string& stem, int64_t) override { stems.push_back(stem); }
  std::string text;
  std::vector<std::string> stems;
};

struct SavingRun {
  std::unique_ptr<Trainer> trainer;
  std::shared_ptr<Messages> messages = std::make_shared<Messages>();
};

// 300 blobs, batch 32 (10 steps an epoch), Adam (buffers besides the weights).
// `model_out`: receives the model (to build a plan around it).
SavingRun make_run(const std::string& out_dir, TrainerOptions o, std::shared_ptr<nn::Module>* model_out = nullptr) {
  Generator gen(11);
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 8, gen), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3, gen)});
  if (model_out) *model_out = model;
  auto train = std::make_shared<data::Loader>(std::make_shared<testing::Blobs>(300, 1),
                                              std::make_shared<data::ShuffledSampler>(300, 5),
                                              data::LoaderOptions{.batch_size = 32, .workers = 0});
  auto opt = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 0.01});
  o.out_dir = out_dir;
  o.eval_every = 0;
  SavingRun r;
  r.trainer = std::make_unique<Trainer>(model, std::move(opt), nullptr, nn::cross_entropy_loss, train, nullptr, o);
  r.trainer->add_callback(r.messages);
  return r;
}

TrainerOptions sharded(bool async, int64_t max_steps, int64_t every, int keep = 10) {
  return {.epochs = 3, .max_steps = max_steps, .checkpoint_every = every, .keep_checkpoints = keep,
          .sharded_checkpoints = true, .checkpoint_async = async};
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string data_file(const std::string& dir, int64_t step) {
  return (fs::path(checkpoint_stem(dir, step)) / rank_data_file(0)).string();
}

// The same tensors by name (whole checkpoints list them sorted), bit for bit.
void expect_same(const nn::NamedTensors& a, const nn::NamedTensors& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  const std::map<std::string, Tensor> by_name(b.begin(), b.end());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(by_name.count(name)) << what << " " << name;
    const Tensor& u = by_name.at(name);
    ASSERT_EQ(t.nbytes(), u.nbytes()) << what << " " << name;
    EXPECT_EQ(std::memcmp(t.raw_data(), u.raw_data(), t.nbytes()), 0) << what << " " << name;
  }
}

TEST(AsyncCheckpoint, EqualsASynchronousSaveAndAWholeCheckpoint) {
  // The three runs train alike to the bit: one thread, no kernel autotuning.
  set_num_threads(1);
  cpu::set_deterministic_kernels(true);
  test::TempDir a, s, w;
  SavingRun async_run = make_run(a.str(), sharded(true, 12, 5));
  async_run.trainer->fit();
  SavingRun sync_run = make_run(s.str(), sharded(false, 12, 5));
  sync_run.trainer->fit();
  SavingRun whole_run = make_run(w.str(), {.epochs = 3, .max_steps = 12, .checkpoint_every = 5, .keep_checkpoints = 10});
  whole_run.trainer->fit();
  EXPECT_EQ(sharded_steps(a.str()), (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(async_run.messages->stems, (std::vector<std::string>{checkpoint_stem(a.str(), 5), checkpoint_stem(a.str(), 10)}));
  EXPECT_NE(async_run.messages->text.find("written in"), std::string::npos) << async_run.messages->text;
  for (int64_t step : {5, 10}) {
    EXPECT_EQ(bytes_of(data_file(a.str(), step)), bytes_of(data_file(s.str(), step))) << "step " << step;
    const Checkpoint got = load_sharded_whole(a.str(), step), want = load_checkpoint(checkpoint_stem(w.str(), step));
    expect_same(got.model, want.model, "model");
    expect_same(got.optimizer.tensors, want.optimizer.tensors, "optimizer");
    EXPECT_EQ(got.epoch, want.epoch);
    EXPECT_EQ(got.batch, want.batch);
    EXPECT_EQ(got.rng.offset, want.rng.offset);
  }
  cpu::set_deterministic_kernels(false);
}

TEST(AsyncCheckpoint, ResumeTakesTheNewestCompleteCheckpoint) {
  test::TempDir dir;
  make_run(dir.str(), sharded(true, 12, 5)).trainer->fit();
  // A save of step 15 cut short: the shard is there, the manifest is not.
  fs::create_directories(checkpoint_stem(dir.str(), 15));
  fs::copy_file(data_file(dir.str(), 10), data_file(dir.str(), 15));
  // Step 10's shard damaged after its manifest was written.
  {
    std::fstream f(data_file(dir.str(), 10), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x5a');
  }
  SavingRun again = make_run(dir.str(), sharded(true, 14, 5));
  again.trainer->fit();
  const std::string& text = again.messages->text;
  EXPECT_NE(text.find("resumed from " + checkpoint_stem(dir.str(), 5) + " (step 5"), std::string::npos) << text;
  EXPECT_NE(text.find(data_file(dir.str(), 10) + " is damaged"), std::string::npos) << text;
  EXPECT_NE(text.find("its manifest records"), std::string::npos) << text;
  EXPECT_EQ(again.trainer->step(), 14);
  // Its own save of step 10 replaced the damaged one and committed again.
  EXPECT_NO_THROW(load_sharded_whole(dir.str(), 10));
}

TEST(AsyncCheckpoint, KeepsTheNewestKAndNeverASaveInFlight) {
  test::TempDir dir;
  // An earlier attempt's save of step 3 cut short (older than the newest
  // complete one: removed), and one of step 99 (newer: maybe in flight, kept).
  fs::create_directories(checkpoint_stem(dir.str(), 3));
  fs::create_directories(checkpoint_stem(dir.str(), 99));
  make_run(dir.str(), sharded(true, 10, 2, /*keep=*/2)).trainer->fit();
  EXPECT_EQ(sharded_steps(dir.str()), (std::vector<int64_t>{8, 10}));
  EXPECT_EQ(sharded_folders(dir.str()), (std::vector<int64_t>{8, 10, 99}));
  EXPECT_THROW(prune_sharded(dir.str(), 0), ValueError);
}

TEST(AsyncCheckpoint, RankZeroWaitsForAMissingShardOnlyUntilItsDeadline) {
  test::TempDir dir;
  ShardWriter writer({.dir = dir.str(), .world = 3, .async = true, .keep = 2,
                      .timeout = std::chrono::milliseconds(200)});
  ShardSave s;
  s.tensors = {{.name = "model/w", .data = Tensor::ones({4}), .slice_shape = {4}}};
  s.index = {.rank = 0, .session = "now", .step = 4};
  s.manifest = {.step = 4};
  // Rank 2 committed a shard of step 4 in an earlier attempt: not this save's.
  RankIndex stale{.rank = 2, .session = "before", .step = 4};
  fs::create_directories(checkpoint_stem(dir.str(), 4));
  std::ofstream(fs::path(checkpoint_stem(dir.str(), 4)) / rank_index_file(2)) << to_json(stale).dump();
  writer.save(std::move(s));
  const std::vector<SaveOutcome> done = writer.finished(true);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_NE(done[0].error.find("checkpoint step 4: world rank 0 waited"), std::string::npos) << done[0].error;
  EXPECT_NE(done[0].error.find("2 of 3 ranks"), std::string::npos) << done[0].error;
  EXPECT_NE(done[0].error.find("rank 1"), std::string::npos) << done[0].error;
  EXPECT_TRUE(sharded_steps(dir.str()).empty());
  EXPECT_THROW(read_manifest(dir.str(), 4), IoError);
}

TEST(AsyncCheckpoint, AnAlteredManifestIsRefused) {
  test::TempDir dir;
  make_run(dir.str(), sharded(false, 5, 5)).trainer->fit();
  const fs::path path = fs::path(checkpoint_stem(dir.str(), 5)) / "manifest.json";
  std::string text = bytes_of(path.string());
  const size_t at = text.find("\"epoch\":0");
  ASSERT_NE(at, std::string::npos) << text.substr(0, 200);
  text.replace(at, 9, "\"epoch\":1");
  std::ofstream(path) << text;
  try {
    read_manifest(dir.str(), 5);
    FAIL() << "an altered manifest was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("does not match its own crc32"), std::string::npos) << e.what();
  }
}

// A save that cannot be written (here its folder's name is taken by a file,
// as a full disk fails a write) is reported naming the step and the last
// complete checkpoint; training goes on, and later saves complete.
TEST(AsyncCheckpoint, AFailedSaveIsReportedAndTrainingGoesOn) {
  test::TempDir dir;
  std::ofstream(checkpoint_stem(dir.str(), 10)) << "in the way";
  SavingRun run = make_run(dir.str(), sharded(true, 15, 5));
  const TrainSummary s = run.trainer->fit();
  EXPECT_EQ(s.steps, 15);
  const std::string& text = run.messages->text;
  EXPECT_NE(text.find("checkpoint of step 10 failed, training goes on (the last complete one is " +
                      checkpoint_stem(dir.str(), 5) + "): cannot create checkpoint folder"), std::string::npos)
      << text;
  EXPECT_EQ(sharded_steps(dir.str()), (std::vector<int64_t>{5, 15}));
  EXPECT_EQ(s.last_checkpoint, checkpoint_stem(dir.str(), 15));
}

// Replicas that train apart (local SGD) hold different models: the sharded
// format is refused before the first step, naming the plan.
TEST(AsyncCheckpoint, APlanWhoseReplicasTrainApartIsRefused) {
  test::TempDir dir;
  parallel::testing::on_ranks(1, [&](int, comm::Communicator comm) {
    std::shared_ptr<nn::Module> model;
    SavingRun run = make_run(dir.str(), sharded(true, 4, 2), &model);
    parallel::PlannedModel pm = parallel::make_plan({.strategy = "local_sgd"}, comm, nullptr, model, nn::cross_entropy_loss);
    run.trainer->set_plan(std::shared_ptr<parallel::Plan>(std::move(pm.plan)));
    try {
      run.trainer->fit();
      FAIL() << "local SGD was given sharded checkpoints";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("aggregation local_sgd) trains them apart"), std::string::npos) << e.what();
    }
  });
  EXPECT_TRUE(sharded_folders(dir.str()).empty());
}

// A manifest (with a valid CRC) that claims a slice far larger than its
// pieces is refused before anything of that size is allocated.
TEST(AsyncCheckpoint, AManifestCannotMakeAReaderAllocateWhatWasNotWritten) {
  test::TempDir dir;
  make_run(dir.str(), sharded(false, 5, 5)).trainer->fit();
  Manifest m = read_manifest(dir.str(), 5);
  m.ranks[0].pieces[0].slice_shape = {int64_t{1} << 39};
  write_manifest(dir.str(), m);
  try {
    load_sharded_whole(dir.str(), 5);
    FAIL() << "a 2 TiB slice was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("of the 549755813888 elements"), std::string::npos) << e.what();
  }
}

TEST(AsyncCheckpoint, InspectDescribesASavedStepAndItsDamage) {
  test::TempDir dir;
  make_run(dir.str(), sharded(false, 5, 5)).trainer->fit();
  CheckpointInfo info = describe_checkpoints(dir.str());
  EXPECT_EQ(info.rank_steps, std::vector<int64_t>{5});
  ASSERT_EQ(info.steps.size(), 1u);
  const StepSummary& s = info.steps[0];
  EXPECT_EQ(s.problem, "");
  EXPECT_TRUE(s.sharded);
  EXPECT_EQ(s.model_elements, 4 * 8 + 8 + 8 * 3 + 3);
  EXPECT_EQ(s.optimizer, "adam");
  ASSERT_EQ(s.shards.size(), 1u);
  EXPECT_EQ(s.shards[0].name, "rank-00000");
  EXPECT_EQ(s.shards[0].model_bytes, 4 * 67);
  EXPECT_EQ(s.shards[0].optimizer_bytes, 2 * 4 * 67);  // Adam's two moments
  {
    std::fstream f(data_file(dir.str(), 5), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x11');
  }
  info = describe_checkpoints(dir.str(), 5);
  ASSERT_EQ(info.steps.size(), 1u);
  EXPECT_NE(info.steps[0].problem.find("is damaged"), std::string::npos) << info.steps[0].problem;
}

}  // namespace
}  // namespace braid::train
