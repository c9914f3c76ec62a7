// Per-rank files a run leaves in a folder (rank-<R>.json: timelines, history
// dumps), found in DIR/<sub> or in DIR itself, sorted by rank.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace braid {

// The rank-<R>.json files of the first of `folders` that has any; empty when none does.
std::vector<std::pair<int, std::filesystem::path>> rank_files(const std::vector<std::filesystem::path>& folders);

}  // namespace braid
