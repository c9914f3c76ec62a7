// Plans on several emulated GPUs: ranks as threads over the in-process
// transport, each rank's model on the emulated cuda device, built by the
// trainer's own plan code (make_plan), trained a few SGD steps and compared
// with the same plan on the CPU at world sizes 2-4. The device's kernels are
// the CUDA backend's compiled as host loops and its products reference loops,
// which round differently from OpenBLAS: parameters agree to 2e-5 (the
// collectives themselves agree bit for bit: emulated_multi_comm_test.cc).
// Each run checks that its exchanges went through the device path it asked
// for, not through host pointers, and the device table
// (train/device_plans.h) is checked to refuse every other plan by name.
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

TEST(EmulatedPlans, DataParallelAllreduceEqualsTheCpu) {
  for (DeviceComm mode : {DeviceComm::native, DeviceComm::staged}) {
    PathGuard path(mode);
    for (int world = 2; world <= 4; ++world) {
      const PlanOptions o{.strategy = "allreduce", .mesh = {.data = world}};
      const std::string where = fmt::format("{} world {}", comm::name(mode), world);
      const int64_t nccl = launches("allreduce"), to_host = cuda::emulated::counters().to_host_bytes;
      const auto on_device = train(kDevice, world, o);
      if (mode == DeviceComm::native) {
        EXPECT_GE(launches("allreduce") - nccl, 3 * world) << where << ": the buckets' all-reduces skipped NCCL";
      } else {
        EXPECT_EQ(launches("allreduce"), nccl) << where;
        EXPECT_GT(cuda::emulated::counters().to_host_bytes - to_host, 3 * world * 4 * 200) << where;
      }
      expect_close(on_device, train(Device::cpu, world, o), where);
    }
  }
}

TEST(EmulatedPlans, ZeroStages1To3EqualTheCpu) {
  for (DeviceComm mode : {DeviceComm::native, DeviceComm::staged}) {
    PathGuard path(mode);
    for (int stage = 1; stage <= 3; ++stage) {
      for (int world : {2, 3}) {
        PlanOptions o{.strategy = "zero", .mesh = {.data = world}};
        o.zero.stage = stage;
        const std::string where = fmt::format("{} zero-{} world {}", comm::name(mode), stage, world);
        const int64_t reductions = launches("allreduce") + launches("reduce_scatter"), gathers = launches("allgather");
        const auto on_device = train(kDevice, world, o);
        if (mode == DeviceComm::native) {
          EXPECT_GT(launches("allreduce") + launches("reduce_scatter") - reductions, 0) << where;
          EXPECT_GT(launches("allgather") - gathers, 0) << where;
        }
        expect_close(on_device, train(Device::cpu, world, o), where);
      }
    }
  }
}

TEST(EmulatedPlans, PipelineGpipeAnd1F1BEqualTheCpu) {
  for (DeviceComm mode : {DeviceComm::native, DeviceComm::staged}) {
    PathGuard path(mode);
    for (const char* schedule : {"gpipe", "1f1b"}) {
      for (int data : {1, 2}) {
        const PlanOptions o{.strategy = "allreduce", .mesh = {.data = data, .pipeline = 2}, .microbatches = 3,
                            .schedule = schedule};
        const std::string where = fmt::format("{} {} data {}", comm::name(mode), schedule, data);
        const int64_t sends = launches("send");
        const auto on_device = train(kDevice, 2 * data, o);
        if (mode == DeviceComm::native) {
          EXPECT_GE(launches("send") - sends, 3 * 3 * 2 * data) << where;
        }
        expect_close(on_device, train(Device::cpu, 2 * data, o), where);
      }
    }
  }
}

// Every plan either runs on the device or is refused naming the plan, the
// device and the reason, by the one table.
TEST(EmulatedPlans, TheDeviceTableRefusesWhatDoesNotRunByName) {
  cuda::emulated::install_collectives();
  struct Case {
    PlanOptions options;
    int world;
    std::vector<std::string> sets;
    std::string refused;  // the row's plan; empty: runs
  };
  const std::vector<Case> cases{
      {{.strategy = "allreduce", .mesh = {.data = 2}}, 2, {}, ""},
      {{.strategy = "allreduce", .mesh = {.pipeline = 2}, .schedule = "gpipe"}, 2, {"parallel.schedule=gpipe"}, ""},
      {{.strategy = "allreduce", .mesh = {.pipeline = 2}}, 2, {"parallel.schedule=1f1b"}, ""},
      {{.strategy = "allreduce", .mesh = {.pipeline = 2}, .microbatches = 2, .schedule = "interleaved", .virtual_stages = 2},
       2, {"parallel.schedule=interleaved"}, "pipeline parallelism (parallel.pipeline), interleaved"},
      {{.strategy = "allreduce", .mesh = {.tensor = 2}}, 2, {}, "tensor parallelism (parallel.tensor)"},
      {{.strategy = "allreduce", .mesh = {.data = 2}}, 2, {"parallel.codec=powersgd"}, "PowerSGD (parallel.codec = powersgd)"},
      {{.strategy = "zero", .mesh = {.data = 2}}, 2, {}, ""},
      {{.strategy = "bmuf", .mesh = {.data = 2}}, 2, {}, "model averaging (BMUF, EASGD, ADMM)"},
  };
  for (const Case& k : cases) {
    train::Config c = train::load_config("", {}, /*use_env=*/false);
    for (const std::string& s : k.sets) c.set(s);
    parallel::testing::on_ranks(k.world, [&](int, comm::Communicator comm) {
      PlannedModel pm = make_plan(k.options, comm, nullptr, parallel::testing::mlp(7), nn::cross_entropy_loss);
      if (k.refused.empty()) {
        EXPECT_NO_THROW(train::check_plan_on_device(*pm.plan, c, kDevice)) << pm.plan->describe();
        return;
      }
      const std::string msg = test::message_of<ConfigError>([&] { train::check_plan_on_device(*pm.plan, c, kDevice); });
      EXPECT_NE(msg.find("train.device = cuda:0: " + k.refused + " does not run on a GPU yet: "), std::string::npos) << msg;
      EXPECT_NO_THROW(train::check_plan_on_device(*pm.plan, c, Device::cpu));
    });
  }
}

}  // namespace
}  // namespace braid
