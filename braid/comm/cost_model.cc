#include "braid/comm/cost_model.h"

#include <cmath>
#include <limits>

namespace braid::comm {

LinkCost default_link_cost(std::string_view transport) {
  // alpha/beta: rough figures for this class of machine; calibrate() measures
  // the real ones. gamma: one f32 add pass over memory (~8 GB/s per core).
  if (transport == "inproc") return {.alpha = 2e-6, .beta = 1.0 / 10e9, .gamma = 1.0 / 8e9};
  if (transport == "shm") return {.alpha = 3e-6, .beta = 1.0 / 8e9, .gamma = 1.0 / 8e9};
  if (transport == "mpi") return {.alpha = 3e-6, .beta = 1.0 / 6e9, .gamma = 1.0 / 8e9};
  return {.alpha = 25e-6, .beta = 1.0 / 2e9, .gamma = 1.0 / 8e9};
}

namespace {

double log2_ceil(int p) { return std::ceil(std::log2(static_cast<double>(p))); }

// Cost of one all-reduce of n bytes over p ranks on links `c` (no hierarchy).
double flat(Algorithm a, int p, double n, const LinkCost& c) {
  if (p <= 1) return 0;
  const double P = p, lg = log2_ceil(p);
  const int p2 = [&] { int x = 1; while (x * 2 <= p) x *= 2; return x; }();
  const bool pow2 = p2 == p;
  const double fold = pow2 ? 0 : 2 * (c.alpha + n * c.beta) + n * c.gamma;
  const double chunk = 256.0 * 1024;  // CommOptions::chunk_bytes default
  switch (a) {
    case Algorithm::ring: {
      // k chunks per segment, pipelined: in the reduce-scatter, reducing
      // chunk j overlaps moving chunk j+1, so a step costs the slower of the
      // two plus one chunk of the faster.
      const double k = std::max(1.0, std::ceil(n / P / chunk)), seg = n / P;
      const double reduce_step = seg * std::max(c.beta, c.gamma) + seg / k * std::min(c.beta, c.gamma);
      return 2 * (P - 1) * k * c.alpha + (P - 1) * (reduce_step + seg * c.beta);
    }
    case Algorithm::recursive_doubling:
      return fold + std::log2(p2) * (c.alpha + n * c.beta + n * c.gamma);
    case Algorithm::halving_doubling:
      return fold + 2 * std::log2(p2) * c.alpha + 2 * (p2 - 1.0) / p2 * n * c.beta +
             (p2 - 1.0) / p2 * n * c.gamma;
    case Algorithm::binary_tree:
    case Algorithm::double_binary_tree: {
      // Pipelined over k chunks of c bytes: depth + k - 1 steps up and as many
      // down; per step an interior node takes in two chunks and combines them
      // (up) or sends two (down). The double tree gives each tree half of n.
      const double part = a == Algorithm::binary_tree ? n : n / 2;
      const double depth = std::floor(std::log2(P));
      const double k = std::max(1.0, std::ceil(part / chunk)), ch = part / k;
      return (depth + k - 1) * (2 * c.alpha + 4 * ch * c.beta + 2 * ch * c.gamma);
    }
    case Algorithm::binary_blocks: {
      if (pow2) return flat(Algorithm::halving_doubling, p, n, c);
      int smallest = 1;
      while ((p & smallest) == 0) smallest *= 2;
      int blocks = 0;
      for (int x = p; x; x &= x - 1) ++blocks;
      return (2 * lg + 2 * (blocks - 1)) * c.alpha +
             (2 * (p2 - 1.0) / p2 + 2.0 / smallest) * n * c.beta + n * c.gamma;
    }
    case Algorithm::direct:
      // The root handles p-1 messages each way, one after another.
      return 2 * (P - 1) * c.alpha + 2 * (P - 1) * n * c.beta + (P - 1) * n * c.gamma;
    default:
      return std::numeric_limits<double>::infinity();
  }
}

constexpr Algorithm kFlat[] = {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::halving_doubling,
                               Algorithm::binary_tree, Algorithm::double_binary_tree,
                               Algorithm::binary_blocks, Algorithm::direct};

Algorithm best_flat(int p, double n, const LinkCost& c) {
  Algorithm best = Algorithm::ring;
  double best_t = std::numeric_limits<double>::infinity();
  for (Algorithm a : kFlat) {
    const double t = flat(a, p, n, c);
    if (t < best_t) best = a, best_t = t;
  }
  return best;
}

}  // namespace

double predict_allreduce(Algorithm a, int p, size_t bytes, const LinkCost& intra, const LinkCost& inter,
                         int hosts) {
  const double n = static_cast<double>(bytes);
  if (a == Algorithm::automatic) a = choose_allreduce(p, bytes, intra, inter, hosts);
  if (a != Algorithm::hierarchical) return flat(a, p, n, hosts > 1 ? inter : intra);
  // Reduce to a leader inside each host, all-reduce among leaders, broadcast back.
  const int local = std::max(1, p / std::max(1, hosts));
  const double lg = log2_ceil(local);
  const double inside = lg * (intra.alpha + n * intra.beta) + lg * n * intra.gamma;
  const double between = flat(best_flat(hosts, n, inter), hosts, n, inter);
  return 2 * inside + between - lg * n * intra.gamma;
}

Algorithm choose_allreduce(int p, size_t bytes, const LinkCost& intra, const LinkCost& inter, int hosts) {
  const double n = static_cast<double>(bytes);
  const LinkCost& flat_cost = hosts > 1 ? inter : intra;
  Algorithm best = best_flat(p, n, flat_cost);
  if (hosts > 1 && predict_allreduce(Algorithm::hierarchical, p, bytes, intra, inter, hosts) <
                       flat(best, p, n, flat_cost))
    best = Algorithm::hierarchical;
  return best;
}

}  // namespace braid::comm
