#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "braid/base/error.h"
#include "braid/tensor/backend.h"
#include "braid/train/config.h"
#include "braid/train/trainer_setup.h"
#include "tests/testing/error_message.h"

namespace braid::train {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Schema, DefaultsFromTheIssue) {
  Config c(braid_schema());
  EXPECT_EQ(c.get_int("train.epochs"), 5);
  EXPECT_EQ(c.get_int("train.batch_size"), 64);
  EXPECT_EQ(c.get_string("train.out_dir"), "runs/default");
  EXPECT_EQ(c.get_string("model.name"), "cnn");
  EXPECT_DOUBLE_EQ(c.get_float("optim.lr"), 0.05);
  EXPECT_DOUBLE_EQ(c.get_float("optim.eps"), 1e-8);
  EXPECT_EQ(c.get_string("data.path"), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(c.get_string("parallel.strategy"), "auto");
  EXPECT_EQ(c.get_int("parallel.tensor"), 1);
  EXPECT_EQ(c.get_int("parallel.pipeline"), 1);
  EXPECT_EQ(c.get_int("parallel.microbatches"), 1);
  EXPECT_EQ(c.source("train.epochs"), "default");
  for (const auto& k : c.schema().keys()) EXPECT_FALSE(k.help.empty()) << k.name;
}

TEST(Schema, RejectsDuplicatesAndBadDefaults) {
  Schema s;
  s.add({.name = "a.b", .type = ValueType::Int, .default_value = int64_t{1}, .help = "x"});
  EXPECT_THROW(s.add({.name = "a.b", .type = ValueType::Int, .default_value = int64_t{1}}), ConfigError);
  EXPECT_THROW(s.add({.name = "a.c", .type = ValueType::Int, .default_value = 1.5}), ConfigError);
  EXPECT_THROW(s.add({.name = "nodot", .type = ValueType::Bool, .default_value = true}), ConfigError);
}

TEST(Schema, CloseMatches) {
  Schema s = braid_schema();
  EXPECT_EQ(s.close_matches("train.epoch").at(0), "train.epochs");
  EXPECT_EQ(s.close_matches("lr").at(0), "optim.lr");
  EXPECT_EQ(s.close_matches("train.lr").at(0), "optim.lr");
  EXPECT_EQ(s.close_matches("data.batch_size").at(0), "train.batch_size");
  EXPECT_TRUE(s.close_matches("zzzzzzzzzzzz").empty());
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(Config, TomlFileThenSetOverrides) {
  Config c(braid_schema());
  c.load_toml("model.hidden = 3\n[train]\nepochs = 2\nseed = 3\nout_dir = 'x/y'\n[optim]\nname = \"adam\"\nlr = 1\n", "a.toml");
  EXPECT_EQ(c.get_int("train.epochs"), 2);
  EXPECT_EQ(c.get_int("train.seed"), 3);
  EXPECT_EQ(c.get_int("model.hidden"), 3);
  EXPECT_EQ(c.get_string("optim.name"), "adam");
  EXPECT_DOUBLE_EQ(c.get_float("optim.lr"), 1.0);  // an integer is fine for a float key
  EXPECT_EQ(c.source("train.epochs"), "file a.toml");
  c.set("train.epochs=7");
  c.set(" optim.lr = 3e-4 ");
  c.set("data.augment=yes");
  c.set("train.out_dir=\"runs/q\"");
  EXPECT_EQ(c.get_int("train.epochs"), 7);
  EXPECT_DOUBLE_EQ(c.get_float("optim.lr"), 3e-4);
  EXPECT_TRUE(c.get_bool("data.augment"));
  EXPECT_EQ(c.get_string("train.out_dir"), "runs/q");
  EXPECT_EQ(c.source("train.epochs"), "--set");
}

TEST(Config, ErrorsNameKeyValueAndPlace) {
  Config c(braid_schema());
  std::string msg = test::message_of<ConfigError>([&] { c.set("train.epochs=abc"); });
  EXPECT_TRUE(contains(msg, "train.epochs expects a int, got 'abc'")) << msg;
  msg = test::message_of<ConfigError>([&] { c.set("train.epoch=3"); });
  EXPECT_TRUE(contains(msg, "unknown config key 'train.epoch'")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean train.epochs")) << msg;
  msg = test::message_of<ConfigError>([&] { c.set("optim.name=adamm"); });
  EXPECT_TRUE(contains(msg, "is not one of: sgd, adagrad")) << msg;
  msg = test::message_of<ConfigError>([&] { c.set("train.batch_size=0"); });
  EXPECT_TRUE(contains(msg, "outside [1, inf]")) << msg;
  EXPECT_TRUE(contains(test::message_of<ConfigError>([&] { c.set("novalue"); }), "expected key=value"));

  msg = test::message_of<ConfigError>([&] { c.load_toml("[train]\nepochs = 3\nbatch_size = \"big\"\n", "f.toml"); });
  EXPECT_TRUE(contains(msg, "f.toml:3:14: train.batch_size expects a int")) << msg;
  msg = test::message_of<ConfigError>([&] { c.load_toml("[optim]\nlearning_rate = 0.1\n", "f.toml"); });
  EXPECT_TRUE(contains(msg, "f.toml:2:17: unknown config key 'optim.learning_rate'")) << msg;
  msg = test::message_of<ConfigError>([&] { c.load_toml("[train]\nepochs = = 3\n", "bad.toml"); });
  EXPECT_TRUE(contains(msg, "bad.toml:2:")) << msg;
  EXPECT_TRUE(contains(msg, "invalid TOML")) << msg;
  msg = test::message_of<ConfigError>([&] { c.load_toml("[train]\nepochs = [1, 2]\n", "arr.toml"); });
  EXPECT_TRUE(contains(msg, "arr.toml:2:10: train.epochs expects a int, got a TOML array")) << msg;
  EXPECT_TRUE(contains(test::message_of<ConfigError>([&] { c.load_toml_file("/no/such.toml"); }), "/no/such.toml"));
}

// Found by fuzz/toml_config.cc: TOML's nan and inf passed every range check
// (comparisons with NaN are false), so optim.lr = nan trained on NaN, and an
// infinite or huge timeout overflowed its conversion to nanoseconds.
TEST(Config, NonFiniteAndHugeDurationsAreRefused) {
  Config c(braid_schema());
  std::string msg = test::message_of<ConfigError>([&] { c.load_toml("[optim]\nlr = nan\n", "f.toml"); });
  EXPECT_TRUE(contains(msg, "f.toml:2:6: optim.lr = nan is not a finite number")) << msg;
  msg = test::message_of<ConfigError>([&] { c.set("parallel.timeout_s=inf"); });
  EXPECT_TRUE(contains(msg, "parallel.timeout_s = inf is not a finite number")) << msg;
  msg = test::message_of<ConfigError>([&] { c.set("parallel.timeout_s=1e300"); });
  EXPECT_TRUE(contains(msg, "parallel.timeout_s = 1e+300 is outside [0.1, 32000000]")) << msg;
  c.load_json(nlohmann::json{{"optim", {{"lr", 0.5}}}}, "s.json");
  EXPECT_EQ(c.get_float("optim.lr"), 0.5);
}

TEST(Config, EnvironmentOverridesFileButNotSet) {
  Config c(braid_schema());
  c.load_toml("[train]\nthreads = 2\nseed = 1\n", "f.toml");
  c.apply_env([](const char* name) -> const char* {
    return std::string(name) == "BRAID_THREADS" ? "4" : nullptr;
  });
  EXPECT_EQ(c.get_int("train.threads"), 4);
  EXPECT_EQ(c.source("train.threads"), "env BRAID_THREADS");
  EXPECT_EQ(c.get_int("train.seed"), 1);
  c.set("train.threads=1");
  EXPECT_EQ(c.get_int("train.threads"), 1);
  std::string msg = test::message_of<ConfigError>([&] {
    c.apply_env([](const char* name) -> const char* { return std::string(name) == "BRAID_SEED" ? "x" : nullptr; });
  });
  EXPECT_TRUE(contains(msg, "env BRAID_SEED: train.seed expects a int, got 'x'")) << msg;
}

TEST(Config, JsonAndTomlRoundTripAndDiff) {
  Config a(braid_schema());
  a.set("optim.lr=0.125");
  a.set("train.out_dir=runs/z");
  a.set("optim.eps=1");
  nlohmann::json j = a.to_json();
  EXPECT_EQ(j["optim"]["lr"], 0.125);
  EXPECT_EQ(j["train"]["epochs"], 5);
  Config b(braid_schema());
  b.load_json(nlohmann::json::parse(j.dump()), "sidecar.json");
  EXPECT_EQ(a.to_json().dump(), b.to_json().dump());
  EXPECT_TRUE(a.differences(b).empty());
  Config t(braid_schema());
  t.load_toml(a.to_toml(), "dump.toml");
  EXPECT_TRUE(a.differences(t).empty()) << fmt::format("{}", fmt::join(a.differences(t), "; "));
  b.set("train.seed=9");
  EXPECT_EQ(a.differences(b), (std::vector<std::string>{"train.seed: 0 vs 9"}));
  j["train"]["typo"] = 1;
  EXPECT_TRUE(contains(test::message_of<ConfigError>([&] { b.load_json(j, "s.json"); }), "s.json: unknown config key 'train.typo'"));
}

TEST(Config, LoadConfigReadsAFile) {
  std::string path = (std::filesystem::temp_directory_path() / "braid_config_test.toml").string();
  std::ofstream(path) << "[model]\nname = \"mlp\"\n";
  Config c = load_config(path, {"model.hidden=32"}, false);
  std::filesystem::remove(path);
  EXPECT_EQ(c.get_string("model.name"), "mlp");
  EXPECT_EQ(c.get_int("model.hidden"), 32);
}

TEST(Config, TrainDeviceIsReadAndCheckedWithTheReason) {
  Config c(braid_schema());
  EXPECT_EQ(train_device(c), Device::cpu);  // the default
  c.set("train.device=gpu");
  std::string msg = test::message_of<ConfigError>([&] { train_device(c); });
  EXPECT_TRUE(contains(msg, "train.device = gpu")) << msg;
  EXPECT_TRUE(contains(msg, "cpu, cuda or cuda:N")) << msg;
  c.set("train.device=meta");
  EXPECT_THROW(train_device(c), ConfigError);
  // No process sees 128 GPUs: the error says why (no CUDA build, no GPU, too few).
  c.set("train.device=cuda:127");
  msg = test::message_of<ConfigError>([&] { train_device(c); });
  EXPECT_TRUE(contains(msg, "train.device = cuda:127: ")) << msg;
  c.set("train.device=cuda");
  if (!available(Device::cuda(0))) {
    EXPECT_THROW(train_device(c, /*local_rank=*/3), ConfigError);
  } else {
    const int count = backend(Device::cuda(0)).device_count();
    EXPECT_EQ(train_device(c, /*local_rank=*/3), Device::cuda(3 % count));  // ranks spread over the host's GPUs
  }
}

}  // namespace
}  // namespace braid::train
