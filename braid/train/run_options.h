// From a Config to the typed options of each part of a run: the process
// group, the plan (mesh, schedule, data-axis strategy, codec), the parameter
// servers, the optimizer and the batch schedule.
//
// Each reader reads exactly the keys its choice uses and no others (the keys
// of easgd.* only under parallel.strategy = easgd, codec.qsgd_levels only
// with parallel.codec = qsgd, optim.nesterov only with optim.name = sgd), so
// Config::refuse_unread() can tell a key that has no effect from one that has.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/optim/optimizer.h"
#include "braid/optim/schedule.h"
#include "braid/parallel/plan_factory.h"
#include "braid/parallel/process_group.h"
#include "braid/train/batch_schedule.h"
#include "braid/train/config.h"

namespace braid::train {

// The optimizer named by optim.name over `params` (lbfgs is refused: it needs
// a full-batch closure, not a minibatch loop). With optim.weight_decay > 0,
// optim.decay_filter says which parameters decay, judged by their number of
// dimensions: `ndims[i]`, the whole parameter's where params[i] is a flat
// slice of it (ZeRO), or the tensors' own when `ndims` is empty.
std::unique_ptr<optim::Optimizer> make_optimizer(const Config& config, std::vector<Tensor> params,
                                                 const std::vector<int64_t>& ndims = {});

// optim.schedule's learning-rate schedule over `total_steps` (the run's
// planned optimizer steps; optim.decay_steps replaces it for cosine).
optim::ScheduleOptions schedule_options(const Config& config, int64_t total_steps);

// How to join the job's process group, from parallel.* (transport, tcp
// streams, collective timeout).
parallel::ProcessGroupOptions process_group_options(const Config& config);

// The parameter-server aggregation's options from parallel.*, ps.* and
// optim.* (the servers' updater takes its hyper-parameters from optim.*).
parallel::ParameterServerOptions ps_options(const Config& config, int servers, Duration timeout);

// train.batch_schedule's schedule for `replicas` data-parallel replicas;
// null for none.
std::shared_ptr<BatchSchedule> make_batch_schedule(const Config& config, int replicas);

// The plan's options from parallel.* and the strategy's own section, for
// `strategy` (parallel.strategy with auto resolved; empty: parallel.strategy,
// auto read as allreduce). `timeout` bounds every collective.
parallel::PlanOptions plan_options(const Config& config, Duration timeout, const std::string& strategy = {});

}  // namespace braid::train
