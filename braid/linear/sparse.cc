#include "braid/linear/sparse.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "braid/base/error.h"
#include "braid/base/rng.h"
#include "braid/data/libsvm.h"

namespace braid::linear_model {

void SparseMatrix::append(std::span<const int32_t> idx, std::span<const float> val) {
  BRAID_CHECK(idx.size() == val.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    BRAID_CHECK(idx[k] >= 0 && (k == 0 || idx[k] > idx[k - 1]), "column indices must increase");
    cols = std::max<int64_t>(cols, int64_t{idx[k]} + 1);
  }
  index.insert(index.end(), idx.begin(), idx.end());
  value.insert(value.end(), val.begin(), val.end());
  start.push_back(static_cast<int64_t>(index.size()));
}

SparseMatrix SparseMatrix::transpose() const {
  SparseMatrix t;
  t.cols = rows();
  t.start.assign(static_cast<size_t>(cols) + 1, 0);
  for (int32_t c : index) ++t.start[static_cast<size_t>(c) + 1];
  for (size_t j = 0; j < static_cast<size_t>(cols); ++j) t.start[j + 1] += t.start[j];
  t.index.resize(index.size());
  t.value.resize(value.size());
  std::vector<int64_t> next(t.start.begin(), t.start.end() - 1);
  for (int64_t r = 0; r < rows(); ++r) {
    for (int64_t k = start[r]; k < start[r + 1]; ++k) {
      const auto at = static_cast<size_t>(next[static_cast<size_t>(index[k])]++);
      t.index[at] = static_cast<int32_t>(r);
      t.value[at] = value[k];
    }
  }
  return t;
}

SparseMatrix SparseMatrix::select_rows(std::span<const int64_t> rows_wanted) const {
  SparseMatrix s;
  s.cols = cols;
  for (int64_t r : rows_wanted) {
    BRAID_CHECK(r >= 0 && r < rows(), "row {} of {}", r, rows());
    const Row w = row(r);
    s.index.insert(s.index.end(), w.index.begin(), w.index.end());
    s.value.insert(s.value.end(), w.value.begin(), w.value.end());
    s.start.push_back(static_cast<int64_t>(s.index.size()));
  }
  return s;
}

SparseMatrix SparseMatrix::column_block(int64_t begin, int64_t end) const {
  BRAID_CHECK(0 <= begin && begin <= end && end <= cols);
  SparseMatrix s;
  s.cols = end - begin;
  for (int64_t r = 0; r < rows(); ++r) {
    const Row w = row(r);
    const auto lo = std::lower_bound(w.index.begin(), w.index.end(), begin) - w.index.begin();
    const auto hi = std::lower_bound(w.index.begin(), w.index.end(), end) - w.index.begin();
    for (auto k = lo; k < hi; ++k) {
      s.index.push_back(static_cast<int32_t>(w.index[k] - begin));
      s.value.push_back(w.value[k]);
    }
    s.start.push_back(static_cast<int64_t>(s.index.size()));
  }
  return s;
}

std::vector<double> SparseMatrix::row_norms_squared() const {
  std::vector<double> n(static_cast<size_t>(rows()));
  for (int64_t r = 0; r < rows(); ++r) {
    double s = 0;
    for (int64_t k = start[r]; k < start[r + 1]; ++k) s += double{value[k]} * value[k];
    n[static_cast<size_t>(r)] = s;
  }
  return n;
}

Examples Examples::select(std::span<const int64_t> rows) const {
  Examples e{x.select_rows(rows), {}};
  for (int64_t r : rows) e.y.push_back(y[static_cast<size_t>(r)]);
  return e;
}

Examples read_libsvm(const std::string& path, int64_t features, bool binary) {
  const data::LibsvmDataset file(path, {.features = features});
  Examples e;
  e.x.cols = file.features();
  e.x.index.reserve(static_cast<size_t>(file.nonzeros()));
  e.x.value.reserve(static_cast<size_t>(file.nonzeros()));
  for (int64_t r = 0; r < file.size(); ++r) {
    const auto row = file.row(r);
    e.x.index.insert(e.x.index.end(), row.indices.begin(), row.indices.end());
    e.x.value.insert(e.x.value.end(), row.values.begin(), row.values.end());
    e.x.start.push_back(static_cast<int64_t>(e.x.index.size()));
    e.y.push_back(row.label);
  }
  if (binary) {
    const auto& classes = file.classes();
    if (classes.size() != 2)
      fail<ValueError>("{}: a binary problem needs exactly two labels, the file has {}", path, classes.size());
    for (double& y : e.y) y = y == classes[1] ? 1.0 : -1.0;
  }
  return e;
}

void write_libsvm(const Examples& data, const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "w"), std::fclose);
  if (!f) fail<IoError>("cannot write {}", path);
  for (int64_t r = 0; r < data.size(); ++r) {
    std::fprintf(f.get(), "%.17g", data.y[static_cast<size_t>(r)]);
    const auto row = data.x.row(r);
    for (size_t k = 0; k < row.index.size(); ++k)
      std::fprintf(f.get(), " %d:%.9g", row.index[k] + 1, double{row.value[k]});
    std::fputc('\n', f.get());
  }
  if (std::ferror(f.get())) fail<IoError>("writing {} failed", path);
}

std::pair<int64_t, int64_t> part_range(int64_t n, int parts, int k) {
  return {n * k / parts, n * (k + 1) / parts};
}

SparsityStats sparsity_stats(const SparseMatrix& x, int64_t rho_budget) {
  SparsityStats s{.rows = x.rows(), .cols = x.cols, .nonzeros = x.nonzeros()};
  if (x.rows() == 0) return s;
  const SparseMatrix t = x.transpose();
  int64_t max_degree = 0;
  for (int64_t j = 0; j < t.rows(); ++j) max_degree = std::max(max_degree, t.start[j + 1] - t.start[j]);
  s.delta = static_cast<double>(max_degree) / static_cast<double>(x.rows());
  // Cost of the exact rho: every row walks the columns of its features.
  int64_t cost = 0;
  for (int64_t r = 0; r < x.rows(); ++r) {
    s.omega = std::max(s.omega, x.start[r + 1] - x.start[r]);
    for (int32_t c : x.row(r).index) cost += t.start[c + 1] - t.start[c];
  }
  std::vector<int64_t> rows(static_cast<size_t>(x.rows()));
  for (int64_t r = 0; r < x.rows(); ++r) rows[static_cast<size_t>(r)] = r;
  if (cost > rho_budget) {
    // A sample sized to the budget: rows drawn without replacement.
    const auto keep = std::max<int64_t>(1, x.rows() * rho_budget / cost);
    Generator g(1);
    for (int64_t i = 0; i < keep; ++i) std::swap(rows[i], rows[i + g.below(x.rows() - i)]);
    rows.resize(static_cast<size_t>(keep));
    s.rho_sampled = true;
  }
  std::vector<int64_t> seen(static_cast<size_t>(x.rows()), -1);
  int64_t max_meet = 0;
  for (int64_t r : rows) {
    int64_t meet = 0;
    for (int32_t c : x.row(r).index)
      for (int64_t k = t.start[c]; k < t.start[c + 1]; ++k) {
        auto& mark = seen[static_cast<size_t>(t.index[k])];
        if (mark != r) mark = r, ++meet;
      }
    max_meet = std::max(max_meet, meet);
  }
  s.rho = static_cast<double>(max_meet) / static_cast<double>(x.rows());
  return s;
}

}  // namespace braid::linear_model
