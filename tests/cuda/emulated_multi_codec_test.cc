// Gradient codecs and local SGD as whole plans on several emulated GPUs: the
// trainer's plan code (make_plan) on ranks as threads whose models live on the
// emulated cuda device, over the emulated NCCL and over host staging, against
// the same plan on the CPU at world sizes 2-4. Products on the device are
// reference loops that round differently from OpenBLAS, so parameters are
// compared to a tolerance (the codecs themselves are bitwise the host's:
// device_codec_test.cc). The device table runs these plans and still refuses
// PowerSGD and BMUF by name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "braid/comm/device_comm.h"
#include "braid/cuda/emulated.h"
#include "braid/optim/sgd.h"
#include "braid/train/config.h"
#include "braid/train/device_plans.h"
#include "braid/train/schema.h"
#include "tests/parallel/model_parallel_util.h"
#include "tests/testing/error_message.h"

namespace braid {
namespace {

using comm::DeviceComm;
using parallel::PlannedModel;
using parallel::PlanOptions;
using parallel::testing::Params;

const Device kDevice = Device::cuda(0);

int64_t launches(const std::string& kernel) {
  const auto c = cuda::emulated::counters();
  const auto it = c.by_kernel.find(kernel);
  return it == c.by_kernel.end() ? 0 : it->second;
}

// The kernel each codec's encoding launches on the device.
std::string encoder(const std::string& codec) {
  if (codec == "fp16" || codec == "bf16") return "codec_cast_divide";
  if (codec == "qsgd") return "qsgd_codes";
  if (codec == "onebit") return "onebit_pack";
  return "topk_write";
}

// Three SGD steps of the test MLP under `options`; each rank's parameters.
std::vector<Params> train(Device device, int world, const PlanOptions& options) {
  std::vector<Params> got(static_cast<size_t>(world));
  parallel::testing::on_ranks(world, [&](int rank, comm::Communicator comm) {
    auto whole = parallel::testing::mlp(7);
    whole->to(device);
    PlannedModel pm = make_plan(options, comm, nullptr, whole, nn::cross_entropy_loss);
    optim::SGD sgd(pm.plan->optimizer_parameters(*pm.model), {.lr = 0.3});
    pm.plan->setup(*pm.model, {}, &sgd);
    const int64_t rows = 24, per = rows / pm.plan->data_world(), first = per * pm.plan->data_rank();
    for (int s = 0; s < 3; ++s) {
      auto [x, t] = parallel::testing::batch(false, s, rows);
      pm.plan->forward_backward(*pm.model, pm.loss, slice(x, 0, first, first + per).to(device),
                                slice(t, 0, first, first + per).to(device));
      pm.plan->finish_gradients();
      sgd.step();
      sgd.zero_grad();
      pm.plan->after_step();
    }
    got[static_cast<size_t>(rank)] = parallel::testing::values(*pm.model);
  });
  return got;
}

void expect_close(const std::vector<Params>& device, const std::vector<Params>& cpu, const std::string& where,
                  double tolerance = 1e-4) {
  ASSERT_EQ(device.size(), cpu.size());
  for (size_t r = 0; r < cpu.size(); ++r) {
    for (const auto& [name, want] : cpu[r]) {
      const std::vector<float>& v = device[r].at(name);
      ASSERT_EQ(v.size(), want.size()) << where << " " << name;
      for (size_t i = 0; i < v.size(); ++i) {
        ASSERT_NEAR(v[i], want[i], tolerance) << where << " rank " << r << " " << name << "[" << i << "]";
      }
    }
  }
}

struct PathGuard {
  explicit PathGuard(DeviceComm m) {
    cuda::emulated::install_collectives();  // another test may have registered its own in their place
    comm::set_device_comm(m);
  }
  ~PathGuard() { comm::set_device_comm(DeviceComm::automatic); }
};

PlanOptions with_codec(const char* name, int world) {
  PlanOptions o{.strategy = "allreduce", .mesh = {.data = world}};
  o.codec.name = name;
  o.codec.topk_ratio = 0.2;
  o.codec.qsgd_chunk = 64;
  o.codec.onebit_chunk = 32;
  return o;
}

TEST(EmulatedPlans, CodecsEqualTheCpu) {
  for (DeviceComm mode : {DeviceComm::native, DeviceComm::staged}) {
    PathGuard path(mode);
    for (const char* codec : {"fp16", "bf16", "qsgd", "onebit", "topk"}) {
      for (int world = 2; world <= 4; world += 2) {
        const PlanOptions o = with_codec(codec, world);
        const std::string where = fmt::format("{} {} world {}", comm::name(mode), codec, world);
        const int64_t encoded = launches(encoder(codec));
        const auto on_device = train(kDevice, world, o);
        EXPECT_GE(launches(encoder(codec)) - encoded, 3 * world) << where << ": buckets were not encoded on the device";
        // bf16 halves summed in another order than the host ring's round
        // apart by a bf16 ulp (2^-8 relative), which the step scales by lr 0.3.
        expect_close(on_device, train(Device::cpu, world, o), where, std::string(codec) == "bf16" ? 1e-3 : 1e-4);
      }
    }
  }
}

TEST(EmulatedPlans, LocalSgdEqualsTheCpu) {
  for (DeviceComm mode : {DeviceComm::native, DeviceComm::staged}) {
    PathGuard path(mode);
    for (int world = 2; world <= 4; ++world) {
      PlanOptions o{.strategy = "local_sgd", .mesh = {.data = world}};
      o.averaging.period = 2;
      o.averaging.warmup = 1;
      expect_close(train(kDevice, world, o), train(Device::cpu, world, o),
                   fmt::format("{} local_sgd world {}", comm::name(mode), world));
    }
  }
}

// The table runs codecs with device kernels and local SGD, and refuses
// PowerSGD and BMUF naming the plan and the reason.
TEST(EmulatedPlans, TheDeviceTableRunsCodecsAndLocalSgd) {
  cuda::emulated::install_collectives();
  struct Case {
    PlanOptions options;
    std::string codec;
    std::string refused;  // the row's plan; empty: runs
  };
  const std::vector<Case> cases{
      {with_codec("topk", 2), "topk", ""},
      {with_codec("qsgd", 2), "qsgd", ""},
      {with_codec("powersgd", 2), "powersgd", "PowerSGD (parallel.codec = powersgd)"},
      {{.strategy = "local_sgd", .mesh = {.data = 2}}, "none", ""},
      {{.strategy = "bmuf", .mesh = {.data = 2}}, "none", "model averaging (BMUF, EASGD, ADMM)"},
  };
  for (const Case& k : cases) {
    train::Config c = train::load_config("", {}, /*use_env=*/false);
    c.set("parallel.codec=" + k.codec);
    parallel::testing::on_ranks(2, [&](int, comm::Communicator comm) {
      PlannedModel pm = make_plan(k.options, comm, nullptr, parallel::testing::mlp(7), nn::cross_entropy_loss);
      if (k.refused.empty()) {
        EXPECT_NO_THROW(train::check_plan_on_device(*pm.plan, c, kDevice)) << pm.plan->describe();
        return;
      }
      const std::string msg = test::message_of<ConfigError>([&] { train::check_plan_on_device(*pm.plan, c, kDevice); });
      EXPECT_NE(msg.find("train.device = cuda:0: " + k.refused + " does not run on a GPU yet: "), std::string::npos)
          << msg;
    });
  }
}

}  // namespace
}  // namespace braid
