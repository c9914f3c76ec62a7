#include "braid/parallel/hybrid/replicas.h"

#include <algorithm>

#include "braid/base/digest.h"

namespace braid::parallel::hybrid {

void HybridTotals::count(const StepRecord& r) {
  ++steps;
  arrived += r.arrived, late += r.late, stale += r.stale, dropped += r.dropped, skipped += r.skipped;
  max_staleness = std::max(max_staleness, r.max_staleness);
  max_lag = std::max(max_lag, r.lag);
}

nlohmann::json hybrid_stats(const HybridTotals& t, const HybridOptions& o, int replicas, double waited_s,
                            double bytes_sent, size_t gradient_bytes) {
  const double steps = static_cast<double>(std::max<int64_t>(t.steps, 1));
  return {{"replicas", replicas},
          {"via", o.via == Via::allreduce ? "allreduce" : "coordinator"},
          {"timeout_ms", std::chrono::duration<double, std::milli>(o.wait).count()},
          {"late_rule", o.late == Late::drop ? "drop" : "stale"},
          {"steps", t.steps},
          {"arrived", t.arrived},
          {"late", t.late},
          {"stale_applied", t.stale},
          {"dropped", t.dropped},
          {"skipped", t.skipped},
          {"catch_up", o.catch_up == CatchUp::skip ? "skip" : "compute"},
          {"max_staleness", t.max_staleness},
          {"max_lag", t.max_lag},
          {"arrived_per_step", static_cast<double>(t.arrived) / steps},
          {"late_per_step", static_cast<double>(t.late) / steps},
          {"dropped_per_step", static_cast<double>(t.dropped) / steps},
          {"waited_ms_per_step", 1e3 * waited_s / steps},
          {"bytes_sent", bytes_sent},
          {"bytes_per_step", bytes_sent / steps},
          {"allreduce_bytes_per_step", allreduce_bytes(static_cast<double>(gradient_bytes), replicas)}};
}

void finish_replicas(comm::Communicator& comm, const FlatParams& flat, const std::vector<NamedParameter>& buffers,
                     Duration timeout, int64_t steps, const std::function<std::string()>& context) {
  std::vector<Tensor> local;
  for (const auto& b : buffers) local.push_back(b.tensor);
  average_over(comm, local, timeout, "timeout-hybrid");
  uint32_t crc = 0;
  for (const Tensor& p : flat.tensors()) {
    crc = crc32({static_cast<const std::byte*>(p.raw_data()), p.nbytes()}, crc);
  }
  std::vector<int64_t> check{crc, ~static_cast<int64_t>(crc)};  // max of both: max and ~min
  wait_explained(comm.allreduce(check, {.op = comm::Op::max, .timeout = timeout}), Deadline::after(timeout * 2),
                 context);
  BRAID_CHECK(check[0] == ~check[1], "timeout-hybrid: the replicas' parameters differ after {} steps (every rank "
              "applies the same aggregates, so they must not)", steps);
}

nn::NamedTensors state_with_mean_buffers(comm::Communicator& comm, const nn::Module& model,
                                         const std::vector<NamedParameter>& buffers, Duration timeout) {
  nn::NamedTensors out = model.state_dict();
  if (buffers.empty()) return out;
  std::vector<Tensor> mean;
  for (const auto& b : buffers) mean.push_back(b.tensor.clone());
  average_over(comm, mean, timeout, "timeout-hybrid");
  for (size_t b = 0; b < buffers.size(); ++b) {
    for (auto& [name, t] : out) {
      if (name == buffers[b].name) t = mean[b];
    }
  }
  return out;
}

}  // namespace braid::parallel::hybrid
