#include "braid/base/rank_files.h"

#include <algorithm>
#include <regex>

namespace braid {

std::vector<std::pair<int, std::filesystem::path>> rank_files(const std::vector<std::filesystem::path>& folders) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int, fs::path>> files;
  const std::regex pattern(R"(rank-(\d+)\.json)");
  for (const fs::path& d : folders) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& entry : fs::directory_iterator(d, ec)) {
      std::smatch m;
      const std::string name = entry.path().filename().string();
      if (std::regex_match(name, m, pattern)) files.emplace_back(std::stoi(m[1]), entry.path());
    }
    if (!files.empty()) break;
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace braid
