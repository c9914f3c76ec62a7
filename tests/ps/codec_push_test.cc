// Dense pushes through a gradient codec (PsConfig::codec): servers and workers
// as threads over the in-process transport train with bsp, and every worker's
// weights must follow a one-process reference that encodes each worker's
// gradient range by range with its own codec state, decodes it, and applies
// SGD to the mean. So the servers apply exactly the encoded-then-decoded
// gradient (error memories and QSGD's random streams included), in the right
// server ranges, and the wire carried fewer bytes than f32.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "braid/comm/codec/codec.h"
#include "braid/ps/keyspace.h"
#include "tests/ps/ps_job.h"

namespace braid::ps {
namespace {

using namespace std::chrono_literals;
using testing::run_job;

// Odd, so server ranges differ in size; > qsgd_chunk and onebit_chunk, so a
// range holds several chunks.
constexpr int64_t kDim = 1001;
constexpr int kSteps = 6;
constexpr double kLr = 0.2;

// Worker w's gradient of 0.5 |p - target_w|^2; targets of mixed sign and
// magnitude so that top-k and 1-bit have something to choose between.
std::vector<float> grad_of(const std::vector<float>& p, int w) {
  std::vector<float> g(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    g[i] = p[i] - static_cast<float>(w + 1) * std::sin(0.37f * static_cast<float>(i)) * static_cast<float>(i % 5);
  }
  return g;
}

std::vector<float> initial() {
  std::vector<float> p(kDim);
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.01f * static_cast<float>(i % 17);
  return p;
}

comm::codec::CodecOptions codec_options(const std::string& name) {
  return {.name = name, .qsgd_levels = 7, .qsgd_chunk = 128, .onebit_chunk = 64, .topk_ratio = 0.1, .seed = 5};
}

// SGD on the mean of the workers' decoded gradients: each worker encodes
// each server's range with its own state, as ps::Client does.
std::vector<float> reference(const comm::codec::CodecOptions& options, int servers, int workers) {
  const auto codec = comm::codec::make_codec(options);
  const DenseLayout layout(kDim, servers);
  std::vector<std::vector<comm::codec::BucketState>> states(static_cast<size_t>(workers),
                                                            std::vector<comm::codec::BucketState>(servers));
  for (int w = 0; w < workers; ++w) {
    for (int s = 0; s < servers; ++s) {
      // The client's stream for (worker, server range).
      states[w][s].stream = (static_cast<uint64_t>(w) << 32) | static_cast<uint64_t>(s);
    }
  }
  std::vector<float> p = initial();
  std::vector<std::byte> message;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> sum(p.size(), 0.0f);
    for (int w = 0; w < workers; ++w) {
      const auto g = grad_of(p, w);
      for (int s = 0; s < servers; ++s) {
        const auto b = static_cast<size_t>(layout.begin(s)), n = static_cast<size_t>(layout.size(s));
        const auto flat = comm::codec::flat_layout(n);
        std::vector<float> decoded(n, 0.0f);
        if (codec->plain(states[w][s], n)) {  // warming up, or a small range: raw f32
          std::copy_n(g.begin() + static_cast<std::ptrdiff_t>(b), n, decoded.begin());
        } else {
          codec->encode(std::span(g).subspan(b, n), flat, states[w][s], message);
          codec->decode_add(message, flat, decoded);
        }
        states[w][s].steps++;
        for (size_t i = 0; i < n; ++i) sum[b + i] += decoded[i];
      }
    }
    for (size_t i = 0; i < p.size(); ++i) p[i] -= static_cast<float>(kLr) * (sum[i] / static_cast<float>(workers));
  }
  return p;
}

// The job: every worker pushes its gradient and pulls, kSteps times, bsp.
struct Trained {
  std::vector<std::vector<float>> weights;   // [worker] after the last pull
  std::vector<comm::codec::CodecStats> stats;  // [worker]
  testing::JobResult job;
};

Trained train(const PsConfig& config, int servers, int workers) {
  Trained t{.weights = std::vector<std::vector<float>>(static_cast<size_t>(workers)),
            .stats = std::vector<comm::codec::CodecStats>(static_cast<size_t>(workers)), .job = {}};
  t.job = run_job(servers, workers, 10s, [&](Client& c, int w) {
    int64_t clock = c.hello(config, kDim);
    std::vector<float> p = initial();
    if (w == 0) c.init_dense(p).wait(Deadline::after(10s));
    c.pull_dense(p, -1).wait(Deadline::after(10s));
    for (int s = 0; s < kSteps; ++s) {
      c.push_dense(grad_of(p, w), clock, kLr).wait(Deadline::after(10s));
      ++clock;
      c.pull_dense(p, clock).wait(Deadline::after(10s));
    }
    t.weights[static_cast<size_t>(w)] = p;
    t.stats[static_cast<size_t>(w)] = c.take_codec_stats();
    c.done();
  });
  return t;
}

class CodecPush : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(CodecPush, ServersApplyTheEncodedThenDecodedGradient) {
  const auto& [name, servers, workers] = GetParam();
  const PsConfig config{.consistency = Consistency::bsp, .codec = codec_options(name)};
  const auto expected = reference(config.codec, servers, workers);
  const Trained t = train(config, servers, workers);
  for (int w = 0; w < workers; ++w) {
    const auto& p = t.weights[static_cast<size_t>(w)];
    ASSERT_EQ(p.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(p[i], expected[i], 1e-4 * (1 + std::fabs(expected[i]))) << "worker " << w << ", value " << i;
    }
    const auto& st = t.stats[static_cast<size_t>(w)];
    EXPECT_EQ(st.calls, kSteps * servers);
    EXPECT_EQ(st.raw_bytes, static_cast<uint64_t>(kSteps * kDim) * sizeof(float));
    EXPECT_LT(st.wire_bytes, st.raw_bytes) << name << " sent no fewer bytes than f32";
  }
  for (const auto& s : t.job.servers) EXPECT_EQ(s.gradients, kSteps * workers);
}

// codec.warmup_steps and codec.min_elements on pushes: the first two pushes
// of every range go raw, and with 3 servers the 333-value range (below 334)
// always does; the rest are encoded. Both sides agree through the header.
TEST(CodecPushPlain, WarmupAndSmallRangesGoRawF32) {
  const int servers = 3, workers = 2;
  comm::codec::CodecOptions options = codec_options("onebit");
  options.warmup_steps = 2;
  options.min_elements = 334;
  const PsConfig config{.consistency = Consistency::bsp, .codec = options};
  const auto expected = reference(config.codec, servers, workers);
  const Trained t = train(config, servers, workers);
  const DenseLayout layout(kDim, servers);
  uint64_t raw_values = 0;  // pushed as raw f32: every range while warming up, the small one always
  for (int s = 0; s < servers; ++s) raw_values += static_cast<uint64_t>(layout.size(s)) * (layout.size(s) < 334 ? kSteps : 2);
  for (int w = 0; w < workers; ++w) {
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(t.weights[w][i], expected[i], 1e-4 * (1 + std::fabs(expected[i]))) << "worker " << w << ", value " << i;
    }
    const auto& st = t.stats[static_cast<size_t>(w)];
    EXPECT_EQ(st.calls, kSteps * servers);
    EXPECT_GT(st.wire_bytes, raw_values * sizeof(float));  // the raw pushes, plus the encoded ones
    EXPECT_LT(st.wire_bytes, raw_values * sizeof(float) + (kSteps * kDim - raw_values) * sizeof(float) / 8);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, CodecPush,
    ::testing::Combine(::testing::Values("fp16", "bf16", "qsgd", "onebit", "topk"),
                       ::testing::Values(1, 3), ::testing::Values(2, 3)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_s" + std::to_string(std::get<1>(info.param)) + "_w" +
             std::to_string(std::get<2>(info.param));
    });

}  // namespace
}  // namespace braid::ps
