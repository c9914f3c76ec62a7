#include "braid/parallel/gossip/mixing.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "braid/base/error.h"

namespace braid::parallel::gossip {

Topology parse_topology(std::string_view name) {
  if (name == "ring") return Topology::ring;
  if (name == "torus") return Topology::torus;
  if (name == "exponential") return Topology::exponential;
  fail<ConfigError>("gossip.topology = '{}' (known: ring, torus, exponential)", name);
}

std::string_view topology_name(Topology t) {
  switch (t) {
    case Topology::ring: return "ring";
    case Topology::torus: return "torus";
    case Topology::exponential: return "exponential";
  }
  return "?";
}

int auto_torus_rows(int world) {
  int rows = 1;
  for (int r = 1; r * r <= world; ++r) {
    if (world % r == 0) rows = r;
  }
  return rows;
}

MixingGraph::MixingGraph(Topology topology, int world, int torus_rows)
    : topology_(topology), world_(world), rows_(1), cols_(world) {
  if (world < 1) fail<ValueError>("gossip: a topology needs at least one rank, got {}", world);
  if (torus_rows < 0) fail<ConfigError>("gossip.torus_rows must be >= 0, got {}", torus_rows);
  std::vector<std::pair<int, int>> candidates;
  switch (topology) {
    case Topology::ring:
      candidates = {{0, 1}, {0, world - 1}};
      break;
    case Topology::torus:
      rows_ = torus_rows > 0 ? torus_rows : auto_torus_rows(world);
      if (world % rows_ != 0) {
        fail<ConfigError>("gossip.torus_rows = {} does not divide the {} replicas of the data axis", rows_, world);
      }
      cols_ = world / rows_;
      candidates = {{1 % rows_, 0}, {rows_ - 1, 0}, {0, 1 % cols_}, {0, cols_ - 1}};
      break;
    case Topology::exponential:
      // SGP's graph: out-neighbours at distances 1, 2, 4, ... below P.
      for (int d = 1; d < world; d *= 2) candidates.emplace_back(0, d);
      break;
  }
  // Small grids fold shifts onto each other (a ring of 2: +1 = -1) or onto
  // the identity (one row): each neighbour counts once.
  for (auto d : candidates) {
    d = {d.first % rows_, d.second % cols_};
    if (d == std::pair{0, 0}) continue;
    if (std::find(shifts_.begin(), shifts_.end(), d) == shifts_.end()) shifts_.push_back(d);
  }
}

bool MixingGraph::symmetric() const {
  return std::all_of(shifts_.begin(), shifts_.end(), [&](const auto& d) {
    const std::pair<int, int> neg{(rows_ - d.first) % rows_, (cols_ - d.second) % cols_};
    return std::find(shifts_.begin(), shifts_.end(), neg) != shifts_.end();
  });
}

int MixingGraph::shift_rank(int rank, std::pair<int, int> d, int sign) const {
  const int r = rank / cols_, c = rank % cols_;
  const int nr = ((r + sign * d.first) % rows_ + rows_) % rows_;
  const int nc = ((c + sign * d.second) % cols_ + cols_) % cols_;
  return nr * cols_ + nc;
}

std::vector<int> MixingGraph::in_neighbours(int rank) const {
  std::vector<int> out;
  for (const auto& d : shifts_) out.push_back(shift_rank(rank, d, -1));
  return out;
}

std::vector<int> MixingGraph::out_neighbours(int rank) const {
  std::vector<int> out;
  for (const auto& d : shifts_) out.push_back(shift_rank(rank, d, +1));
  return out;
}

std::vector<double> MixingGraph::matrix() const {
  const auto n = static_cast<size_t>(world_);
  std::vector<double> w(n * n, 0.0);
  for (int i = 0; i < world_; ++i) {
    w[static_cast<size_t>(i) * n + static_cast<size_t>(i)] = weight();
    for (int j : in_neighbours(i)) w[static_cast<size_t>(i) * n + static_cast<size_t>(j)] = weight();
  }
  return w;
}

double MixingGraph::second_eigenvalue() const {
  double second = 0;
  const double two_pi = 2 * std::numbers::pi;
  for (int a = 0; a < rows_; ++a) {
    for (int b = 0; b < cols_; ++b) {
      if (a == 0 && b == 0) continue;  // the consensus direction, eigenvalue 1
      std::complex<double> sum = 1.0;
      for (const auto& [dr, dc] : shifts_) {
        const double phase = -two_pi * (static_cast<double>(a * dr) / rows_ + static_cast<double>(b * dc) / cols_);
        sum += std::polar(1.0, phase);
      }
      second = std::max(second, std::abs(sum) * weight());
    }
  }
  return second;
}

std::string MixingGraph::describe() const {
  std::string shape = topology_ == Topology::torus ? fmt::format("torus {} x {}", rows_, cols_)
                                                   : fmt::format("{}", topology_name(topology_));
  return fmt::format("{} of {} ({}, weights 1/{}, |lambda_2| {:.4f}, spectral gap {:.4f})", shape, world_,
                     symmetric() ? "symmetric" : "directed, circulant doubly stochastic", shifts_.size() + 1,
                     second_eigenvalue(), spectral_gap());
}

std::string MixingGraph::describe_in_full(int max_world) const {
  std::string s = describe();
  const int listed = std::min(world_, std::max(max_world, 1));
  for (int i = 0; i < listed; ++i) {
    s += fmt::format("\n  rank {}: receives from {}, sends to {}", i, in_neighbours(i), out_neighbours(i));
  }
  if (listed < world_) s += fmt::format("\n  ... ({} ranks)", world_);
  if (world_ > max_world) return s;
  s += "\n  W (row i: the weight of each replica j in replica i's next one):";
  const std::vector<double> w = matrix();
  for (int i = 0; i < world_; ++i) {
    s += "\n   ";
    for (int j = 0; j < world_; ++j) {
      const double v = w[static_cast<size_t>(i * world_ + j)];
      s += v == 0 ? "     0" : fmt::format(" {:5.3f}", v);
    }
  }
  return s;
}

}  // namespace braid::parallel::gossip
