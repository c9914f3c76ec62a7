#include "braid/ps/updater.h"

#include <cmath>

#include "braid/base/error.h"

namespace braid::ps {

namespace {

class Sgd final : public Updater {
 public:
  explicit Sgd(UpdaterOptions o) : o_(o) {}
  int state_per_weight() const override { return 0; }
  void apply(std::span<float> w, std::span<const float> g, std::span<float>, double lr, int64_t) const override {
    const float a = static_cast<float>(lr), wd = static_cast<float>(o_.weight_decay);
    for (size_t i = 0; i < w.size(); ++i) w[i] -= a * (g[i] + wd * w[i]);
  }

 private:
  UpdaterOptions o_;
};

class Momentum final : public Updater {
 public:
  explicit Momentum(UpdaterOptions o) : o_(o) {}
  int state_per_weight() const override { return 1; }
  void apply(std::span<float> w, std::span<const float> g, std::span<float> v, double lr,
             int64_t step) const override {
    const float a = static_cast<float>(lr), m = static_cast<float>(o_.momentum);
    const float wd = static_cast<float>(o_.weight_decay);
    for (size_t i = 0; i < w.size(); ++i) {
      const float d = g[i] + wd * w[i];
      v[i] = step == 1 ? d : m * v[i] + d;  // PyTorch starts the buffer at the first gradient
      w[i] -= a * v[i];
    }
  }

 private:
  UpdaterOptions o_;
};

class AdaGrad final : public Updater {
 public:
  explicit AdaGrad(UpdaterOptions o) : o_(o) {}
  int state_per_weight() const override { return 1; }
  void apply(std::span<float> w, std::span<const float> g, std::span<float> h, double lr,
             int64_t) const override {
    const float a = static_cast<float>(lr), wd = static_cast<float>(o_.weight_decay);
    constexpr float eps = 1e-10f;  // PyTorch's Adagrad default
    for (size_t i = 0; i < w.size(); ++i) {
      const float d = g[i] + wd * w[i];
      h[i] += d * d;
      w[i] -= a * d / (std::sqrt(h[i]) + eps);
    }
  }

 private:
  UpdaterOptions o_;
};

class Adam final : public Updater {
 public:
  explicit Adam(UpdaterOptions o) : o_(o) {}
  int state_per_weight() const override { return 2; }
  void apply(std::span<float> w, std::span<const float> g, std::span<float> state, double lr,
             int64_t step) const override {
    const size_t n = w.size();
    float* m = state.data();
    float* v = state.data() + n;
    const float b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
    const float c1 = static_cast<float>(1 - std::pow(o_.beta1, static_cast<double>(step)));
    const float c2 = static_cast<float>(std::sqrt(1 - std::pow(o_.beta2, static_cast<double>(step))));
    const float a = static_cast<float>(lr), eps = static_cast<float>(o_.eps), wd = static_cast<float>(o_.weight_decay);
    for (size_t i = 0; i < n; ++i) {
      const float d = g[i] + wd * w[i];
      m[i] = b1 * m[i] + (1 - b1) * d;
      v[i] = b2 * v[i] + (1 - b2) * d * d;
      w[i] -= a * (m[i] / c1) / (std::sqrt(v[i]) / c2 + eps);
    }
  }

 private:
  UpdaterOptions o_;
};

}  // namespace

std::unique_ptr<Updater> make_updater(const UpdaterOptions& o) {
  if (o.name == "sgd") return std::make_unique<Sgd>(o);
  if (o.name == "momentum") return std::make_unique<Momentum>(o);
  if (o.name == "adagrad") return std::make_unique<AdaGrad>(o);
  if (o.name == "adam") return std::make_unique<Adam>(o);
  fail<ConfigError>("ps.updater = {}: expected sgd, momentum, adagrad or adam", o.name);
}

}  // namespace braid::ps
