// Checkpoints: exact round trip, atomic commit order, and refusal of
// truncated or altered files with the previous checkpoint still loadable.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "braid/base/rng.h"
#include "braid/nn/linear.h"
#include "braid/optim/sgd.h"
#include "braid/train/checkpoint.h"
#include "tests/testing/temp_dir.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

Checkpoint make_checkpoint(int64_t step, float fill) {
  Generator gen(1);
  nn::Linear lin(3, 2, gen);
  lin.weight().fill(fill);
  optim::SGD sgd(lin.parameters(), {.lr = 0.1, .momentum = 0.9});
  for (const Tensor& p : lin.parameters()) p.set_grad(Tensor::ones(p.shape()));
  sgd.step();
  Checkpoint c;
  c.model = lin.state_dict();
  c.optimizer = sgd.state_dict();
  c.step = step;
  c.epoch = 2;
  c.batch = 17;
  c.rng = {5, 1, 99};
  c.config = {{"train", {{"epochs", 3}}}};
  return c;
}

void flip_byte(const std::string& path, std::streamoff from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  char c;
  f.get(c);
  f.seekp(-from_end, std::ios::end);
  f.put(static_cast<char>(c ^ 0x5a));
}

TEST(Checkpoint, RoundTripsEverything) {
  TempDir dir;
  const Checkpoint c = make_checkpoint(120, 0.25f);
  save_checkpoint(dir.str(), c);
  const Checkpoint r = load_checkpoint(checkpoint_stem(dir.str(), 120));
  EXPECT_EQ(r.step, 120);
  EXPECT_EQ(r.epoch, 2);
  EXPECT_EQ(r.batch, 17);
  EXPECT_EQ(r.rng.offset, 99u);
  EXPECT_EQ(r.config, c.config);
  EXPECT_EQ(r.optimizer.scalars, c.optimizer.scalars);
  ASSERT_EQ(r.model.size(), c.model.size());
  std::map<std::string, Tensor> got(r.model.begin(), r.model.end());
  for (const auto& [n, t] : c.model) EXPECT_EQ(got.at(n).to_vector<float>(), t.to_vector<float>()) << n;
  ASSERT_EQ(r.optimizer.tensors.size(), 2u);  // momentum buffers of weight and bias
  EXPECT_TRUE(fs::exists(dir.path() / "ckpt-00000120.safetensors"));
  EXPECT_EQ(list_checkpoints(dir.str()), std::vector<int64_t>{120});
}

TEST(Checkpoint, TruncatedOrAlteredIsRefusedAndPreviousStaysLoadable) {
  TempDir dir;
  save_checkpoint(dir.str(), make_checkpoint(10, 1.0f));
  save_checkpoint(dir.str(), make_checkpoint(20, 2.0f));
  const std::string latest = checkpoint_stem(dir.str(), 20) + ".safetensors";

  // Tampered: one byte of tensor data flipped.
  flip_byte(latest, 3);
  EXPECT_THROW(load_checkpoint(checkpoint_stem(dir.str(), 20)), IoError);
  std::vector<std::string> skipped;
  std::optional<Checkpoint> c = load_latest_checkpoint(dir.str(), &skipped);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 10);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("ckpt-00000020"), std::string::npos) << skipped[0];

  // Truncated.
  save_checkpoint(dir.str(), make_checkpoint(30, 3.0f));
  const std::string third = checkpoint_stem(dir.str(), 30) + ".safetensors";
  fs::resize_file(third, fs::file_size(third) / 2);
  try {
    load_checkpoint(checkpoint_stem(dir.str(), 30));
    FAIL() << "truncated checkpoint loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt-00000030"), std::string::npos) << e.what();
  }
  EXPECT_EQ(load_latest_checkpoint(dir.str())->step, 10);

  // A sidecar that is not JSON.
  std::ofstream(checkpoint_stem(dir.str(), 10) + ".json") << "{\"step\": 1";
  EXPECT_THROW(load_checkpoint(checkpoint_stem(dir.str(), 10)), IoError);
  EXPECT_FALSE(load_latest_checkpoint(dir.str()).has_value());
}

