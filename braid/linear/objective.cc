#include "braid/linear/objective.h"

#include <cmath>
#include <limits>

#include "braid/base/error.h"

namespace braid::linear_model {

Loss parse_loss(const std::string& name) {
  if (name == "squared") return Loss::squared;
  if (name == "logistic") return Loss::logistic;
  if (name == "hinge") return Loss::hinge;
  if (name == "squared_hinge") return Loss::squared_hinge;
  fail<ConfigError>("unknown loss '{}' (squared, logistic, hinge, squared_hinge)", name);
}

std::string loss_name(Loss loss) {
  switch (loss) {
    case Loss::squared: return "squared";
    case Loss::logistic: return "logistic";
    case Loss::hinge: return "hinge";
    case Loss::squared_hinge: return "squared_hinge";
  }
  return "?";
}

bool is_classification(Loss loss) { return loss != Loss::squared; }
bool is_smooth(Loss loss) { return loss != Loss::hinge; }

double loss_value(Loss loss, double y, double z) {
  switch (loss) {
    case Loss::squared: return (y - z) * (y - z);
    case Loss::logistic: {
      const double m = -y * z;  // log(1 + e^m) without overflow
      return m > 0 ? m + std::log1p(std::exp(-m)) : std::log1p(std::exp(m));
    }
    case Loss::hinge: return std::max(0.0, 1 - y * z);
    case Loss::squared_hinge: {
      const double h = std::max(0.0, 1 - y * z);
      return h * h;
    }
  }
  return 0;
}

double loss_derivative(Loss loss, double y, double z) {
  switch (loss) {
    case Loss::squared: return 2 * (z - y);
    case Loss::logistic: {
      const double m = y * z;  // -y / (1 + e^{yz}), stable both ways
      return m > 0 ? -y * std::exp(-m) / (1 + std::exp(-m)) : -y / (1 + std::exp(m));
    }
    case Loss::hinge: return y * z < 1 ? -y : 0;
    case Loss::squared_hinge: return y * z < 1 ? -2 * y * (1 - y * z) : 0;
  }
  return 0;
}

double curvature_bound(Loss loss) {
  switch (loss) {
    case Loss::squared: return 2;
    case Loss::logistic: return 0.25;
    case Loss::hinge: return std::numeric_limits<double>::infinity();
    case Loss::squared_hinge: return 2;
  }
  return 0;
}

void margins(const SparseMatrix& x, std::span<const double> w, std::span<double> z) {
  for (int64_t r = 0; r < x.rows(); ++r) {
    double s = 0;
    for (int64_t k = x.start[r]; k < x.start[r + 1]; ++k) s += x.value[k] * w[x.index[k]];
    z[r] = s;
  }
}

double loss_sum(Loss loss, std::span<const double> y, std::span<const double> z) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += loss_value(loss, y[i], z[i]);
  return s;
}

double regularizer_value(const Regularizer& reg, std::span<const double> w) {
  double sq = 0, abs = 0;
  for (double v : w) sq += v * v, abs += std::abs(v);
  return reg.l2 / 2 * sq + reg.l1 * abs;
}

double primal_objective(const Problem& p, const Examples& data, std::span<const double> w) {
  std::vector<double> z(static_cast<size_t>(data.size()));
  margins(data.x, w, z);
  return loss_sum(p.loss, data.y, z) / static_cast<double>(data.size()) + regularizer_value(p.reg, w);
}

double smooth_objective(const Problem& p, const Examples& data, std::span<const double> w, std::span<double> grad) {
  BRAID_CHECK(p.reg.l1 == 0, "the smooth objective has no l1 term");
  const auto n = static_cast<double>(data.size());
  std::vector<double> z(static_cast<size_t>(data.size()));
  margins(data.x, w, z);
  double f = 0;
  for (size_t j = 0; j < grad.size(); ++j) grad[j] = p.reg.l2 * w[j];
  for (int64_t r = 0; r < data.size(); ++r) {
    const double y = data.y[r];
    f += loss_value(p.loss, y, z[r]);
    const double d = loss_derivative(p.loss, y, z[r]) / n;
    for (int64_t k = data.x.start[r]; k < data.x.start[r + 1]; ++k) grad[data.x.index[k]] += d * data.x.value[k];
  }
  return f / n + regularizer_value(p.reg, w);
}

double score(Loss loss, const Examples& data, std::span<const double> w) {
  if (data.size() == 0) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> z(static_cast<size_t>(data.size()));
  margins(data.x, w, z);
  double s = 0;
  for (int64_t r = 0; r < data.size(); ++r) {
    if (is_classification(loss)) s += data.y[r] * z[r] > 0 ? 1 : 0;
    else s += (data.y[r] - z[r]) * (data.y[r] - z[r]);
  }
  s /= static_cast<double>(data.size());
  return is_classification(loss) ? s : std::sqrt(s);
}

std::string score_name(Loss loss) { return is_classification(loss) ? "accuracy" : "rmse"; }

}  // namespace braid::linear_model
