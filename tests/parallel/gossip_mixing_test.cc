// Gossip topologies (parallel/gossip/mixing.h): every mixing matrix doubly
// stochastic, symmetric where the graph is undirected, and |lambda_2| from
// the characters against closed forms and against ||W - 11^T/P||_2 found by
// power iteration on the dense matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "braid/base/error.h"
#include "braid/base/rng.h"
#include "braid/parallel/gossip/mixing.h"

namespace braid::parallel::gossip {
namespace {

// ||W - 11^T/P||_2 by power iteration on M = A^T A, A = W - 11^T/P.
double spectral_norm_off_consensus(const std::vector<double>& w, int p) {
  const auto n = static_cast<size_t>(p);
  std::vector<double> a(w);
  for (double& v : a) v -= 1.0 / p;
  std::vector<double> x(n), y(n), z(n);
  Generator g(5);
  for (double& v : x) v = g.normal();
  double sigma2 = 0;
  for (int it = 0; it < 3000; ++it) {
    for (size_t i = 0; i < n; ++i) {  // y = A x
      y[i] = 0;
      for (size_t j = 0; j < n; ++j) y[i] += a[i * n + j] * x[j];
    }
    for (size_t j = 0; j < n; ++j) {  // z = A^T y
      z[j] = 0;
      for (size_t i = 0; i < n; ++i) z[j] += a[i * n + j] * y[i];
    }
    double norm = 0, dot = 0;
    for (size_t i = 0; i < n; ++i) norm += z[i] * z[i], dot += x[i] * z[i];
    norm = std::sqrt(norm);
    if (norm < 1e-300) return 0;  // A = 0: exact averaging in one step
    sigma2 = dot;                 // Rayleigh quotient of the unit x
    for (size_t i = 0; i < n; ++i) x[i] = z[i] / norm;
  }
  return std::sqrt(std::max(sigma2, 0.0));
}

std::vector<MixingGraph> graphs_up_to(int most) {
  std::vector<MixingGraph> out;
  for (int p = 1; p <= most; ++p) {
    out.emplace_back(Topology::ring, p);
    out.emplace_back(Topology::exponential, p);
    for (int rows = 1; rows <= p; ++rows) {
      if (p % rows == 0) out.emplace_back(Topology::torus, p, rows);
    }
  }
  return out;
}

TEST(GossipMixing, EveryMatrixIsDoublyStochasticAndUndirectedOnesSymmetric) {
  for (const MixingGraph& g : graphs_up_to(16)) {
    const int p = g.world();
    const std::vector<double> w = g.matrix();
    for (int i = 0; i < p; ++i) {
      double row = 0, col = 0;
      for (int j = 0; j < p; ++j) {
        const double v = w[static_cast<size_t>(i * p + j)];
        ASSERT_GE(v, 0.0);
        row += v, col += w[static_cast<size_t>(j * p + i)];
      }
      ASSERT_NEAR(row, 1.0, 1e-15) << g.describe() << " row " << i;
      ASSERT_NEAR(col, 1.0, 1e-15) << g.describe() << " column " << i;
    }
    bool symmetric = true;
    for (int i = 0; i < p; ++i) {
      for (int j = 0; j < p; ++j) symmetric &= w[static_cast<size_t>(i * p + j)] == w[static_cast<size_t>(j * p + i)];
    }
    EXPECT_EQ(symmetric, g.symmetric()) << g.describe();
    if (g.topology() != Topology::exponential) {
      EXPECT_TRUE(symmetric) << g.describe();
    }
    // Receiving from j is j sending to i; neighbours distinct and not self.
    for (int i = 0; i < p; ++i) {
      const std::vector<int> in = g.in_neighbours(i);
      EXPECT_EQ(in.size(), g.shifts().size());
      for (int j : in) {
        EXPECT_NE(j, i);
        EXPECT_EQ(std::count(in.begin(), in.end(), j), 1);
        const std::vector<int> out = g.out_neighbours(j);
        EXPECT_NE(std::find(out.begin(), out.end(), i), out.end()) << g.describe() << ": " << j << " -> " << i;
      }
    }
  }
  // The exponential graph is undirected only while 2^k and -2^k coincide.
  EXPECT_TRUE(MixingGraph(Topology::exponential, 3).symmetric());
  EXPECT_FALSE(MixingGraph(Topology::exponential, 4).symmetric());
  EXPECT_EQ(MixingGraph(Topology::exponential, 9).shifts().size(), 4u);  // 1, 2, 4, 8
}

TEST(GossipMixing, RingGapMatchesTheClosedForm) {
  EXPECT_EQ(MixingGraph(Topology::ring, 1).second_eigenvalue(), 0.0);
  EXPECT_NEAR(MixingGraph(Topology::ring, 2).second_eigenvalue(), 0.0, 1e-15);  // weights 1/2: averaged at once
  for (int p = 3; p <= 64; ++p) {
    const MixingGraph g(Topology::ring, p);
    EXPECT_DOUBLE_EQ(g.weight(), 1.0 / 3);
    const double lambda2 = (1 + 2 * std::cos(2 * std::numbers::pi / p)) / 3;
    EXPECT_NEAR(g.second_eigenvalue(), std::abs(lambda2), 1e-12) << p;
    EXPECT_NEAR(g.spectral_gap(), 1 - std::abs(lambda2), 1e-12) << p;
  }
}

TEST(GossipMixing, TorusGapMatchesTheClosedForm) {
  // 3 <= rows <= cols: degree 4, lambda(a, b) = (1 + 2 cos(2 pi a/R) + 2 cos(2 pi b/C)) / 5,
  // largest off consensus at (0, 1).
  for (auto [r, c] : {std::pair{3, 3}, {3, 4}, {4, 4}, {4, 6}, {5, 5}, {3, 7}}) {
    const MixingGraph g(Topology::torus, r * c, r);
    EXPECT_EQ(g.rows(), r);
    EXPECT_NEAR(g.second_eigenvalue(), (3 + 2 * std::cos(2 * std::numbers::pi / c)) / 5, 1e-12) << r << "x" << c;
  }
  // Two rows: up = down, degree 3: (2 + 2 cos(2 pi / C)) / 4 for C >= 4.
  EXPECT_NEAR(MixingGraph(Topology::torus, 10, 2).second_eigenvalue(),
              (2 + 2 * std::cos(2 * std::numbers::pi / 5)) / 4, 1e-12);
  // One row is a ring.
  EXPECT_NEAR(MixingGraph(Topology::torus, 7).second_eigenvalue(), MixingGraph(Topology::ring, 7).second_eigenvalue(),
              1e-15);
}

TEST(GossipMixing, GapFromCharactersEqualsThePowerIterationNorm) {
  for (const MixingGraph& g : graphs_up_to(16)) {
    EXPECT_NEAR(g.second_eigenvalue(), spectral_norm_off_consensus(g.matrix(), g.world()), 1e-9) << g.describe();
  }
}

TEST(GossipMixing, TorusShapeAndNames) {
  EXPECT_EQ(auto_torus_rows(1), 1);
  EXPECT_EQ(auto_torus_rows(6), 2);
  EXPECT_EQ(auto_torus_rows(8), 2);
  EXPECT_EQ(auto_torus_rows(9), 3);
  EXPECT_EQ(auto_torus_rows(12), 3);
  EXPECT_EQ(auto_torus_rows(7), 1);
  EXPECT_THROW(MixingGraph(Topology::torus, 6, 4), ConfigError);
  EXPECT_THROW(parse_topology("star"), ConfigError);
  EXPECT_EQ(parse_topology("exponential"), Topology::exponential);
  const MixingGraph g(Topology::torus, 6);
  EXPECT_EQ(g.rows(), 2);
  EXPECT_EQ(g.cols(), 3);
  EXPECT_EQ(g.in_neighbours(4), (std::vector<int>{1, 3, 5}));  // (1,1): up/down fold to row 0, left, right
  const std::string full = g.describe_in_full();
  for (const char* part : {"torus 2 x 3 of 6", "spectral gap", "rank 4: receives from [1, 3, 5]", "W (row i"}) {
    EXPECT_NE(full.find(part), std::string::npos) << part << " in:\n" << full;
  }
  EXPECT_EQ(MixingGraph(Topology::ring, 20).describe_in_full().find("W (row i"), std::string::npos);
}

}  // namespace
}  // namespace braid::parallel::gossip
