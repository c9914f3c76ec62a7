// Small problems shared by the linear-model tests, and LIBLINEAR as the
// independent reference: liblinear-train's model on a libsvm file, read back
// as a weight vector in braid's sign convention (+1 = the larger label).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "braid/base/rng.h"
#include "braid/linear/sparse.h"

namespace braid::linear_model::testing {

inline const char* kHeartScale = "/usr/share/doc/liblinear-tools/examples/heart_scale";

// rows x cols, about k nonzeros per row with values in [-1, 1]; labels from
// a hidden model (sign for classification, value plus noise for regression).
inline Examples random_problem(int64_t rows, int64_t cols, int k, bool regression, uint64_t seed) {
  Generator g(seed);
  std::vector<double> truth(static_cast<size_t>(cols));
  for (double& v : truth) v = g.normal();
  Examples e;
  e.x.cols = cols;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> idx;
    for (int i = 0; i < k; ++i) idx.push_back(static_cast<int32_t>(g.below(static_cast<uint64_t>(cols))));
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    std::vector<float> val;
    double z = 0;
    for (int32_t j : idx) val.push_back(static_cast<float>(2 * g.uniform_f64() - 1)), z += val.back() * truth[j];
    e.x.append(idx, val);
    e.x.cols = cols;
    const double noisy = z + 0.3 * g.normal();
    e.y.push_back(regression ? noisy : (noisy >= 0 ? 1.0 : -1.0));
  }
  return e;
}

// Trains LIBLINEAR (`-s solver -c C`, no bias, tolerance `eps`) on `file`;
// returns w over `cols` features, signed so that w . x > 0 means +1.
inline std::vector<double> liblinear_weights(const std::string& file, const std::string& dir, int solver, double c,
                                             double eps, int64_t cols, const std::string& extra = "") {
  const std::string model = dir + "/model";
  const std::string cmd = fmt::format("liblinear-train -q -s {} -c {:.17g} -e {:.17g} {} {} {} 2>&1", solver, c, eps,
                                      extra, file, model);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(model);
  std::string line;
  double sign = 1;
  std::vector<double> w;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "label") {
      double first = 0, second = 0;
      ls >> first >> second;
      sign = first > second ? 1 : -1;  // LIBLINEAR's w scores its first label
    } else if (key == "w") {
      double v = 0;
      while (in >> v) w.push_back(sign * v);
    }
  }
  EXPECT_LE(static_cast<int64_t>(w.size()), cols) << "LIBLINEAR model of " << file;
  w.resize(static_cast<size_t>(cols), 0.0);
  return w;
}

}  // namespace braid::linear_model::testing
