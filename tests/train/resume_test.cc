// train.resume (auto | never | always): a run into a folder with checkpoints
// continues from them or refuses, never overwrites them silently; an explicit
// resume with nothing usable fails naming every file and why; a run with no
// step to train does not pass for a success.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "braid/data/loader.h"
#include "braid/data/sampler.h"
#include "braid/nn/activation.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/sequential.h"
#include "braid/optim/sgd.h"
#include "braid/train/checkpoint.h"
#include "braid/train/trainer.h"
#include "tests/testing/error_message.h"
#include "tests/testing/temp_dir.h"
#include "tests/train/blobs.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

class Messages final : public Callback {
 public:
  void on_message(const std::string& t) override { lines.push_back(t); }
  std::string all() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
  std::vector<std::string> lines;
};

struct TrainRun {
  std::unique_ptr<Trainer> trainer;
  std::shared_ptr<Messages> messages = std::make_shared<Messages>();
};

// 300 blobs, batch `batch`: ceil(300 / batch) steps an epoch.
TrainRun make_run(const std::string& out_dir, TrainerOptions o, int64_t batch = 32, bool drop_last = false) {
  Generator gen(11);
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 8, gen), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3, gen)});
  auto train = std::make_shared<data::Loader>(
      std::make_shared<testing::Blobs>(300, 1), std::make_shared<data::ShuffledSampler>(300, 5),
      data::LoaderOptions{.batch_size = batch, .drop_last = drop_last, .workers = 0});
  auto opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  o.out_dir = out_dir;
  o.eval_every = 0;
  TrainRun r;
  r.trainer = std::make_unique<Trainer>(model, std::move(opt), nullptr, nn::cross_entropy_loss, train, nullptr, o);
  r.trainer->add_callback(r.messages);
  return r;
}

std::string checkpoint_file(const fs::path& dir, int64_t step, const char* ext) {
  return checkpoint_stem(dir.string(), step) + ext;
}

TEST(Resume, ParsesItsThreeValuesAndRefusesTheOldBools) {
  EXPECT_EQ(parse_resume("auto"), Resume::automatic);
  EXPECT_EQ(parse_resume("never"), Resume::never);
  EXPECT_EQ(parse_resume("always"), Resume::always);
  const std::string msg = test::message_of<ConfigError>([] { parse_resume("true"); });
  EXPECT_NE(msg.find("train.resume = \"true\" is not one of auto, never, always"), std::string::npos) << msg;
  EXPECT_NE(msg.find("true is now auto, or always"), std::string::npos) << msg;
}

// The default continues where an earlier run into the folder stopped, and
// writes its checkpoints after that run's instead of over them from step 0.
TEST(Resume, AutoIsTheDefaultAndContinuesFromTheNewestCheckpoint) {
  test::TempDir dir;
  TrainRun first = make_run(dir.str(), {.epochs = 2, .max_steps = 12, .checkpoint_every = 5, .keep_checkpoints = 10});
  first.trainer->fit();
  const auto written = fs::last_write_time(checkpoint_file(dir.path(), 5, ".safetensors"));
  TrainRun again = make_run(dir.str(), {.epochs = 2, .max_steps = 20, .checkpoint_every = 5, .keep_checkpoints = 10});
  again.trainer->fit();
  EXPECT_NE(again.messages->all().find("resumed from " + checkpoint_stem(dir.str(), 10) + " (step 10"),
            std::string::npos) << again.messages->all();
  EXPECT_EQ(again.trainer->step(), 20);
  EXPECT_EQ(fs::last_write_time(checkpoint_file(dir.path(), 5, ".safetensors")), written);
  EXPECT_EQ(list_checkpoints(dir.str()), (std::vector<int64_t>{5, 10, 15, 20}));
}

