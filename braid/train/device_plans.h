// Which plans train on a device (train.device = cuda), and the one place that
// refuses the others: a table, one row per part of a plan, each either
// running on a device or refused with its reason (docs/gpu.md, "Several GPUs
// and every plan"). A plan that cannot run on a device is refused by name; it
// never falls back to the CPU. Putting a plan on the device means making its
// exchanges pass device buffers (comm::buffer_of) and then emptying its row's
// reason, with a test against the CPU run (tests/cuda/emulated_multi_*_test.cc).
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "braid/comm/device_comm.h"
#include "braid/parallel/plan.h"
#include "braid/tensor/device.h"
#include "braid/train/config.h"

namespace braid::train {

struct DevicePlanRow {
  std::string_view plan;  // as the user names it: "pipeline parallelism (parallel.pipeline), GPipe"
  // Whether this run's plan has the part (reads only keys every run reads).
  std::function<bool(const parallel::Plan& plan, const Config& c)> uses;
  std::string_view refusal;  // why it does not run on a device yet; empty: it runs
};

// Every row, the parts that run first.
const std::vector<DevicePlanRow>& device_plan_table();

// Nothing on the CPU; elsewhere ConfigError naming the device, the plan and
// the reason for every row the run uses whose part does not run there.
void check_plan_on_device(const parallel::Plan& plan, const Config& c, Device device);

// parallel.device_comm for a run on `device`: read only on a device (a CPU
// run leaves it unread, so setting it there is refused).
comm::DeviceComm device_comm_option(const Config& c, Device device);

}  // namespace braid::train
