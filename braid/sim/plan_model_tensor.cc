// Tensor parallelism inside a layer: where a block's collectives sit, what
// sequence parallelism changes, and the overlap of the collectives with their
// GEMMs (docs/sim.md, "Tensor and sequence parallelism").
#include <fmt/format.h>

#include <algorithm>

#include "braid/sim/plan_builder.h"

namespace braid::sim::detail {

std::vector<Builder::TpPart> Builder::tensor_parts(int l, bool forward, double seconds) const {
  const LayerProfile& lp = layer(l);
  const double T = plan_.tensor;
  const bool sp = plan_.sequence_parallel;
  const double out = static_cast<double>(lp.output_bytes);
  const double in = l > 0 ? static_cast<double>(layer(l - 1).output_bytes) : 0;
  using C = TpCollective;
  std::vector<TpPart> parts;
  switch (role(l)) {
    case LayerRole::block: {
      // The GEMMs and the sequence-wise work (norms, dropout, residuals) in
      // the same proportion of `seconds` as in the profiled pass.
      const double whole = forward ? lp.forward : lp.backward;
      const double scale = whole > 0 ? seconds / whole : 0;
      const double gemm = (forward ? lp.gemm_forward : lp.gemm_backward) * scale;
      const double seq = (forward ? lp.sequence_forward : lp.sequence_backward) * scale;
      // Plain TP leaves the sequence-wise work whole on every rank; sequence
      // parallelism runs it on the rank's segment.
      const double mine = sp ? seconds / T : seq + (seconds - seq) / T;
      // Each of the block's four products (q/k/v, out, fc1, fc2) taken as a
      // quarter of its GEMM time; the rest (attention core, activation,
      // norms) split between the attention and the MLP halves.
      const double q = gemm / T / 4, rest = std::max(0.0, mine - 4 * q) / 2;
      // Backward runs the MLP half first.
      for (const char* half : {forward ? "attention" : "mlp", forward ? "mlp" : "attention"}) {
        // Forward: the column product after the all-gather (SP), the row
        // product before the reduce-scatter (SP) or the all-reduce. Backward
        // has the same shape: the row product's dx after its gradient's
        // all-gather (SP; nothing under plain TP), the column product's dx
        // before the reduce-scatter (SP) or the all-reduce of the input
        // gradient.
        if (sp) {
          parts.push_back({q, C::allgather, out, true, half});
        } else {
          parts.push_back({q});
        }
        parts.push_back({rest});
        parts.push_back({q, sp ? C::reduce_scatter : C::allreduce, out, false, half});
      }
      return parts;
    }
    case LayerRole::embedding:
      // Megatron's scatter after the embedding; its gradient gathered back.
      if (!sp) return {};
      if (forward) return {{seconds / T, C::reduce_scatter, out, false, "embedding"}};
      return {{seconds / T, C::allgather, out, true, "embedding grad"}};
    case LayerRole::head: {
      // Gather before the head; the vocabulary-parallel loss's row reductions.
      if (!sp) return {};
      const double rows = static_cast<double>(in_.profile.batch);
      if (forward) {
        return {{seconds / T, C::allgather, in, true, "head"},
                {0, C::allreduce, 4 * rows, false, "loss max"},
                {0, C::allreduce, 8 * rows, false, "loss sums"}};
      }
      return {{seconds / T, l > 0 ? C::reduce_scatter : C::none, in, false, "head grad"}};
    }
    default:
      return {};
  }
}

std::vector<TaskId> Builder::tensor_collective(TpCollective kind, int d, int p, double bytes,
                                               const std::vector<TaskId>& ready, const std::string& what) {
  CollectiveArgs a;
  for (int t = 0; t < plan_.tensor; ++t) a.group.push_back(rank(d, t, p));
  a.bytes = bytes;
  a.ready = ready;
  a.name = fmt::format("tp {} s{}", what, step_);
  switch (kind) {
    case TpCollective::allgather:
      return allgather(sim_, a);
    case TpCollective::reduce_scatter:
      return reduce_scatter(sim_, a);
    default:
      return allreduce(sim_, a, algorithm(a.group, bytes));
  }
}

// A part with a collective, pipelined: chunk j's collective waits for the
// collective before it (one communication thread) and, after the compute,
// for chunk j's compute; the compute of chunk j waits for chunk j - 1's and,
// before it, for chunk j's collective. On free links and cores k chunks of
// compute g and communication c each end after g + (k - 1) max(g, c) + c:
// max(compute, communication) plus one chunk of the other. Blocking is k = 1.
void Builder::run_parts(int l, bool forward, int m, int d, int p, const std::vector<TpPart>& parts,
                        std::vector<TaskId>& prev) {
  const LayerProfile& lp = layer(l);
  const int T = plan_.tensor;
  const char* category = forward ? "forward" : "backward";
  const std::string name = fmt::format("{} {}{}", lp.name, forward ? "F" : "B", m);
  auto join = [&](TaskId a, TaskId b) {
    std::vector<TaskId> deps;
    for (TaskId x : {a, b}) {
      if (x >= 0) deps.push_back(x);
    }
    return deps.size() == 1 ? deps[0] : sim_.join(deps);
  };
  for (const TpPart& part : parts) {
    const bool has = part.collective != TpCollective::none;
    const int k = has && plan_.tp_overlap && part.compute > 0 ? kOverlapChunks : 1;
    const std::string what = fmt::format("{}{}", part.what, forward ? "" : " grad");
    std::vector<TaskId> work = prev, comm(static_cast<size_t>(T), -1);
    for (int j = 0; j < k; ++j) {
      const std::string chunk = k > 1 ? fmt::format(" {}/{}", j + 1, k) : "";
      if (has && part.before) {
        std::vector<TaskId> ready(static_cast<size_t>(T));
        for (int t = 0; t < T; ++t) {
          ready[static_cast<size_t>(t)] = j == 0 ? prev[static_cast<size_t>(t)] : comm[static_cast<size_t>(t)];
          // A step's first layer: its collective starts at the step's start.
          if (ready[static_cast<size_t>(t)] < 0) ready[static_cast<size_t>(t)] = sim_.join({});
        }
        comm = tensor_collective(part.collective, d, p, part.bytes / k, ready, what + chunk);
      }
      for (int t = 0; t < T && part.compute > 0; ++t) {
        const int r = rank(d, t, p);
        TaskId& w = work[static_cast<size_t>(t)];
        w = compute(r, part.compute / k, after(has && part.before ? join(w, comm[static_cast<size_t>(t)]) : w),
                    category, name + chunk);
      }
      if (has && !part.before) {
        std::vector<TaskId> ready(static_cast<size_t>(T));
        for (int t = 0; t < T; ++t) {
          ready[static_cast<size_t>(t)] = j == 0 ? work[static_cast<size_t>(t)]
                                                 : join(work[static_cast<size_t>(t)], comm[static_cast<size_t>(t)]);
        }
        comm = tensor_collective(part.collective, d, p, part.bytes / k, ready, what + chunk);
      }
    }
    // The training thread goes on once its last product and (after it) the
    // last chunk's collective are done.
    prev = has && !part.before ? comm : work;
  }
  for (int t = 0; t < T; ++t) tail_[static_cast<size_t>(rank(d, t, p))] = prev[static_cast<size_t>(t)];
}

}  // namespace braid::sim::detail
