// Gossip topologies and their mixing matrices (docs/aggregation.md, "D-PSGD").
//
// Every topology here is a Cayley graph of the group Z_rows x Z_cols: rank
// i sits at (i / cols, i % cols) and receives from i - d for each shift d of
// a fixed set D (sends to i + d). The mixing matrix takes the same weight
// 1 / (|D| + 1) from itself and from each in-neighbour:
//
//   W_ij = 1 / (|D| + 1)   for j = i or j = i - d, d in D;   0 otherwise
//
// so every row and every column sums to 1 (doubly stochastic), and W is
// symmetric when D = -D (ring, torus). The exponential graph's D = {2^0, 2^1,
// ...} is directed: W is then the circulant doubly stochastic matrix of that
// pattern, not symmetric, but still normal (all such matrices are), so its
// consensus rate is the modulus of an eigenvalue as for the symmetric ones.
//
// Eigenvalues come from the group's characters (a 2-D DFT of the pattern):
// for a in Z_rows, b in Z_cols,
//   lambda(a, b) = (1 + sum_{d in D} exp(-2 pi i (a d_row / rows + b d_col / cols))) / (|D| + 1)
// lambda(0, 0) = 1 (consensus); |lambda_2| = max over the others =
// ||W - 11^T / P||_2, the factor by which one mixing step at least shrinks
// the replicas' distance from their mean. Spectral gap = 1 - |lambda_2|.
// Cost: rows * cols * |D| complex terms.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace braid::parallel::gossip {

enum class Topology { ring, torus, exponential };

Topology parse_topology(std::string_view name);  // ConfigError for an unknown name
std::string_view topology_name(Topology t);

// rows x cols = world with rows the largest divisor of world <= sqrt(world)
// (a prime world gives 1 x world: a ring).
int auto_torus_rows(int world);

class MixingGraph {
 public:
  // `torus_rows` (torus only): 0 picks auto_torus_rows; otherwise it must
  // divide `world` (ConfigError).
  MixingGraph(Topology topology, int world, int torus_rows = 0);

  Topology topology() const { return topology_; }
  int world() const { return world_; }
  int rows() const { return rows_; }
  int cols() const { return cols_; }
  // D as (row shift, col shift), each in [0, rows) x [0, cols), distinct, not (0, 0).
  const std::vector<std::pair<int, int>>& shifts() const { return shifts_; }
  // Every nonzero entry of W (self included).
  double weight() const { return 1.0 / static_cast<double>(shifts_.size() + 1); }
  bool symmetric() const;

  // Ranks `rank` receives from (rank - d) and sends to (rank + d), in shift order.
  std::vector<int> in_neighbours(int rank) const;
  std::vector<int> out_neighbours(int rank) const;
  // [world * world] row-major: W_ij is the weight of replica j in replica i's next one.
  std::vector<double> matrix() const;
  // |lambda_2| (0 for one rank) and 1 - |lambda_2|.
  double second_eigenvalue() const;
  double spectral_gap() const { return 1.0 - second_eigenvalue(); }

  // "ring of 4 (weights 1/3, |lambda_2| 0.3333, spectral gap 0.6667)"
  std::string describe() const;
  // describe(), each rank's neighbours and, for worlds up to `max_world`, W
  // itself: several lines for the log.
  std::string describe_in_full(int max_world = 8) const;

 private:
  int shift_rank(int rank, std::pair<int, int> d, int sign) const;

  Topology topology_;
  int world_, rows_, cols_;
  std::vector<std::pair<int, int>> shifts_;
};

}  // namespace braid::parallel::gossip
