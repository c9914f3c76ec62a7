// Every key is read or refused (Config::refuse_unread): a walk over every key
// of braid_schema().
//
// Each context is one run's setup, as `braid train --dry-run` does it in a
// single process (make_training_run, world 1). For each, the keys it read
// are the keys that run uses; setting every other key (to the value it
// already has, so nothing else changes) must be refused with an error naming
// each of them. Plans that need several processes or parameter servers
// (a pipeline, ps, asynchronous EASGD and ADMM) cannot be set up here; their
// readers (plan_options, ps_options) are walked instead, and the refusal
// itself is the same code. Finally every key must be read by some context:
// a new key that no run reads fails here until a context uses it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "braid/base/error.h"
#include "braid/models/hf_checkpoint.h"
#include "braid/models/hf_checkpoint.h"
#include "braid/text/shards.h"
#include "braid/train/distill.h"
#include "braid/train/device_plans.h"
#include "braid/train/moe_run.h"
#include "braid/train/schema.h"
#include "braid/train/trainer_setup.h"
#include "tests/testing/error_message.h"
#include "tests/testing/temp_dir.h"

namespace braid::train {
namespace {

struct Context {
  std::string name;
  std::vector<std::string> sets;
  // Reads what the run reads; null: make_training_run (a whole setup, whose
  // unread keys are then checked to be refused).
  std::function<void(const Config&)> readers = nullptr;
};

class ConfigKeys : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    // Tiny files, so each setup takes milliseconds.
    std::ofstream(dir_->file("t.txt")) << std::string(4000, 'a') + "the quick brown fox jumps over the lazy dog\n";
    std::ofstream csv(dir_->file("t.csv"));
    for (int i = 0; i < 200; ++i) csv << i * 0.01 << "," << (i % 7) * 0.1 << "," << (i % 3) << "\n";  // label last
    std::ofstream svm(dir_->file("t.svm"));
    for (int i = 0; i < 200; ++i) svm << (i % 2 ? "+1" : "-1") << " 1:" << i * 0.01 << " 3:0.5\n";
    // Two token shards (data.name = tokens reads them by glob).
    text::ShardWriter w({.prefix = dir_->file("tok"), .vocab_size = 50, .ids_per_shard = 1000});
    std::vector<uint32_t> ids(1000);
    for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = (i * 7) % 50;
    w.add(ids);
    w.add(ids);
    w.finish();
    // A Hugging Face LLaMA folder of the model the gpt context builds (train.init reads it).
    const models::GptConfig hf{.vocab = 50, .context = 16, .layers = 2, .heads = 4, .kv_heads = 2, .dim = 128,
                               .norm = nn::NormKind::rms, .position = models::Position::rope,
                               .activation = nn::MlpKind::swiglu, .bias = false, .tie_embeddings = false};
    Generator gen(0);
    models::save_hf(*models::gpt(hf, gen), hf, dir_->file("hf"), models::HfArch::llama);
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string out_dir() { return dir_->file("out"); }

  // The config of a context, with every key in `extra` (keys the context does
  // not set) set explicitly to the value it has.
  static Config config(const Context& ctx, const std::vector<std::string>& extra = {}) {
    Config c = load_config("", {}, /*use_env=*/false);
    c.set("train.out_dir=" + out_dir());
    c.set("train.threads=1");
    c.set("data.workers=0");
    for (const auto& s : ctx.sets) c.set(s);
    // Each at its default (value() would count as reading it).
    for (const auto& k : extra) c.set_value(k, c.schema().find(k)->default_value, "--set");
    return c;
  }

