#include "braid/train/pbt.h"

#include <algorithm>
#include <cmath>

#include "braid/base/error.h"
#include "braid/base/json_number.h"

namespace braid::train {

nlohmann::json to_json(const Report& r) {
  return {{"member", r.member}, {"round", r.round},  {"examples", r.examples},
          {"score", r.score},   {"hyper", r.hyper}, {"checkpoint", r.checkpoint}};
}

Report report_from_json(const nlohmann::json& j) {
  try {
    return {.member = json_integer<int>(j.at("member")),
            .round = json_integer<int64_t>(j.at("round")),
            .examples = json_integer<int64_t>(j.at("examples")),
            .score = j.at("score").get<double>(),
            .hyper = j.at("hyper").get<Hyper>(),
            .checkpoint = j.at("checkpoint").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    fail<ValueError>("pbt: malformed member report {}: {}", j.dump(), e.what());
  }
}

void LocalBoard::publish(const Report& report) {
  std::lock_guard lock(mu_);
  reports_[report.member] = report;
}

std::vector<Report> LocalBoard::latest() {
  std::lock_guard lock(mu_);
  std::vector<Report> out;
  for (const auto& [member, r] : reports_) out.push_back(r);
  return out;
}

namespace {

double clamp_to(const HyperRange& r, double v) {
  v = std::clamp(v, r.lo, r.hi);
  if (r.power_of_two) {
    v = std::exp2(std::round(std::log2(v)));
    // Rounding may step just outside the range: stay within the powers inside it.
    if (v > r.hi) v /= 2;
    if (v < r.lo) v *= 2;
  }
  return v;
}

}  // namespace

Hyper sample_hyper(const HyperSpace& space, const Hyper& fixed, Generator& gen) {
  Hyper h = fixed;
  for (const auto& [name, r] : space) {
    const double u = gen.uniform_f64();
    const double v = r.log ? std::exp(std::log(r.lo) + u * (std::log(r.hi) - std::log(r.lo))) : r.lo + u * (r.hi - r.lo);
    h[name] = clamp_to(r, v);
  }
  return h;
}

Hyper perturb(const Hyper& hyper, const HyperSpace& space, double factor, Generator& gen) {
  Hyper h = hyper;
  for (const auto& [name, r] : space) {
    auto it = h.find(name);
    if (it == h.end()) continue;
    const bool up = gen.uniform_f64() < 0.5;
    double v = up ? it->second * factor : it->second / factor;
    // Integer powers of two move by at least one power.
    if (r.power_of_two) v = up ? std::max(v, it->second * 2) : std::min(v, it->second / 2);
    it->second = clamp_to(r, v);
  }
  return h;
}

Decision decide(const Report& mine, const std::vector<Report>& reports, const PbtOptions& o, Generator& gen) {
  Decision d{.exploit = false, .source = {}, .hyper = mine.hyper};
  if (!o.exploit) return d;
  std::vector<Report> all{mine};
  for (const Report& r : reports) {
    if (r.member != mine.member) all.push_back(r);
  }
  const size_t n = all.size();
  if (n < 2) return d;
  // Best first; ties by member so every member sees the same order.
  std::sort(all.begin(), all.end(), [](const Report& a, const Report& b) {
    return a.score != b.score ? a.score > b.score : a.member < b.member;
  });
  const size_t cut = std::max<size_t>(1, static_cast<size_t>(std::ceil(static_cast<double>(n) * o.fraction)));
  size_t rank = 0;
  while (all[rank].member != mine.member) ++rank;
  if (rank + cut < n || rank < cut) return d;  // not in the bottom share (or the population is too small to split)
  const size_t pick = std::min<size_t>(cut - 1, static_cast<size_t>(gen.uniform_f64() * static_cast<double>(cut)));
  d.exploit = true;
  d.source = all[pick];
  d.hyper = perturb(d.source.hyper, o.space, o.perturb, gen);
  return d;
}

std::optional<HyperRange> parse_range(const std::string& text, const std::string& key) {
  if (text.find_first_not_of(" \t") == std::string::npos) return std::nullopt;
  const size_t comma = text.find(',');
  double lo = 0, hi = 0;
  try {
    if (comma == std::string::npos) throw std::invalid_argument(text);
    size_t used = 0;
    lo = std::stod(text.substr(0, comma), &used);
    hi = std::stod(text.substr(comma + 1), &used);
  } catch (const std::exception&) {
    fail<ConfigError>("{} = \"{}\": expected \"low,high\", e.g. \"0.001,0.3\"", key, text);
  }
  if (!(lo > 0) || !(hi >= lo)) fail<ConfigError>("{} = \"{}\": needs 0 < low <= high", key, text);
  return HyperRange{.lo = lo, .hi = hi, .log = true, .power_of_two = false};
}

}  // namespace braid::train
