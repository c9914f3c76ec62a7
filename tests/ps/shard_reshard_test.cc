// Shard checkpoints of S' servers loaded into S servers: every dense value,
// updater state slot and sparse row lands where the new layout says, checked
// against one shard that went through the same updates whole.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "braid/base/error.h"
#include "braid/ps/shard_reshard.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/error_message.h"

namespace braid::ps {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kTotal = 11;  // dense values: odd, so the ranges differ in size
constexpr int kTable = 3;
constexpr int64_t kDim = 4;
constexpr uint64_t kKeys = 20;

PsConfig config_with(const std::string& updater) {
  PsConfig c;
  c.updater.name = updater;
  c.seed = 5;
  return c;
}

// Server `index` of `servers` after two dense updates (distinct weights and
// gradients everywhere) and 1-3 updates of each sparse row it owns; with
// servers = 1, the whole model that went through the same updates.
Shard trained_shard(const PsConfig& config, int index, int servers) {
  const DenseLayout layout(kTotal, servers);
  Shard s(config, layout.size(index));
  const auto global = [&](size_t i) { return static_cast<float>(layout.begin(index) + static_cast<int64_t>(i)); };
  for (size_t i = 0; i < s.weights().size(); ++i) s.weights()[i] = 0.1f * global(i) + 1;
  for (int step = 1; step <= 2; ++step) {
    std::vector<float> g(s.weights().size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = 0.3f * static_cast<float>(step) - 0.07f * global(i);
    s.apply_dense(g, 0.1);
  }
  s.define_table(kTable, kDim, 0.5);
  for (uint64_t key = 0; key < kKeys; ++key) {
    if (server_of_key(key, servers) != index) continue;
    for (uint64_t t = 0; t <= key % 3; ++t) {
      std::vector<float> g(kDim);
      for (size_t j = 0; j < g.size(); ++j)
        g[j] = 0.01f * static_cast<float>(key * 7 + j) - 0.05f * static_cast<float>(t);
      s.apply_rows(kTable, std::span(&key, 1), g, 0.2);
    }
  }
  return s;
}

// server-0..S-1-of-S in `dir`, at clock 2 (two bsp clocks applied).
void write_set(const std::string& dir, const PsConfig& config, int servers, int64_t clock = 2) {
  for (int i = 0; i < servers; ++i)
    trained_shard(config, i, servers).save(shard_checkpoint_path(dir, i, servers), clock);
}

// Reshards the set in `from` into `servers` servers, written to `to`.
void reshard_set(const std::string& from, const std::string& to, const PsConfig& config, int servers, int old) {
  for (int i = 0; i < servers; ++i) {
    std::vector<std::string> notes;
    auto r = reshard_from_checkpoints(from, i, DenseLayout(kTotal, servers), config, &notes);
    ASSERT_TRUE(r.has_value()) << "server " << i << " of " << servers;
    EXPECT_TRUE(notes.empty()) << notes.front();
    EXPECT_EQ(r->from_servers, old);
    r->shard->save(shard_checkpoint_path(to, i, servers), r->clock);
  }
}

// Every value of server `index` of `servers` in `got` equals the whole model's where the layout puts it.
void expect_part_of(const ShardFile& whole, const ShardFile& got, int index, int servers, int k) {
  const DenseLayout layout(kTotal, servers);
  const int64_t b = layout.begin(index), n = layout.size(index);
  EXPECT_EQ(got.version, whole.version);
  EXPECT_EQ(got.clock, whole.clock);
  ASSERT_EQ(got.weights.size(), static_cast<size_t>(n));
  ASSERT_EQ(got.state.size(), static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(got.weights[static_cast<size_t>(i)], whole.weights[static_cast<size_t>(b + i)]) << "dense " << b + i;
    for (int64_t s = 0; s < k; ++s)
      EXPECT_EQ(got.state[static_cast<size_t>(s * n + i)], whole.state[static_cast<size_t>(s * kTotal + b + i)])
          << "dense " << b + i << " slot " << s;
  }
  const SparseTable& w = whole.tables.at(kTable);
  const SparseTable& t = got.tables.at(kTable);
  EXPECT_EQ(t.dim, kDim);
  EXPECT_EQ(t.init_std, 0.5);
  size_t owned = 0;
  for (uint64_t key : w.keys) owned += server_of_key(key, servers) == index;
  ASSERT_EQ(t.keys.size(), owned);
  const auto d = static_cast<size_t>(kDim), kd = d * static_cast<size_t>(k);
  for (size_t r = 0; r < t.keys.size(); ++r) {
    const uint64_t key = t.keys[r];
    EXPECT_EQ(server_of_key(key, servers), index) << "key " << key;
    const auto wr = static_cast<size_t>(w.slot.at(key));
    EXPECT_EQ(t.steps[r], w.steps[wr]) << "key " << key;
    for (size_t j = 0; j < d; ++j) EXPECT_EQ(t.rows[r * d + j], w.rows[wr * d + j]) << "key " << key;
    for (size_t j = 0; j < kd; ++j) EXPECT_EQ(t.state[r * kd + j], w.state[wr * kd + j]) << "key " << key;
  }
}

class Reshard : public ::testing::TestWithParam<std::string> {};

TEST_P(Reshard, EveryValueLandsWhereTheNewLayoutSaysAndRoundTrips) {
  const PsConfig config = config_with(GetParam());
  const int k = make_updater(config.updater)->state_per_weight();
  test::TempDir whole_dir, two, three, one, two_again, three_again;
  trained_shard(config, 0, 1).save(whole_dir.file("whole.safetensors"), 2);
  const ShardFile whole = read_shard_file(whole_dir.file("whole.safetensors"));
  ASSERT_EQ(whole.tables.at(kTable).keys.size(), kKeys);
  write_set(two.str(), config, 2);
  for (const auto& [dir, servers] : {std::pair{&three, 3}, std::pair{&one, 1}}) {
    reshard_set(two.str(), dir->str(), config, servers, 2);
    for (int i = 0; i < servers; ++i)
      expect_part_of(whole, read_shard_file(shard_checkpoint_path(dir->str(), i, servers)), i, servers, k);
  }
  // 3 -> 2 -> 3 gives back the same files' contents, bit for bit.
  reshard_set(three.str(), two_again.str(), config, 2, 3);
  reshard_set(two_again.str(), three_again.str(), config, 3, 2);
  for (int i = 0; i < 3; ++i) {
    const ShardFile a = read_shard_file(shard_checkpoint_path(three.str(), i, 3));
    const ShardFile b = read_shard_file(shard_checkpoint_path(three_again.str(), i, 3));
    EXPECT_EQ(a.weights, b.weights);
    EXPECT_EQ(a.state, b.state);
    expect_part_of(whole, b, i, 3, k);
  }
}

INSTANTIATE_TEST_SUITE_P(Updaters, Reshard, ::testing::Values("adam", "momentum", "sgd"),
                         [](const auto& info) { return info.param; });

TEST(ReshardSet, TheNewestCompleteSetIsChosenAndIncompleteOnesAreReported) {
  const PsConfig config = config_with("adam");
  test::TempDir dir;
  write_set(dir.str(), config, 2, /*clock=*/2);
  write_set(dir.str(), config, 3, /*clock=*/5);
  write_set(dir.str(), config, 4, /*clock=*/9);
  fs::remove(shard_checkpoint_path(dir.str(), 2, 4));
  std::vector<std::string> notes;
  auto r = reshard_from_checkpoints(dir.str(), 0, DenseLayout(kTotal, 1), config, &notes);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->from_servers, 3);
  EXPECT_EQ(r->clock, 5);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("server-*-of-4"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("missing server-2-of-4.safetensors"), std::string::npos) << notes[0];
  // When this job's own count wrote the newest complete set, its server loads its own file as it is.
  EXPECT_FALSE(reshard_from_checkpoints(dir.str(), 0, DenseLayout(kTotal, 3), config, nullptr).has_value());
  // An older set of this job's count does not win over a newer one of another count (2 -> 3 -> 2).
  EXPECT_EQ(reshard_from_checkpoints(dir.str(), 0, DenseLayout(kTotal, 2), config, nullptr)->from_servers, 3);
}

TEST(ReshardSet, AMissingFileMeansNoLoad) {
  const PsConfig config = config_with("adam");
  test::TempDir dir;
  write_set(dir.str(), config, 2);
  fs::rename(shard_checkpoint_path(dir.str(), 1, 2), dir.file("server-01-of-2.safetensors"));  // not its name
  fs::copy_file(dir.file("server-01-of-2.safetensors"), dir.file("server-1-of-2.safetensors.tmp"));
  std::ofstream(dir.file("server-0-of-1000000000.safetensors")) << "stray";
  std::vector<std::string> notes;
  EXPECT_FALSE(reshard_from_checkpoints(dir.str(), 0, DenseLayout(kTotal, 3), config, &notes).has_value());
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[1].find("missing server-1-of-1000000000.safetensors, "), std::string::npos) << notes[1];
  EXPECT_NE(notes[1].find("server-8-of-1000000000.safetensors and 999999991 more"), std::string::npos) << notes[1];
  EXPECT_NE(notes[0].find("incomplete set server-*-of-2"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("missing server-1-of-2.safetensors"), std::string::npos) << notes[0];
  test::TempDir empty;
  EXPECT_FALSE(reshard_from_checkpoints(empty.str(), 0, DenseLayout(kTotal, 3), config, &notes).has_value());
  EXPECT_FALSE(reshard_from_checkpoints(empty.str() + "/none", 0, DenseLayout(kTotal, 3), config, &notes).has_value());
}

TEST(ReshardSet, AnotherUpdaterAnotherModelOrATruncatedFileIsRefusedNamingTheFile) {
  test::TempDir dir;
  write_set(dir.str(), config_with("adam"), 2);
  const std::string file0 = shard_checkpoint_path(dir.str(), 0, 2), file1 = shard_checkpoint_path(dir.str(), 1, 2);
  const auto reshard = [&](int64_t total, const std::string& updater) {
    reshard_from_checkpoints(dir.str(), 0, DenseLayout(total, 3), config_with(updater), nullptr);
  };
  std::string msg = test::message_of<Error>([&] { reshard(kTotal, "momentum"); });
  EXPECT_NE(msg.find(file0 + " was written by updater adam, this job uses momentum"), std::string::npos) << msg;
  EXPECT_THROW(reshard(kTotal, "sgd"), ConfigError);
  msg = test::message_of<Error>([&] { reshard(kTotal + 1, "adam"); });
  EXPECT_NE(msg.find(dir.str() + "/server-*-of-2.safetensors hold 11 dense values in all (5 + 6); this job's "
                                 "model has 12"), std::string::npos) << msg;
  EXPECT_THROW(reshard(kTotal - 1, "adam"), ConfigError);
  fs::resize_file(file1, fs::file_size(file1) - 8);
  msg = test::message_of<Error>([&] { reshard(kTotal, "adam"); });
  EXPECT_NE(msg.find(file1 + ": truncated"), std::string::npos) << msg;
  EXPECT_THROW(reshard(kTotal, "adam"), IoError);
}

}  // namespace
}  // namespace braid::ps
