// LIBLINEAR's train() timed on a braid linear task, without its file
// parsing, so bench/linear/linear_bench.py compares solver against solver:
//   liblinear_time SPEC LOSS C SOLVER EPS [PENALTY]
// SPEC as `braid linear --data`; SOLVER is LIBLINEAR's -s number. Prints one
// JSON object: seconds in train(), braid's primal objective of LIBLINEAR's w
// (l2 or l1 = 1 / (C n)), and the test score.
#include <linear.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "braid/linear/datasets.h"
#include "braid/linear/objective.h"

namespace {
void quiet(const char*) {}
}  // namespace

int main(int argc, char** argv) {
  using namespace braid::linear_model;
  if (argc < 6) {
    std::fprintf(stderr, "usage: liblinear_time SPEC LOSS C SOLVER EPS [l2|l1]\n");
    return 2;
  }
  const Loss loss = parse_loss(argv[2]);
  const double c = std::atof(argv[3]);
  const int solver = std::atoi(argv[4]);
  const double eps = std::atof(argv[5]);
  const bool l1 = argc > 6 && std::string(argv[6]) == "l1";
  const auto [train, test] = load_task(argv[1], "", is_classification(loss));

  // LIBLINEAR's layout: per row, 1-based (index, value) pairs ending in index -1.
  std::vector<feature_node> nodes;
  nodes.reserve(static_cast<size_t>(train.x.nonzeros() + train.size()));
  std::vector<size_t> row_at;
  for (int64_t r = 0; r < train.size(); ++r) {
    row_at.push_back(nodes.size());
    const auto row = train.x.row(r);
    for (size_t k = 0; k < row.index.size(); ++k) nodes.push_back({row.index[k] + 1, row.value[k]});
    nodes.push_back({-1, 0});
  }
  std::vector<feature_node*> rows;
  for (size_t at : row_at) rows.push_back(&nodes[at]);
  std::vector<double> y = train.y;
  problem prob{static_cast<int>(train.size()), static_cast<int>(train.x.cols), y.data(), rows.data(), -1};
  parameter param{solver, eps, c, 0, nullptr, nullptr, 0.0, nullptr};
  if (const char* err = check_parameter(&prob, &param)) {
    std::fprintf(stderr, "liblinear: %s\n", err);
    return 1;
  }
  set_print_string_function(quiet);
  const auto start = std::chrono::steady_clock::now();
  model* m = ::train(&prob, &param);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // w scores LIBLINEAR's first label: flip it when that label is -1.
  std::vector<double> w(static_cast<size_t>(train.x.cols), 0.0);
  const double sign = m->nr_class == 2 && m->label[0] < 0 ? -1 : 1;
  for (int j = 0; j < m->nr_feature; ++j) w[static_cast<size_t>(j)] = sign * m->w[j];
  free_and_destroy_model(&m);
  Problem p{.loss = loss, .reg = {}};
  (l1 ? p.reg.l1 : p.reg.l2) = 1 / (c * static_cast<double>(train.size()));
  std::printf("{\"solver\": \"liblinear-s%d\", \"eps\": %g, \"seconds\": %.6f, \"primal\": %.17g, \"test_score\": %.6f}\n",
              solver, eps, seconds, primal_objective(p, train, w), score(loss, test, w));
  return 0;
}
