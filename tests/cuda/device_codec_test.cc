// Gradient codecs on device buffers (braid/comm/codec/device.h, the kernels of
// braid/cuda/codec_kernels.cu) against the host codecs: the same message bytes,
// the same decoded values and the same error-feedback memory, bit for bit,
// over several steps; and the same average over two ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "braid/base/rng.h"
#include "braid/comm/codec/codec.h"
#include "braid/comm/codec/device.h"
#include "tests/cuda/device_test.h"
#include "tests/cuda/staged_collectives.h"
#include "tests/parallel/inproc_ranks.h"

namespace braid {
namespace {

namespace cc = comm::codec;

cc::CodecOptions options(const std::string& name) {
  cc::CodecOptions o;
  o.name = name;
  o.topk_ratio = 0.05;
  o.onebit_chunk = 64;
  o.qsgd_levels = 15;
  o.qsgd_chunk = 128;
  o.seed = 7;
  return o;
}

// Normal values; with `ties`, rounded to quarters so that many magnitudes
// equal top-k's threshold, and a fifth of them zero.
std::vector<float> gradient(uint64_t seed, size_t n, bool ties) {
  Generator g(seed, 3);
  std::vector<float> v(n);
  for (float& x : v) {
    x = static_cast<float>(g.normal());
    if (ties) x = g.uniform() < 0.2f ? 0.0f : std::round(x * 4) / 4;
  }
  return v;
}

// Device memory handed around as raw pointers, read back as host vectors.
template <class T>
std::vector<T> to_host(const void* p, size_t n) {
  std::vector<T> out(n);
  if (n) cc::device_codec_kernels(testing::kGpu).copy(out.data(), Device::cpu, p, testing::kGpu, n * sizeof(T));
  return out;
}

std::shared_ptr<std::byte> to_device(const void* p, size_t bytes) {
  cc::DeviceCodecKernels& k = cc::device_codec_kernels(testing::kGpu);
  std::shared_ptr<std::byte> d = k.allocate(testing::kGpu, std::max<size_t>(bytes, 1));
  if (bytes) k.copy(d.get(), testing::kGpu, p, Device::cpu, bytes);
  return d;
}

struct Case {
  std::string codec;
  size_t n;
  bool ties;
};

class DeviceCodec : public ::testing::TestWithParam<Case> {};

// Three steps of one bucket: each step's message, its decoding into a
// non-zero output and the memory after it equal the host codec's.
TEST_P(DeviceCodec, MessagesDecodingAndMemoryMatchTheHostCodec) {
  BRAID_REQUIRE_GPU();
  const auto [name, n, ties] = GetParam();
  for (bool feedback : {true, false}) {
    cc::CodecOptions o = options(name);
    o.error_feedback = feedback;
    auto codec = cc::make_codec(o);
    cc::DeviceCodecKernels& k = cc::device_codec_kernels(testing::kGpu);
    const size_t bytes = codec->device_message_bytes(n);
    ASSERT_GT(codec->device_message_bytes(1), 0u);
    cc::BucketState host, dev;
    host.stream = dev.stream = 5;
    for (int step = 0; step < 3; ++step) {
      SCOPED_TRACE(fmt::format("{} n={} ties={} feedback={} step {}", name, n, ties, feedback, step));
      const std::vector<float> g = gradient(100 + static_cast<uint64_t>(step), n, ties);
      std::vector<std::byte> want;
      codec->encode(g, cc::flat_layout(n), host, want);
      const std::shared_ptr<std::byte> grad = to_device(g.data(), n * sizeof(float));
      const std::shared_ptr<std::byte> msg = k.allocate(testing::kGpu, std::max<size_t>(bytes, 1));
      codec->encode_on_device(k, testing::kGpu, reinterpret_cast<const float*>(grad.get()), n, dev, msg.get());
      const std::vector<std::byte> got = to_host<std::byte>(msg.get(), bytes);
      ASSERT_GE(got.size(), want.size());
      EXPECT_EQ(std::vector<std::byte>(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(want.size())), want);
      EXPECT_TRUE(std::all_of(got.begin() + static_cast<std::ptrdiff_t>(want.size()), got.end(),
                              [](std::byte b) { return b == std::byte{0}; }))
          << "top-k's padding is zeros";
      // Decoding adds to what is there.
      std::vector<float> out = gradient(900, n, false);
      const std::shared_ptr<std::byte> dout = to_device(out.data(), n * sizeof(float));
      codec->decode_add(want, cc::flat_layout(n), out);
      codec->decode_add_on_device(k, testing::kGpu, msg.get(), n, reinterpret_cast<float*>(dout.get()));
      const std::vector<float> dec = to_host<float>(dout.get(), n);
      EXPECT_EQ(std::memcmp(dec.data(), out.data(), n * sizeof(float)), 0);
      if (feedback && host.tensors.count("memory")) {
        ASSERT_TRUE(dev.on_device.count("memory"));
        const std::vector<float> mem = to_host<float>(dev.on_device.at("memory").get(), n);
        EXPECT_EQ(std::memcmp(mem.data(), host.tensors.at("memory").data(), n * sizeof(float)), 0);
      }
      host.steps++, dev.steps++;
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* c : {"fp16", "bf16", "qsgd", "onebit", "topk"}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{1000}, size_t{4099}}) {
      out.push_back({c, n, false});
    }
    out.push_back({c, 5000, true});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, DeviceCodec, ::testing::ValuesIn(cases()), [](const auto& info) {
  return fmt::format("{}_{}{}", info.param.codec, info.param.n, info.param.ties ? "_ties" : "");
});

TEST(DeviceCodecRefusal, PowerSgdNamesItself) {
  BRAID_REQUIRE_GPU();
  auto codec = cc::make_codec(options("powersgd"));
  EXPECT_EQ(codec->device_message_bytes(1), 0u);
  parallel::testing::on_ranks(1, [&](int, comm::Communicator comm) {
    const std::vector<float> g = gradient(1, 64, false);
    const std::shared_ptr<std::byte> d = to_device(g.data(), g.size() * sizeof(float));
    cc::BucketState state;
    cc::CodecStats stats;
    try {
      codec->average_on_device(comm, comm::BufferRef(d.get(), g.size(), DType::f32, testing::kGpu),
                               cc::flat_layout(g.size()), state, {}, stats);
      ADD_FAILURE() << "powersgd averaged a device bucket";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("codec powersgd has no device kernels"), std::string::npos) << e.what();
    }
  });
}

#ifdef BRAID_CUDA_EMULATE

// Two ranks, four steps (the first plain: warm-up): the device average equals
// the host average bit for bit on both ranks, error memory included.
TEST(DeviceCodecAverage, TwoRanksMatchTheHostAverage) {
  testing::InstallStaged staged;
  for (const char* name : {"fp16", "bf16", "qsgd", "onebit", "topk"}) {
    SCOPED_TRACE(name);
    cc::CodecOptions o = options(name);
    o.warmup_steps = 1;
    parallel::testing::on_ranks(2, [&](int rank, comm::Communicator comm) {
      auto codec = cc::make_codec(o);
      cc::BucketState host, dev;
      host.stream = dev.stream = static_cast<uint64_t>(rank) << 32;
      const size_t n = 3001;
      for (int step = 0; step < 4; ++step) {
        std::vector<float> g = gradient(10 * static_cast<uint64_t>(step) + static_cast<uint64_t>(rank), n, step == 3);
        const std::shared_ptr<std::byte> d = to_device(g.data(), n * sizeof(float));
        cc::CodecStats hs, ds;
        codec->average(comm, std::span<float>(g), cc::flat_layout(n), host, {}, hs);
        codec->average_on_device(comm, comm::BufferRef(d.get(), n, DType::f32, testing::kGpu), cc::flat_layout(n), dev,
                                 {}, ds);
        const std::vector<float> got = to_host<float>(d.get(), n);
        EXPECT_EQ(std::memcmp(got.data(), g.data(), n * sizeof(float)), 0) << "rank " << rank << " step " << step;
        EXPECT_EQ(hs.raw_bytes, ds.raw_bytes);
        if (host.tensors.count("memory")) {
          const std::vector<float> mem = to_host<float>(dev.on_device.at("memory").get(), n);
          EXPECT_EQ(std::memcmp(mem.data(), host.tensors.at("memory").data(), n * sizeof(float)), 0);
        }
      }
    });
  }
  if (staged.installed()) {
    EXPECT_EQ(staged.calls(), 5 * 2 * 4);  // each codec, rank and step: one collective on device buffers
  }
}

#endif  // BRAID_CUDA_EMULATE

}  // namespace
}  // namespace braid
