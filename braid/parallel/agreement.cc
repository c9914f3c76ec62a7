#include "braid/parallel/agreement.h"

#include <set>

namespace braid::parallel {

std::string first_difference(const nlohmann::json& a, const nlohmann::json& b) {
  const nlohmann::json fa = a.flatten(), fb = b.flatten();
  std::set<std::string> keys;
  for (auto it = fa.begin(); it != fa.end(); ++it) keys.insert(it.key());
  for (auto it = fb.begin(); it != fb.end(); ++it) keys.insert(it.key());
  for (const std::string& k : keys) {
    const auto va = fa.find(k), vb = fb.find(k);
    const std::string sa = va == fa.end() ? "(missing)" : va->dump();
    const std::string sb = vb == fb.end() ? "(missing)" : vb->dump();
    if (sa != sb) return fmt::format("{}: {} vs {}", k, sa, sb);
  }
  return {};
}

void check_agreement(comm::Communicator& comm, const nlohmann::json& description, Duration timeout) {
  const std::string mine = description.dump();
  const auto n = static_cast<size_t>(comm.size());
  const Deadline deadline = Deadline::after(timeout * 2);
  // Lengths first, then every description padded to the longest.
  std::vector<int64_t> len{static_cast<int64_t>(mine.size())}, lens(n);
  comm.allgather(len, lens, {.timeout = timeout}).wait(deadline);
  const size_t longest = static_cast<size_t>(*std::max_element(lens.begin(), lens.end()));
  std::vector<uint8_t> padded(longest, 0), all(longest * n);
  std::copy(mine.begin(), mine.end(), padded.begin());
  comm.allgather(padded, all, {.timeout = timeout}).wait(deadline);

  auto description_of = [&](size_t r) {
    const char* p = reinterpret_cast<const char*>(all.data() + r * longest);
    return nlohmann::json::parse(std::string(p, static_cast<size_t>(lens[r])));
  };
  const nlohmann::json reference = description_of(0);
  std::vector<int> differing;
  std::string first;
  for (size_t r = 1; r < n; ++r) {
    std::string diff = first_difference(reference, description_of(r));
    if (diff.empty()) continue;
    differing.push_back(static_cast<int>(r));
    if (first.empty()) first = fmt::format("rank 0 vs rank {} at {}", r, diff);
  }
  if (!differing.empty()) {
    fail<ConfigError>("ranks {} disagree with rank 0 on the model or configuration; first difference: {}",
                      differing, first);
  }
}

}  // namespace braid::parallel
