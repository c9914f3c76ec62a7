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
#include "tests/parallel/model_parallel_util.h"
#include "tests/testing/error_message.h"

namespace braid {
namespace {

using comm::DeviceComm;
using parallel::PlannedModel;
using parallel::PlanOptions;
using parallel::testing::Params;

const Device kDevice = Device::cuda(0);

int64_t launches(const char* kernel) {
  const auto c = cuda::emulated::counters();
  const auto it = c.by_kernel.find(kernel);
  return it == c.by_kernel.end() ? 0 : it->second;
}

// `steps` SGD steps of the 6 -> 16 -> 12 -> 5 MLP under `options` on `world`
// in-process ranks whose tensors live on `device`; each rank's parameters, on
// the host (under ZeRO rank 0's whole model, the others' left empty).
std::vector<Params> train(Device device, int world, const PlanOptions& options, int steps = 3) {
  std::vector<Params> got(static_cast<size_t>(world));
  parallel::testing::on_ranks(world, [&](int rank, comm::Communicator comm) {
    auto whole = parallel::testing::mlp(7);
    whole->to(device);
    PlannedModel pm = make_plan(options, comm, nullptr, whole, nn::cross_entropy_loss);
    optim::SGD sgd(pm.plan->optimizer_parameters(*pm.model), {.lr = 0.3});
    pm.plan->setup(*pm.model, {}, &sgd);
    const int64_t rows = 24, per = rows / pm.plan->data_world(), first = per * pm.plan->data_rank();
    for (int s = 0; s < steps; ++s) {
      auto [x, t] = parallel::testing::batch(false, s, rows);
      pm.plan->forward_backward(*pm.model, pm.loss, slice(x, 0, first, first + per).to(device),
                                slice(t, 0, first, first + per).to(device));
      pm.plan->finish_gradients();
      sgd.step();
      sgd.zero_grad();
      pm.plan->after_step();
    }
    if (options.strategy != "zero") {
      got[static_cast<size_t>(rank)] = parallel::testing::values(*pm.model);
      return;
    }
    // ZeRO-3 keeps only this rank's pieces between steps: the whole model is
    // gathered as for a checkpoint (collective; whole on rank 0).
    const nn::NamedTensors whole_state = pm.plan->model_state(*pm.model);
    if (rank != 0) return;
    for (const auto& [name, t] : whole_state) got[0][name] = t.to_vector<float>();
  });
  return got;
}

void expect_close(const std::vector<Params>& device, const std::vector<Params>& cpu, const std::string& where) {
  ASSERT_EQ(device.size(), cpu.size());
  for (size_t r = 0; r < cpu.size(); ++r) {
    ASSERT_EQ(device[r].size(), cpu[r].size()) << where << " rank " << r;
    for (const auto& [name, want] : cpu[r]) {
      const std::vector<float>& v = device[r].at(name);
      ASSERT_EQ(v.size(), want.size()) << where << " " << name;
      for (size_t i = 0; i < v.size(); ++i) ASSERT_NEAR(v[i], want[i], 2e-5) << where << " rank " << r << " " << name << "[" << i << "]";
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
