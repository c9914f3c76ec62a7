// What both forms of timeout-hybrid synchronisation share (hybrid.h, the
// coordinator's; deadline_allreduce.h, every rank's): the run's counts and
// their figures, and the replicas' state, which every rank must hold alike.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braid/parallel/flat_replica.h"
#include "braid/parallel/hybrid/inbox.h"

namespace braid::parallel::hybrid {

using HybridOptions = InboxOptions;

// Totals over the steps this process ran (the same on every rank after finish()).
struct HybridTotals {
  int64_t steps = 0, arrived = 0, late = 0, stale = 0, dropped = 0, skipped = 0, max_staleness = 0, max_lag = 0;
  // Adds one applied step's record (dropped and skipped too).
  void count(const StepRecord& r);
};

// The figures of --summary-json: the counts, their means per step, the
// waits and the bytes this rank sent.
nlohmann::json hybrid_stats(const HybridTotals& t, const HybridOptions& o, int replicas, double waited_s,
                            double bytes_sent, size_t gradient_bytes);

// Collective over `comm`, after the last step: averages the float buffers
// (batch-norm statistics, each replica's own) in place, then fails (a bug)
// unless every rank holds the same parameters bit for bit. `context` names
// the rank and the strategy.
void finish_replicas(comm::Communicator& comm, const FlatParams& flat, const std::vector<NamedParameter>& buffers,
                     Duration timeout, int64_t steps, const std::function<std::string()>& context);

// Collective over `comm`: `model`'s state with its float buffers (batch-norm
// statistics, each replica's own) replaced by their mean over the replicas.
nn::NamedTensors state_with_mean_buffers(comm::Communicator& comm, const nn::Module& model,
                                         const std::vector<NamedParameter>& buffers, Duration timeout);

}  // namespace braid::parallel::hybrid
