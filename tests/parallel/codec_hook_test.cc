// The codec hook on the bucketed all-reduce, world sizes 1-5 over the
// in-process transport: after finish() every rank holds the same gradients
// (close to the true average for fp16, exactly what the codec computes for
// the others), buckets of several parameters keep their shapes (PowerSGD
// compresses matrices), and the per-bucket state survives state_dict() /
// load_rank_state() as a checkpoint carries it.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/base/rng.h"
#include "braid/parallel/codec_hook.h"
#include "tests/parallel/inproc_ranks.h"

namespace braid::parallel {
namespace {

using testing::on_ranks;

std::vector<NamedParameter> params() {
  return {{"w1", Tensor::zeros({24, 16}, DType::f32)}, {"b1", Tensor::zeros({24}, DType::f32)},
          {"w2", Tensor::zeros({10, 24}, DType::f32)}};
}

Tensor gradient(const Tensor& p, int rank, int step, size_t k) {
  Tensor g = Tensor::empty(p.shape(), DType::f32);
  Generator gen(static_cast<uint64_t>(100 * step + k), static_cast<uint64_t>(rank));
  for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = static_cast<float>(gen.normal());
  return g;
}

struct Case {
  std::string codec;
  int world;
};
class Hook : public ::testing::TestWithParam<Case> {};

TEST_P(Hook, EveryRankHoldsTheSameAverage) {
  const auto [codec, p] = GetParam();
  std::vector<std::vector<std::vector<float>>> got(p);  // [rank][param] after the last step
  on_ranks(p, [&](int r, comm::Communicator comm) {
    auto ps = params();
    comm::codec::CodecOptions o{.name = codec, .topk_ratio = 0.2, .powersgd_rank = 2};
    auto hook = std::make_unique<CodecHook>(comm, o, std::chrono::seconds(20));
    CodecHook* h = hook.get();
    // 1000-byte buckets, in reverse order: [w2, b1] and [w1].
    BucketedAllreduce sync(comm, {.bucket_bytes = 1000, .timeout = std::chrono::seconds(20)}, std::move(hook));
    sync.setup(ps, {}, nlohmann::json::object());
    EXPECT_EQ(sync.bucket_count(), 2u);
    for (int step = 0; step < 3; ++step) {
      for (size_t k = ps.size(); k-- > 0;) {
        Tensor g = gradient(ps[k].tensor, r, step, k);
        sync.on_grad_ready(k, g);
      }
      sync.finish();
    }
    const nlohmann::json stats = sync.take_stats();
    EXPECT_EQ(stats.at("calls").get<int64_t>(), 6);
    EXPECT_LT(stats.at("wire_bytes").get<uint64_t>(), stats.at("raw_bytes").get<uint64_t>());
    for (const auto& np : ps) {
      const Tensor g = np.tensor.grad();
      got[r].emplace_back(g.data<float>(), g.data<float>() + g.numel());
    }
    // What the rank remembers, through a checkpoint's round trip.
    const nn::NamedTensors state = sync.rank_state();
    if (r == 0 && codec != "fp16") {
      EXPECT_FALSE(state.empty());
      for (const auto& [name, t] : state) EXPECT_EQ(name.rfind("r", 0), 0u) << name;
    }
    nn::NamedTensors mine = h->state_dict();
    nn::NamedTensors prefixed;
    for (auto& [name, t] : mine) prefixed.emplace_back(fmt::format("r{}.{}", r, name), t);
    sync.load_rank_state(prefixed);
    sync.finish();  // no gradients: zeros go through the codec with the reloaded state
    EXPECT_EQ(h->state_dict().size(), mine.size());
  });
  for (int r = 1; r < p; ++r) EXPECT_EQ(got[r], got[0]) << codec << " rank " << r;
  if (codec == "fp16") {
    auto ps = params();
    for (size_t k = 0; k < ps.size(); ++k) {
      std::vector<double> mean(got[0][k].size(), 0.0);
      for (int r = 0; r < p; ++r) {
        const Tensor g = gradient(ps[k].tensor, r, 2, k);
        for (size_t i = 0; i < mean.size(); ++i) mean[i] += g.data<float>()[i] / p;
      }
      for (size_t i = 0; i < mean.size(); ++i) ASSERT_NEAR(got[0][k][i], mean[i], 4e-3) << k << " " << i;
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const char* name : {"fp16", "onebit", "topk", "powersgd", "qsgd"})
    for (int p = 1; p <= 5; ++p) c.push_back({name, p});
  return c;
}
INSTANTIATE_TEST_SUITE_P(All, Hook, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.codec + "_w" + std::to_string(info.param.world); });

}  // namespace
}  // namespace braid::parallel
