// What the tests of plans on several emulated GPUs share
// (emulated_multi_plans_test.cc, emulated_multi_codec_test.cc): a plan's few
// SGD steps of the test MLP on in-process ranks, on the emulated device or
// the CPU; the comparison of the two; the device path a test forces.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "braid/comm/device_comm.h"
#include "braid/cuda/emulated.h"
#include "braid/optim/sgd.h"
#include "tests/parallel/model_parallel_util.h"

namespace braid::testing::multi_gpu {

using comm::DeviceComm;
using parallel::PlannedModel;
using parallel::PlanOptions;
using parallel::testing::Params;

// Launches of `kernel` counted by the emulated device so far.
inline int64_t launches(const std::string& kernel) {
  const auto c = cuda::emulated::counters();
  const auto it = c.by_kernel.find(kernel);
  return it == c.by_kernel.end() ? 0 : it->second;
}

// `steps` SGD steps of the 6 -> 16 -> 12 -> 5 MLP under `options` on `world`
// in-process ranks whose tensors live on `device`; each rank's parameters, on
// the host (under ZeRO rank 0's whole model, the others' left empty).
inline std::vector<Params> train(Device device, int world, const PlanOptions& options, int steps = 3) {
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

inline void expect_close(const std::vector<Params>& device, const std::vector<Params>& cpu, const std::string& where,
                  double tolerance = 2e-5) {
  ASSERT_EQ(device.size(), cpu.size());
  for (size_t r = 0; r < cpu.size(); ++r) {
    ASSERT_EQ(device[r].size(), cpu[r].size()) << where << " rank " << r;
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

}  // namespace braid::testing::multi_gpu
