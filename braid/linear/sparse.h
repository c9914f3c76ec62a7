// Sparse examples for linear models: a CSR matrix of features with one label
// per row (labels are +1/-1 for classification, real for regression).
//
// Values are stored in f32 (as libsvm files give them) and every solver
// computes in f64: objectives are compared with LIBLINEAR to 1e-4 relative,
// which f32 accumulation over 10^5 rows would not reach.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace braid::linear_model {

struct SparseMatrix {
  int64_t cols = 0;
  std::vector<int64_t> start{0};  // row r is [start[r], start[r + 1])
  std::vector<int32_t> index;     // column of each nonzero, increasing within a row
  std::vector<float> value;

  struct Row {
    std::span<const int32_t> index;
    std::span<const float> value;
  };
  int64_t rows() const { return static_cast<int64_t>(start.size()) - 1; }
  int64_t nonzeros() const { return static_cast<int64_t>(value.size()); }
  Row row(int64_t r) const {
    const auto b = static_cast<size_t>(start[r]), n = static_cast<size_t>(start[r + 1] - start[r]);
    return {std::span(index).subspan(b, n), std::span(value).subspan(b, n)};
  }
  // Appends a row; `index` must be increasing and below `cols` (cols grows
  // to fit when it is 0-initialised by the caller building a matrix).
  void append(std::span<const int32_t> idx, std::span<const float> val);
  // Column-major view as the CSR of the transpose (row j = column j).
  SparseMatrix transpose() const;
  // Rows `rows`, in that order.
  SparseMatrix select_rows(std::span<const int64_t> rows) const;
  // Columns [begin, end), renumbered from 0; every row kept (possibly empty).
  SparseMatrix column_block(int64_t begin, int64_t end) const;
  // Squared Euclidean norm of each row.
  std::vector<double> row_norms_squared() const;
};

struct Examples {
  SparseMatrix x;
  std::vector<double> y;
  int64_t size() const { return x.rows(); }
  Examples select(std::span<const int64_t> rows) const;
};

// A libsvm file. `features`: 0 = the largest index in the file, else at
// least that many columns (so a test file uses the training file's width).
// `binary`: labels must take two values; the larger becomes +1, the smaller
// -1 (a 0/1 or 1/2 file trains a classifier); false keeps labels as read.
Examples read_libsvm(const std::string& path, int64_t features = 0, bool binary = true);
// Writes examples in the libsvm format (1-based indices), for LIBLINEAR.
void write_libsvm(const Examples& data, const std::string& path);

// Rows [k * n / parts, (k + 1) * n / parts): part k of `parts` contiguous parts.
std::pair<int64_t, int64_t> part_range(int64_t n, int parts, int k);

// The sparsity figures of the Hogwild! paper (Niu et al. 2011) for the
// hypergraph whose edges are the examples' sets of nonzero features:
//   omega: the largest number of features in one example (max |e|)
//   delta: the largest fraction of examples that share one feature
//          (max_v |{e : v in e}| / |E|)
//   rho:   the largest fraction of examples that share a feature with one
//          example (max_e |{e' : e' meets e}| / |E|); exact below
//          `rho_budget` operations, else the maximum over a sample of rows
//          (rho_sampled says so)
struct SparsityStats {
  int64_t rows = 0, cols = 0, nonzeros = 0;
  int64_t omega = 0;
  double delta = 0, rho = 0;
  bool rho_sampled = false;
};
SparsityStats sparsity_stats(const SparseMatrix& x, int64_t rho_budget = int64_t{1} << 28);

}  // namespace braid::linear_model