  static test::TempDir* dir_;
};

test::TempDir* ConfigKeys::dir_ = nullptr;

std::vector<Context> contexts(const std::string& dir) {
  const std::string text = "data.path=" + dir + "/t.txt", csv = "data.path=" + dir + "/t.csv",
                    svm = "data.path=" + dir + "/t.svm";
  const Duration t = std::chrono::seconds(5);
  return {
      {"mlp, one process, sgd",
       {"model.name=mlp", "parallel.strategy=none", "optim.name=sgd", "model.norm=weight", "model.dropout=0.1",
        "data.validation=1000", "optim.schedule=step", "train.batch_schedule=epoch", "train.straggler_rank=0",
        "data.augment=true", "train.max_steps=10"}},
      {"cnn, allreduce with qsgd, adam",
       {"model.name=cnn", "parallel.strategy=allreduce", "optim.name=adam", "model.norm=ghost_batch",
        "parallel.codec=qsgd", "train.batch_schedule=noise"}},
      {"resnet, small stem, synthetic images",
       {"model.name=resnet", "model.norm=batch", "model.stem=small", "model.depth=18", "model.zero_init_residual=true",
        "parallel.strategy=none", "data.name=synthetic", "data.shape=3x32x32", "data.classes=10",
        "data.examples=200"}},
      {"csv mlp, onebit", {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=allreduce", "parallel.codec=onebit"}},
      {"csv mlp, topk", {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=auto", "parallel.codec=topk"}},
      {"csv mlp, powersgd", {"data.name=csv", csv, "model.name=mlp", "parallel.codec=powersgd"}},
      {"libsvm mlp, zero 1, synchronous sharded checkpoints",
       {"data.name=libsvm", svm, "model.name=mlp", "parallel.strategy=zero", "parallel.zero_stage=1",
        "train.checkpoint_format=sharded", "train.checkpoint_async=false", "train.keep_checkpoints=2"}},
      {"csv mlp, zero 3, sharded checkpoints",
       {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=zero", "parallel.zero_stage=3",
        "train.checkpoint_format=sharded"}},
      {"csv mlp, skeleton", {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=skeleton"}},
      {"csv mlp, bmuf", {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=bmuf"}},
      {"csv mlp, easgd", {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=easgd"}},
      {"csv mlp, admm", {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=admm"}},
      {"csv mlp, gossip torus async",
       {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=gossip", "gossip.topology=torus", "gossip.mode=async"}},
      {"csv mlp, hybrid stale", {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=hybrid", "hybrid.late=stale"}},
      {"csv mlp, ensemble distilled",
       {"data.name=csv", csv, "model.name=mlp", "parallel.strategy=ensemble", "distill.epochs=1"},
       [](const Config& c) {
         make_training_run(c);
         distill_plan(c, 1);  // what braid train reads for the student before the members train
       }},
      {"text transformer, rmsprop",
       {"data.name=text", text, "model.name=char_transformer", "parallel.strategy=none", "optim.name=rmsprop",
        "model.context=16", "data.stride=8"}},
      {"token shards transformer, the language-model recipe",
       {"data.name=tokens", "data.path=" + dir + "/tok-*.tok", "model.name=char_transformer",
        "parallel.strategy=none", "model.context=16", "data.stride=8", "optim.name=adamw", "optim.weight_decay=0.1",
        "optim.decay_filter=matrices", "optim.schedule=cosine", "optim.min_lr=0.0001", "optim.decay_steps=100",
        "train.accumulate=2", "train.eval_batches=2", "train.peak_tflops=1"}},
      {"token shards LLaMA-style gpt from a Hugging Face folder",
       {"data.name=tokens", "data.path=" + dir + "/tok-*.tok", "model.name=gpt", "parallel.strategy=none",
        "model.context=16", "model.norm=rms", "model.position=rope", "model.rope_theta=10000",
        "model.activation=swiglu", "model.bias=false", "model.kv_heads=2", "model.tie_embeddings=false",
        "train.init=" + dir + "/hf"}},
      {"token shards gpt, LLaMA layout",
       {"data.name=tokens", "data.path=" + dir + "/tok-*.tok", "model.name=gpt", "parallel.strategy=none",
        "model.context=16", "model.d_model=16", "model.n_heads=4", "model.kv_heads=2", "model.mlp_hidden=24",
        "model.norm=rms", "model.norm_eps=1e-6", "model.position=rope", "model.rope_theta=500",
        "model.activation=swiglu", "model.bias=false", "model.tie_embeddings=false", "model.vocab=64"}},
      {"token shards gpt, GPT-2 layout",
       {"data.name=tokens", "data.path=" + dir + "/tok-*.tok", "model.name=gpt", "parallel.strategy=none",
        "model.context=16", "model.d_model=16", "model.norm=layer", "model.position=learned", "model.mlp_ratio=2",
        "model.activation=gelu_tanh", "model.dropout=0.1", "parallel.recompute=selective",
        "parallel.recompute_layers=1"}},
      {"token shards gpt, mixture of experts",
       {"data.name=tokens", "data.path=" + dir + "/tok-*.tok", "model.name=gpt", "parallel.strategy=none",
        "model.context=16", "model.d_model=16", "model.n_layers=2", "model.moe.experts=4", "model.moe.top_k=2",
        "model.moe.every=2", "model.moe.capacity_factor=1.25", "model.moe.shared_experts=1",
        "model.moe.aux_loss=0.02", "model.moe.z_loss=0.002"}},
      {"token shards gpt, mixture of experts balanced by a bias",
       {"data.name=tokens", "data.path=" + dir + "/tok-*.tok", "model.name=gpt", "parallel.strategy=none",
        "model.context=16", "model.d_model=16", "model.n_layers=2", "model.moe.experts=4",
        "model.moe.balance=bias", "model.moe.bias_rate=0.002"}},
      // Several processes: the readers the setup calls.
      {"pipeline of 2 (readers)",
       {"parallel.pipeline=2", "parallel.strategy=allreduce"},
       [t](const Config& c) { plan_options(c, t); }},
      {"ps: ssp, softsync and bsp, momentum and adam servers (readers)",
       {"parallel.strategy=ps", "ps.updater=momentum", "ps.consistency=ssp"},
       [t](const Config& c) {
         plan_options(c, t);
         ps_options(c, 1, t);
         Config adam = c;
         adam.set("ps.updater=adam");
         adam.set("ps.consistency=softsync");
         ps_options(adam, 1, t);
         Config bsp = c;
         bsp.set("ps.consistency=bsp");
         ps_options(bsp, 1, t);
       }},
      {"context-parallel gpt, ulysses (readers)",
       {"model.name=gpt", "parallel.context=2", "parallel.context_mode=ulysses", "parallel.strategy=allreduce"},
       [t](const Config& c) { plan_options(c, t); }},
      {"sequence-parallel gpt, blocking collectives (readers)",
       {"model.name=gpt", "parallel.tensor=2", "parallel.sequence_parallel=true", "parallel.tp_overlap=false",
        "parallel.strategy=allreduce"},
       [t](const Config& c) { plan_options(c, t); }},
      {"expert-parallel gpt (readers)",
       {"model.name=gpt", "model.moe.experts=4", "parallel.expert=2", "parallel.strategy=allreduce"},
       [t](const Config& c) { check_expert_parallel(c, plan_options(c, t)); }},
      {"data parallel on a GPU, collectives staged through the host (readers)",
       {"train.device=cuda", "parallel.strategy=allreduce", "parallel.device_comm=staged"},
       [](const Config& c) { device_comm_option(c, Device::cuda(0)); }},
      {"asynchronous admm on servers (readers)",
       {"parallel.strategy=admm", "admm.mode=async"},
       [t](const Config& c) { plan_options(c, t); }},
  };
}

// Keys read by commands other than braid train, each covered where it is read.
const std::set<std::string> kElsewhere = {
    // braid pbt (tools/braid/pbt.cc; tests/train/pbt_launch.sh), which refuses unread keys too
    "pbt.interval", "pbt.fraction", "pbt.perturb", "pbt.exploit", "pbt.lr", "pbt.momentum", "pbt.weight_decay",
    "pbt.batch_size", "pbt.wait_s",
    // model.name = sparse_linear joins its parameter servers to read its keys (tests/ps/ps_jobs.sh)
    "data.hash_buckets"};

TEST_F(ConfigKeys, EveryKeyIsReadOrRefused) {
  const Schema schema = braid_schema();
  std::set<std::string> read_somewhere;
  for (const Context& ctx : contexts(dir_->path().string())) {
    SCOPED_TRACE(ctx.name);
    const Config c = config(ctx);
    try {
      if (ctx.readers) ctx.readers(c);
      else make_training_run(c);
    } catch (const Error& e) {
      FAIL() << "the context itself fails: " << e.what();
    }
    std::vector<std::string> unread;
    for (const auto& k : schema.keys()) {
      if (c.was_read(k.name)) read_somewhere.insert(k.name);
      else unread.push_back(k.name);
    }
    if (!ctx.readers) {
      // The context's own keys were all read, and every other key is refused.
      EXPECT_EQ(c.unread_keys(), std::vector<std::string>{});
      const Config all = config(ctx, unread);
      const std::string msg = test::message_of<ConfigError>([&] {
        make_training_run(all);
        all.refuse_unread("braid train");
      });
      for (const auto& k : unread) EXPECT_NE(msg.find(k), std::string::npos) << k << " not named in: " << msg;
    }
  }
  for (const auto& k : schema.keys()) {
    if (kElsewhere.count(k.name)) continue;
    EXPECT_TRUE(read_somewhere.count(k.name)) << k.name << " is read by no run: use it in a context above, or refuse it";
  }
}

// The message names the key, its value, where it was set and what decided the run.
TEST_F(ConfigKeys, RefusalSaysWhy) {
  Config c = config({"", {"model.name=cnn", "parallel.strategy=none", "easgd.beta=0.5"}});
  make_training_run(c);
  const std::string msg = test::message_of<ConfigError>([&] { c.refuse_unread("braid train"); });
  EXPECT_NE(msg.find("easgd.beta = 0.5 (--set) has no effect on this run (braid train, model.name = \"cnn\", "
                     "parallel.strategy = \"none\", easgd.mode = \"sync\")"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// The silent keys found by review, one by one: each is now used or refused.
TEST_F(ConfigKeys, KeysOnceSilentlyIgnored) {
  auto refused = [&](std::vector<std::string> sets, const std::string& key) {
    Config c = config({"", std::move(sets)});
    const std::string msg = test::message_of<ConfigError>([&] {
      make_training_run(c);
      c.refuse_unread("braid train");
    });
    EXPECT_NE(msg.find(key), std::string::npos) << msg;
  };
  // Batch norm has no place in an MLP.
  for (const char* norm : {"batch", "sync_batch", "ghost_batch"}) {
    refused({"model.name=mlp", "parallel.strategy=none", std::string("model.norm=") + norm}, "model.norm");
  }
  // Activation recompute is the transformer blocks'; an MLP has none.
  refused({"model.name=mlp", "parallel.strategy=allreduce", "parallel.recompute=full"}, "parallel.recompute");
  // recompute_layers counts the blocks a mode recomputes; without one it is unused.
  refused({"model.name=mlp", "parallel.strategy=none", "parallel.recompute_layers=1"}, "parallel.recompute_layers");
  // data.stride is a text dataset's.
  refused({"model.name=mlp", "parallel.strategy=none", "data.stride=3"}, "data.stride");
  // Whole checkpoints are written before the next step; only sharded ones have a writer thread.
  refused({"model.name=mlp", "parallel.strategy=none", "train.checkpoint_async=false"}, "train.checkpoint_async");
}

TEST_F(ConfigKeys, MlpHonoursWeightNormAndDropout) {
  auto layers = [&](std::vector<std::string> sets) {
    Config c = config({"", std::move(sets)});
    TrainingRun run = make_training_run(c);
    std::set<std::string> names;
    for (const auto& [name, t] : run.model->named_parameters()) names.insert(name);
    return names;
  };
  const auto plain = layers({"model.name=mlp", "parallel.strategy=none"});
  EXPECT_TRUE(plain.count("1.weight")) << "plain Linear weights";
  const auto weight_norm = layers({"model.name=mlp", "parallel.strategy=none", "model.norm=weight"});
  EXPECT_FALSE(weight_norm.count("1.weight"));
  EXPECT_TRUE(weight_norm.count("1.weight_g") && weight_norm.count("1.weight_v"));
  // Dropout layers sit between the linear layers: the last Linear moves from index 5 to 7.
  const auto dropout = layers({"model.name=mlp", "parallel.strategy=none", "model.dropout=0.2"});
  EXPECT_TRUE(plain.count("5.weight"));
  EXPECT_TRUE(dropout.count("7.weight"));
}

TEST_F(ConfigKeys, TokensHonourStrideAndGlob) {
  auto examples = [&](const std::string& path, const std::string& stride) {
    Config c = config({"", {"data.name=tokens", "data.path=" + path, "model.name=char_transformer",
                            "parallel.strategy=none", "model.context=16", "data.stride=" + stride,
                            "train.batch_size=8"}});
    return make_training_run(c).train_examples;
  };
  const std::string both = dir_->file("tok-*.tok"), one = dir_->file("tok-00000.tok");
  // (1000 - 17) / 16 + 1 = 62 windows a shard, the last 10% held out: 62 - 6 and 124 - 12.
  EXPECT_EQ(examples(one, "0"), 56);
  EXPECT_EQ(examples(both, "0"), 112);
  EXPECT_NEAR(static_cast<double>(examples(both, "4")) / static_cast<double>(examples(both, "0")), 4.0, 0.1);
}

TEST_F(ConfigKeys, TextHonoursStride) {
  auto examples = [&](const std::string& stride) {
    Config c = config({"", {"data.name=text", "data.path=" + dir_->file("t.txt"), "model.name=char_transformer",
                            "parallel.strategy=none", "model.context=16", "data.stride=" + stride}});
    return make_training_run(c).train_examples;
  };
  // Windows every 4 bytes are four times as many as side by side (stride 0 = the context).
  EXPECT_NEAR(static_cast<double>(examples("4")) / static_cast<double>(examples("0")), 4.0, 0.1);
}

}  // namespace
}  // namespace braid::train
