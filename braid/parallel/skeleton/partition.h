// The skeleton partition of a model's entries (docs/skeleton.md): a small
// skeleton of the most important entries, which every replica trains and the
// data axis averages, and the rest split at random among the replicas, each
// entry trained by its owner only.
//
// Entries are numbered across the parameters in registration order (entry i
// of the flat concatenation). Everything here is a pure function of its
// arguments, so ranks that pass the same values get the same partition
// without talking.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace braid::parallel::skeleton {

// How many of `entries` form the skeleton: round(fraction * entries), at
// least 1 (when there is an entry) and at most `entries`. ValueError unless
// 0 < fraction <= 1.
int64_t skeleton_size(int64_t entries, double fraction);

// The `count` entries of largest importance, in increasing index order; equal
// importances go to the lower index, so the choice is unique. NaN counts as
// least important. O(entries).
std::vector<int64_t> top_entries(std::span<const double> importance, int64_t count);

// importance[i] = |weight[i]| + |grad[i]| (the connection's magnitude plus how
// fast it is moving).
void add_importance(std::span<const double> weight, std::span<const double> grad, std::span<double> importance);

// The data rank that trains each entry in merge round `round`: uniform over
// [0, ranks) (counter-based Philox), a function of (seed, round, entry)
// alone, so the same on every rank and reproducible after a restart.
// Skeleton entries get -1.
std::vector<int32_t> draw_owners(std::span<const uint8_t> in_skeleton, int ranks, uint64_t seed, uint64_t round);

// The skeleton as a mask and back, for checkpoints: one hex digit per 4
// entries. ValueError when the text does not describe `entries` entries.
std::string mask_to_hex(std::span<const uint8_t> mask);
std::vector<uint8_t> mask_from_hex(const std::string& hex, int64_t entries);

}  // namespace braid::parallel::skeleton