TEST(Resume, NeverRefusesAFolderWithCheckpointsNamingThem) {
  test::TempDir dir;
  make_run(dir.str(), {.epochs = 1, .max_steps = 10, .checkpoint_every = 5}).trainer->fit();
  TrainRun fresh = make_run(dir.str(), {.epochs = 1, .checkpoint_every = 5, .resume = Resume::never});
  const std::string msg = test::message_of<ConfigError>([&] { fresh.trainer->fit(); });
  EXPECT_NE(msg.find("train.resume = never, but train.out_dir " + dir.str() + " holds checkpoints"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("ckpt-00000005.json, ckpt-00000010.json"), std::string::npos) << msg;
  EXPECT_EQ(fresh.trainer->step(), 0);
  // An empty folder is fine.
  test::TempDir empty;
  TrainRun ok = make_run(empty.str(), {.epochs = 1, .max_steps = 3, .resume = Resume::never});
  EXPECT_EQ(ok.trainer->fit().steps, 3);
}

// Every checkpoint damaged or half there: always fails before training,
// naming each file and why; auto starts from scratch and says so.
TEST(Resume, AlwaysWithOnlyUnusableCheckpointsFailsNamingEach) {
  test::TempDir dir;
  make_run(dir.str(), {.epochs = 2, .max_steps = 15, .checkpoint_every = 5}).trainer->fit();
  fs::resize_file(checkpoint_file(dir.path(), 15, ".safetensors"), 20);  // truncated
  fs::remove(checkpoint_file(dir.path(), 10, ".safetensors"));         // its sidecar without tensors
  std::ofstream(checkpoint_file(dir.path(), 5, ".json")) << "{\"step\": 5}";  // a sidecar without its fields
  std::ofstream(checkpoint_file(dir.path(), 20, ".safetensors")) << "cut short";  // tensors without a sidecar

  TrainRun always = make_run(dir.str(), {.epochs = 1, .checkpoint_every = 5, .resume = Resume::always});
  const std::string msg = test::message_of<IoError>([&] { always.trainer->fit(); });
  EXPECT_NE(msg.find("train.resume = always, but no checkpoint in " + dir.str() + " is usable"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("ckpt-00000015.safetensors does not match its sidecar"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ckpt-00000010.safetensors is missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ckpt-00000005.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ckpt-00000020.safetensors: no sidecar"), std::string::npos) << msg;
  EXPECT_EQ(always.trainer->step(), 0);
  EXPECT_TRUE(fs::exists(checkpoint_file(dir.path(), 15, ".json")));  // nothing overwritten

  TrainRun automatic = make_run(dir.str(), {.epochs = 1, .max_steps = 3, .checkpoints = false});
  EXPECT_EQ(automatic.trainer->fit().steps, 3);
  EXPECT_NE(automatic.messages->all().find("resume: no usable checkpoint in " + dir.str()), std::string::npos)
      << automatic.messages->all();
  EXPECT_NE(automatic.messages->all().find("starting from scratch"), std::string::npos);
}

TEST(Resume, AlwaysWithNoCheckpointFails) {
  test::TempDir dir;
  TrainRun r = make_run(dir.str(), {.epochs = 1, .resume = Resume::always});
  const std::string msg = test::message_of<IoError>([&] { r.trainer->fit(); });
  EXPECT_NE(msg.find("train.resume = always, but train.out_dir " + dir.str() + " holds no checkpoint"),
            std::string::npos) << msg;
}

// A batch larger than the data set with drop_last made 0 batches an epoch:
// 0 steps, loss nan, exit 0.
TEST(Resume, ARunWithNoStepToTrainIsRefused) {
  test::TempDir dir;
  TrainRun r = make_run(dir.str(), {.epochs = 2}, /*batch=*/400, /*drop_last=*/true);
  const std::string msg = test::message_of<ConfigError>([&] { r.trainer->fit(); });
  EXPECT_NE(msg.find("this run has no step to train: 0 batches per epoch of 300 examples"), std::string::npos) << msg;
}

// A resumed run whose schedule is already complete trains nothing, and says so.
TEST(Resume, AFinishedRunResumedSaysThereIsNothingLeft) {
  test::TempDir dir;
  make_run(dir.str(), {.epochs = 1, .max_steps = 6, .checkpoint_every = 3}).trainer->fit();
  TrainRun again = make_run(dir.str(), {.epochs = 1, .max_steps = 6, .checkpoint_every = 3});
  EXPECT_EQ(again.trainer->fit().steps, 6);
  EXPECT_NE(again.messages->all().find("resumed at step 6, where the schedule ends (6 steps): nothing left to train"),
            std::string::npos) << again.messages->all();
}

}  // namespace
}  // namespace braid::train
