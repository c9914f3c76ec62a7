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
#include "tests/cuda/emulated_multi_util.h"
#include "tests/parallel/model_parallel_util.h"
#include "tests/testing/error_message.h"

namespace braid {
namespace {

using comm::DeviceComm;
using parallel::PlannedModel;
using parallel::PlanOptions;

const Device kDevice = Device::cuda(0);

using testing::multi_gpu::expect_close;
using testing::multi_gpu::launches;
using testing::multi_gpu::PathGuard;
using testing::multi_gpu::train;

// The kernel each codec's encoding launches on the device.
std::string encoder(const std::string& codec) {
  if (codec == "fp16" || codec == "bf16") return "codec_cast_divide";
  if (codec == "qsgd") return "qsgd_codes";
  if (codec == "onebit") return "onebit_pack";
  return "topk_write";
}

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
                   fmt::format("{} local_sgd world {}", comm::name(mode), world), 1e-4);
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
