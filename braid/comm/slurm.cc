#include "braid/comm/slurm.h"

#include <charconv>

#include <fmt/format.h>

#include "braid/base/digest.h"
#include "braid/base/error.h"

namespace braid::comm {

namespace {

constexpr size_t kMaxHosts = size_t{1} << 20;

// Splits at commas outside brackets ("a[1,3],b" -> "a[1,3]", "b").
std::vector<std::string_view> split_top(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    } else if (s[i] == '[') {
      ++depth;
    } else if (s[i] == ']') {
      --depth;
    }
  }
  return out;
}

bool parse_uint(std::string_view s, uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

// Appends every name `item` (one comma-free host expression) stands for.
void expand_item(std::string_view list, std::string_view item, std::vector<std::string>& out) {
  auto bad = [&](std::string_view why) {
    fail<ConfigError>("Slurm host list '{}': {} in '{}'", list, why, item);
  };
  const size_t open = item.find('[');
  if (open == std::string_view::npos) {
    if (item.find(']') != std::string_view::npos) bad("']' without '['");
    if (item.empty()) bad("empty host name");
    out.emplace_back(item);
    return;
  }
  const size_t close = item.find(']', open);
  if (close == std::string_view::npos) bad("'[' without ']'");
  const std::string_view prefix = item.substr(0, open), body = item.substr(open + 1, close - open - 1);
  std::vector<std::string> rest;
  const std::string_view tail = item.substr(close + 1);
  if (tail.empty()) rest.emplace_back();
  else expand_item(list, tail, rest);
  for (std::string_view range : split_top(body)) {
    const size_t dash = range.find('-');
    const std::string_view lo_s = range.substr(0, dash);
    const std::string_view hi_s = dash == std::string_view::npos ? lo_s : range.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    if (!parse_uint(lo_s, lo) || !parse_uint(hi_s, hi) || lo > hi) bad(fmt::format("bad range '{}'", range));
    if ((hi - lo + 1) * rest.size() + out.size() > kMaxHosts) bad(fmt::format("more than {} hosts", kMaxHosts));
    for (uint64_t n = lo; n <= hi; ++n)
      for (const std::string& r : rest)
        out.push_back(fmt::format("{}{:0{}}{}", prefix, n, lo_s.size(), r));
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list) {
  std::vector<std::string> out;
  if (list.empty()) fail<ConfigError>("Slurm host list is empty");
  for (std::string_view item : split_top(list)) expand_item(list, item, out);
  return out;
}

std::vector<int> expand_tasks_per_node(std::string_view spec) {
  std::vector<int> out;
  for (std::string_view item : split_top(spec)) {
    // "N" or "N(xM)": N tasks on each of M nodes.
    const size_t paren = item.find("(x");
    uint64_t tasks = 0, nodes = 1;
    const bool ok = paren == std::string_view::npos
                        ? parse_uint(item, tasks)
                        : parse_uint(item.substr(0, paren), tasks) && item.back() == ')' &&
                              parse_uint(item.substr(paren + 2, item.size() - paren - 3), nodes);
    if (!ok || tasks > (1u << 20) || out.size() + nodes > kMaxHosts)
      fail<ConfigError>("Slurm tasks per node '{}': cannot read '{}' (expected N or N(xM))", spec, item);
    out.insert(out.end(), nodes, static_cast<int>(tasks));
  }
  return out;
}

int derived_port(std::string_view job_id, std::string_view step_id) {
  const Sha256 h = hmac_sha256("braid-slurm-port", as_bytes(fmt::format("{}:{}", job_id, step_id)));
  const uint32_t v = (uint32_t{h[0]} << 24) | (uint32_t{h[1]} << 16) | (uint32_t{h[2]} << 8) | h[3];
  return 20000 + static_cast<int>(v % 10000);
}

std::string derived_token(std::string_view job_id, std::string_view step_id, unsigned uid) {
  const Sha256 h = hmac_sha256("braid-slurm-token", as_bytes(fmt::format("{}:{}:{}", job_id, step_id, uid)));
  return to_hex(std::as_bytes(std::span(h)));
}

}  // namespace braid::comm
