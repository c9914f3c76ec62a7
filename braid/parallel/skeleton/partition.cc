#include "braid/parallel/skeleton/partition.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "braid/base/error.h"
#include "braid/base/rng.h"

namespace braid::parallel::skeleton {

int64_t skeleton_size(int64_t entries, double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) fail<ValueError>("skeleton fraction must be in (0, 1], got {}", fraction);
  if (entries <= 0) return 0;
  const auto k = static_cast<int64_t>(std::llround(fraction * static_cast<double>(entries)));
  return std::clamp<int64_t>(k, 1, entries);
}

std::vector<int64_t> top_entries(std::span<const double> importance, int64_t count) {
  const auto n = static_cast<int64_t>(importance.size());
  if (count < 0 || count > n) fail<ValueError>("top_entries: {} of {} entries", count, n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  // A strict total order (importance descending, then index ascending), so
  // the first `count` are the same set whatever the partial sort does.
  auto key = [&](int64_t i) {
    const double v = importance[static_cast<size_t>(i)];
    return std::isnan(v) ? -INFINITY : v;
  };
  auto before = [&](int64_t a, int64_t b) {
    const double ka = key(a), kb = key(b);
    return ka != kb ? ka > kb : a < b;
  };
  if (count < n) std::nth_element(order.begin(), order.begin() + count, order.end(), before);
  order.resize(static_cast<size_t>(count));
  std::sort(order.begin(), order.end());
  return order;
}

void add_importance(std::span<const double> weight, std::span<const double> grad, std::span<double> importance) {
  if (weight.size() != importance.size() || grad.size() != importance.size()) {
    fail<ValueError>("add_importance: {} weights, {} gradients, {} importances", weight.size(), grad.size(),
                     importance.size());
  }
  for (size_t i = 0; i < importance.size(); ++i) importance[i] = std::abs(weight[i]) + std::abs(grad[i]);
}

std::vector<int32_t> draw_owners(std::span<const uint8_t> in_skeleton, int ranks, uint64_t seed, uint64_t round) {
  if (ranks < 1) fail<ValueError>("draw_owners: {} ranks", ranks);
  // One stream per round: owners of round r never depend on earlier rounds'
  // skeletons, so a restart needs only (seed, r). Every entry takes a draw
  // (skeleton entries discard theirs), so entry i's owner depends on i alone.
  Generator g(seed, /*stream=*/round);
  std::vector<int32_t> owner(in_skeleton.size());
  for (size_t i = 0; i < owner.size(); ++i) {
    const auto r = static_cast<int32_t>(g.below(static_cast<uint64_t>(ranks)));
    owner[i] = in_skeleton[i] ? -1 : r;
  }
  return owner;
}

std::string mask_to_hex(std::span<const uint8_t> mask) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve((mask.size() + 3) / 4);
  for (size_t d = 0; d * 4 < mask.size(); ++d) {
    int v = 0;
    for (size_t b = 0; b < 4 && d * 4 + b < mask.size(); ++b) v |= (mask[d * 4 + b] ? 1 : 0) << b;
    out.push_back(kDigits[v]);
  }
  return out;
}

std::vector<uint8_t> mask_from_hex(const std::string& hex, int64_t entries) {
  if (entries < 0 || hex.size() != static_cast<size_t>((entries + 3) / 4)) {
    fail<ValueError>("skeleton mask of {} hex digits does not describe {} entries", hex.size(), entries);
  }
  std::vector<uint8_t> mask(static_cast<size_t>(entries), 0);
  for (size_t d = 0; d < hex.size(); ++d) {
    const char c = hex[d];
    int v = -1;
    if (c >= '0' && c <= '9') v = c - '0';
    if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    if (v < 0) fail<ValueError>("skeleton mask: '{}' at digit {} is not a hex digit", c, d);
    for (size_t b = 0; b < 4; ++b) {
      const size_t i = d * 4 + b;
      if (i < mask.size()) {
        mask[i] = static_cast<uint8_t>((v >> b) & 1);
      } else if ((v >> b) & 1) {
        fail<ValueError>("skeleton mask sets entry {} of {}", i, entries);
      }
    }
  }
  return mask;
}

}  // namespace braid::parallel::skeleton
