// Model averaging and the codec hook with parameters and buckets on the
// (emulated) device, against the same runs on the CPU: two ranks, bit for bit.
// Emulated backend only: collectives on device buffers go through the host
// transport (staged_collectives.h), which emulated device memory allows.
#include <gtest/gtest.h>

#include <cstring>

#include "braid/base/rng.h"
#include "braid/parallel/averaging/model_averaging.h"
#include "braid/parallel/codec_hook.h"
#include "tests/cuda/device_test.h"
#include "tests/cuda/staged_collectives.h"
#include "tests/parallel/inproc_ranks.h"

namespace braid {
namespace {

#ifdef BRAID_CUDA_EMULATE

std::vector<float> noise(uint64_t seed, size_t n) {
  Generator g(seed, 11);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(g.normal());
  return v;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu).contiguous(), y = b.to(Device::cpu).contiguous();
  return x.nbytes() == y.nbytes() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

// Local SGD with a warm-up step and period 2 over five "steps" whose updates
// differ per rank: the replicas' parameters, buffers and warm-up gradients on
// the device equal the CPU run's after every step.
TEST(DeviceAveraging, LocalSgdMatchesTheCpuRun) {
  testing::InstallStaged staged;
  parallel::testing::on_ranks(2, [&](int rank, comm::Communicator comm) {
    const std::vector<Shape> shapes = {{3, 4}, {4}};
    struct Run {
      std::vector<parallel::NamedParameter> params, buffers;
      std::unique_ptr<parallel::averaging::ModelAveraging> avg;
    };
    std::vector<Run> runs;
    for (Device d : {Device::cpu, testing::kGpu}) {
      Run r;
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto n = static_cast<size_t>(numel(shapes[i]));
        Tensor p = Tensor::from_vector(noise(10 * static_cast<uint64_t>(rank) + i, n), shapes[i]).to(d);
        p.set_requires_grad();
        r.params.push_back({fmt::format("w{}", i), p});
      }
      r.buffers.push_back({"running", Tensor::from_vector(noise(50 + static_cast<uint64_t>(rank), 4), {4}).to(d)});
      r.avg = std::make_unique<parallel::averaging::ModelAveraging>(
          comm.split(0, comm.rank()), parallel::averaging::ModelAveragingOptions{.period = 2, .warmup = 1});
      r.avg->setup(r.params, r.buffers, {{"model", "test"}});
      runs.push_back(std::move(r));
    }
    for (int step = 0; step < 5; ++step) {
      for (Run& r : runs) {
        auto seed = [&](size_t i) { return 100 * static_cast<uint64_t>(step) + 10 * static_cast<uint64_t>(rank) + i; };
        for (size_t i = 0; i < r.params.size(); ++i) {
          const Tensor& p = r.params[i].tensor;
          p.set_grad(Tensor::from_vector(noise(seed(i), static_cast<size_t>(p.numel())), p.shape()).to(p.device()));
        }
        r.avg->combine_gradients();  // the warm-up step's average
        for (size_t i = 0; i < r.params.size(); ++i) {
          const Tensor& p = r.params[i].tensor;
          const auto n = static_cast<size_t>(p.numel());
          // A local "optimizer step": p += the rank's own update (on the host, same bits on both).
          const Tensor host = p.to(Device::cpu).contiguous();
          const std::vector<float> u = noise(seed(i) + 7, n);
          std::vector<float> next(n);
          for (size_t j = 0; j < n; ++j) next[j] = host.data<float>()[j] + 0.1f * u[j];
          p.copy_from(Tensor::from_vector(next, p.shape()));
        }
        r.avg->after_step();
      }
      for (size_t i = 0; i < shapes.size(); ++i) {
        EXPECT_TRUE(same_bits(runs[0].params[i].tensor, runs[1].params[i].tensor)) << "step " << step << " w" << i;
        EXPECT_TRUE(same_bits(runs[0].params[i].tensor.grad(), runs[1].params[i].tensor.grad())) << "step " << step;
      }
      EXPECT_TRUE(same_bits(runs[0].buffers[0].tensor, runs[1].buffers[0].tensor)) << "step " << step;
    }
    EXPECT_EQ(runs[1].avg->averagings(), 2);  // after steps 1 and 3
    EXPECT_TRUE(runs[1].params[0].tensor.device().is_cuda());
  });
  // Per rank: setup's 3 broadcasts, the warm-up's gradient average, 2 averagings of parameters and buffer.
  if (staged.installed()) {
    EXPECT_EQ(staged.calls(), 2 * (3 + 1 + 2 * 2));
  }
}

TEST(DeviceAveraging, BmufOnTheDeviceIsRefusedWithTheReason) {
  testing::InstallStaged staged;
  parallel::testing::on_ranks(1, [&](int, comm::Communicator comm) {
    parallel::averaging::ModelAveraging avg(comm, {.bmuf = true});
    Tensor p = Tensor::zeros({4}, DType::f32, testing::kGpu);
    try {
      avg.setup({{"w", p}}, {}, {});
      ADD_FAILURE() << "BMUF set up on a device";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("parallel.strategy = bmuf on cuda:0"), std::string::npos) << e.what();
    }
  });
}

// The codec hook on a device bucket: three steps of each codec give the CPU
// hook's average, and its checkpoint (error memory copied to the host) the same.
TEST(DeviceCodecHook, BucketsOnTheDeviceMatchTheCpuHook) {
  testing::InstallStaged staged;
  for (const char* name : {"bf16", "qsgd", "onebit", "topk"}) {
    SCOPED_TRACE(name);
    comm::codec::CodecOptions o;
    o.name = name;
    o.qsgd_levels = 15;
    o.onebit_chunk = 64;
    o.topk_ratio = 0.05;
    parallel::testing::on_ranks(2, [&](int rank, comm::Communicator comm) {
      parallel::CodecHook cpu(comm, o, std::chrono::seconds(20)), gpu(comm, o, std::chrono::seconds(20));
      const std::vector<Shape> shapes = {{30, 20}, {20}};
      for (int step = 0; step < 3; ++step) {
        const std::vector<float> g = noise(1000 * static_cast<uint64_t>(step) + static_cast<uint64_t>(rank), 620);
        const Tensor host = Tensor::from_vector(g, {620}), dev = host.to(testing::kGpu);
        const Deadline deadline = Deadline::after(std::chrono::seconds(20));
        cpu.run(comm, {.index = 0, .flat = host, .shapes = shapes}, false).wait(deadline);
        gpu.run(comm, {.index = 0, .flat = dev, .shapes = shapes}, false).wait(deadline);
        EXPECT_TRUE(same_bits(host, dev)) << "rank " << rank << " step " << step;
      }
      const nn::NamedTensors a = cpu.state_dict(), b = gpu.state_dict();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].first, b[i].first);
        EXPECT_TRUE(b[i].second.device().is_cpu());
        EXPECT_TRUE(same_bits(a[i].second, b[i].second)) << a[i].first;
      }
    });
  }
  if (staged.installed()) {
    EXPECT_EQ(staged.calls(), 4 * 2 * 3);  // each codec, rank and step: one collective on device buffers
  }
}

#endif  // BRAID_CUDA_EMULATE

}  // namespace
}  // namespace braid
