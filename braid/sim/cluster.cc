#include "braid/sim/cluster.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "braid/base/error.h"

namespace braid::sim {

namespace {

// Three significant digits, always with a decimal point: "8.0", "1.25", "125.0".
std::string number(double x) {
  std::string s = fmt::format("{:.3g}", x);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string bandwidth(double beta) {  // beta: s per byte
  const double bytes_per_s = 1 / beta;
  if (bytes_per_s >= 1e9) return number(bytes_per_s / 1e9) + " GB/s";
  return number(bytes_per_s / 1e6) + " MB/s";
}

std::string latency(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.3g} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.3g} ms", seconds * 1e3);
  return fmt::format("{:.3g} s", seconds);
}

std::string plural(int n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

struct Unit {
  std::string_view name;
  double scale;         // bandwidth: bits or bytes per second per unit; latency: seconds per unit
  double per_byte = 1;  // bandwidth: units of data in a byte (8 bits, 1 byte)
};

constexpr Unit kBandwidth[] = {
    {"bit/s", 1, 8},   {"kbit/s", 1e3, 8},   {"Mbit/s", 1e6, 8},      {"Gbit/s", 1e9, 8},
    {"B/s", 1},        {"KB/s", 1e3},        {"MB/s", 1e6},           {"GB/s", 1e9},
    {"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0},
};
constexpr Unit kLatency[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};

}  // namespace

std::string Cluster::describe() const {
  std::string where = plural(hosts(), "host");
  if (hosts() > 1) where += fmt::format(" ({} per host)", ranks_per_host);
  auto cpu = [](const MessageCpu& c) {
    return c.any() ? fmt::format(" (CPU {} + {:.3g} ns/B each end)", latency(c.per_message), c.per_byte * 1e9)
                   : std::string();
  };
  return fmt::format("{} on {} of {} cores; in-host {}, {}{}; between hosts {}, {}{}", plural(ranks, "rank"), where,
                     fmt::format("{:g}", cores_per_host), bandwidth(intra.beta), latency(intra.alpha), cpu(intra_cpu),
                     bandwidth(inter.beta), latency(inter.alpha), cpu(inter_cpu));
}

comm::LinkCost parse_link(std::string_view spec, comm::LinkCost base) {
  auto bad = [&](std::string_view why) {
    fail<ValueError>("link \"{}\": {} (expected a bandwidth, a latency or both, as in \"10Gbit/s,5us\")", spec, why);
  };
  bool have_bandwidth = false, have_latency = false;
  std::string_view rest = spec;
  if (trim(rest).empty()) bad("empty");
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view part = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (comma != std::string_view::npos && trim(rest).empty()) bad("nothing after the comma");

    double value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec != std::errc() || !std::isfinite(value) || value < 0)
      bad(fmt::format("\"{}\" is not a number and unit", part));
    const std::string_view unit = trim(part.substr(static_cast<size_t>(end - part.data())));

    bool known = false;
    for (const Unit& u : kBandwidth) {
      if (unit != u.name) continue;
      if (have_bandwidth) bad("two bandwidths");
      if (value == 0) bad("zero bandwidth");
      base.beta = u.per_byte / (value * u.scale);  // s per byte
      have_bandwidth = known = true;
    }
    for (const Unit& u : kLatency) {
      if (unit != u.name) continue;
      if (have_latency) bad("two latencies");
      base.alpha = value * u.scale;
      have_latency = known = true;
    }
    if (!known) {
      bad(
          fmt::format("unknown unit \"{}\" (bandwidth: bit/s, kbit/s, Mbit/s, Gbit/s, B/s, KB/s, MB/s, GB/s, KiB/s, "
                      "MiB/s, GiB/s; latency: ns, us, ms, s)",
                      unit));
    }
  }
  return base;
}

}  // namespace braid::sim
