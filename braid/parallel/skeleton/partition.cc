#include "braid/parallel/skeleton/partition.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "braid/base/error.h"
#include "braid/base/rng.h"

namespace braid::parallel::skeleton {

int64_t skeleton_size(int64_t entries, double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) fail<ValueError>("skeleton fraction must be in (0, 1], got {}", fraction);
  if (entries <= 0) return 0;
  const auto k = static_cast<int64_t>(std::llround(fraction * static_cast<double>(entries)));
  return std::clamp<int64_t>(k, 1, entries);
}

namespace {

// Doubles as unsigned integers in the same order (NaN lowest, -0 equal to
// 0): flip every bit of a negative number, only the sign bit of a positive one.
uint64_t order_key(double v) {
  if (std::isnan(v)) return 0;
  if (v == 0.0) v = 0.0;
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits >> 63) ? ~bits : bits | (uint64_t{1} << 63);
}

}  // namespace

std::vector<int64_t> top_entries(std::span<const double> importance, int64_t count) {
  const auto n = static_cast<int64_t>(importance.size());
  if (count < 0 || count > n) fail<ValueError>("top_entries: {} of {} entries", count, n);
  std::vector<int64_t> out;
  if (count == 0) return out;
  out.reserve(static_cast<size_t>(count));
  // The count-th largest key is the threshold: everything above it is in,
  // and of the entries equal to it the lowest-numbered fill what is left.
  // It is found by one histogram of the keys' top 16 bits, which names the
  // bucket holding it, and a partial sort of that bucket alone: 1.3 ms for
  // the MLP's 269k entries, where an nth_element over all of them took 3.8
  // (fastest of 15, the 2-core development VM).
  std::vector<uint64_t> key(static_cast<size_t>(n));
  std::vector<int64_t> histogram(size_t{1} << 16, 0);
  for (int64_t i = 0; i < n; ++i) {
    key[static_cast<size_t>(i)] = order_key(importance[static_cast<size_t>(i)]);
    ++histogram[key[static_cast<size_t>(i)] >> 48];
  }
  int64_t above = 0;  // entries in buckets above the threshold's
  size_t bucket = histogram.size();
  while (above + histogram[bucket - 1] < count) above += histogram[--bucket];
  --bucket;
  std::vector<uint64_t> candidates;
  candidates.reserve(static_cast<size_t>(histogram[bucket]));
  for (uint64_t k : key) {
    if ((k >> 48) == bucket) candidates.push_back(k);
  }
  const auto rank = static_cast<size_t>(count - above - 1);
  std::nth_element(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(rank), candidates.end(),
                   std::greater<>());
  const uint64_t threshold = candidates[rank];
  int64_t ties = count;
  for (uint64_t k : key) ties -= k > threshold;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t k = key[static_cast<size_t>(i)];
    if (k > threshold || (k == threshold && ties-- > 0)) out.push_back(i);
  }
  return out;
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
  // Round r's words are Philox(seed; r, block): owners of round r never
  // depend on earlier rounds, so a restart needs only (seed, r), and entry i
  // takes word i % 4 of block i / 4 whether or not it is in the skeleton.
  // Multiply-shift maps a 32-bit word to [0, ranks) with a bias below
  // ranks / 2^32; four entries per block keep a 269k-entry draw near 1 ms.
  std::vector<int32_t> owner(in_skeleton.size());
  Philox4 words{};
  for (size_t i = 0; i < owner.size(); ++i) {
    if (i % 4 == 0) words = philox(seed, round, i / 4);
    const auto r = static_cast<int32_t>((static_cast<uint64_t>(words[i % 4]) * static_cast<uint64_t>(ranks)) >> 32);
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