// The sidecar holds where training resumes (step, epoch, batch, RNG offset);
// a valid-JSON edit of it used to load as written.
TEST(Checkpoint, AlteredOrRenamedSidecarIsRefused) {
  TempDir dir;
  save_checkpoint(dir.str(), make_checkpoint(10, 1.0f));
  save_checkpoint(dir.str(), make_checkpoint(20, 2.0f));
  const std::string side = checkpoint_stem(dir.str(), 20) + ".json";
  std::string text;
  {
    std::ifstream in(side);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = text.find("\"step\": 20");
  ASSERT_NE(at, std::string::npos) << text;
  std::string edited = text;
  edited.replace(at, 10, "\"step\": 21");
  std::ofstream(side) << edited;
  try {
    load_checkpoint(checkpoint_stem(dir.str(), 20));
    FAIL() << "an altered sidecar loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt-00000020.json does not match its own crc32"), std::string::npos)
        << e.what();
  }
  std::vector<std::string> skipped;
  EXPECT_EQ(load_latest_checkpoint(dir.str(), &skipped)->step, 10);
  ASSERT_EQ(skipped.size(), 1u);

  // Without its CRC (removed along with an edit): refused, saying so.
  nlohmann::json without = nlohmann::json::parse(text);
  without.erase("sidecar_crc32");
  std::ofstream(side) << without.dump(2);
  try {
    read_checkpoint_sidecar(checkpoint_stem(dir.str(), 20));
    FAIL() << "a sidecar without its crc32 was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("has no sidecar_crc32"), std::string::npos) << e.what();
  }

  // Intact, but under another step's name.
  std::ofstream(side) << text;
  EXPECT_EQ(load_checkpoint(checkpoint_stem(dir.str(), 20)).step, 20);
  for (const char* ext : {".json", ".safetensors"})
    fs::copy_file(checkpoint_stem(dir.str(), 20) + ext, checkpoint_stem(dir.str(), 30) + ext);
  try {
    load_checkpoint(checkpoint_stem(dir.str(), 30));
    FAIL() << "a renamed checkpoint loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("says step 20 but its name says 30"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, TensorsWithoutSidecarAreNotACheckpoint) {
  TempDir dir;
  save_checkpoint(dir.str(), make_checkpoint(5, 1.0f));
  save_checkpoint(dir.str(), make_checkpoint(6, 1.0f));
  fs::remove(checkpoint_stem(dir.str(), 6) + ".json");  // crash between the two writes
  EXPECT_EQ(list_checkpoints(dir.str()), std::vector<int64_t>{5});
  EXPECT_EQ(load_latest_checkpoint(dir.str())->step, 5);
}

TEST(Checkpoint, PruneKeepsNewest) {
  TempDir dir;
  for (int64_t s : {1, 2, 3, 4}) save_checkpoint(dir.str(), make_checkpoint(s, 1.0f));
  prune_checkpoints(dir.str(), 2);
  EXPECT_EQ(list_checkpoints(dir.str()), (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(fs::exists(checkpoint_stem(dir.str(), 1) + ".safetensors"));
  EXPECT_THROW(prune_checkpoints(dir.str(), 0), ValueError);
}

TEST(Checkpoint, LoadIntoModelIsShapeChecked) {
  Generator gen(3);
  nn::Linear a(3, 2, gen), b(4, 2, gen);
  EXPECT_THROW(b.load_state_dict(a.state_dict()), ValueError);
  nn::Linear c(3, 2, gen);
  c.load_state_dict(a.state_dict());
  EXPECT_EQ(c.weight().to_vector<float>(), a.weight().to_vector<float>());
}

}  // namespace
}  // namespace braid::train
