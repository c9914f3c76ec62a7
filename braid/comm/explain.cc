#include "braid/comm/explain.h"

#include <algorithm>

namespace braid::comm {

std::string name_ranks(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

namespace {

// "rank 3 never started #17; its last finished op is #16 allreduce (4 MiB f32 sum)[, and it is still in ...]"
std::string behind_sentence(int r, uint64_t seq, const Position& p) {
  // A notice tells only where the rank failed ("it has finished no collective
  // yet" would be a guess, and wrong).
  if (p.from_notice) return fmt::format("rank {} failed at {} before #{}", r, p.current.name(), seq);
  std::string s = fmt::format("rank {} never started #{}", r, seq);
  if (p.queued >= seq) s += fmt::format(" (it has called it: #{} is queued)", seq);
  s += p.last_done.empty() ? "; it has finished no collective yet"
                           : fmt::format("; its last finished op is {}", p.last_done.name());
  if (!p.current.empty() && p.current.seq != p.last_done.seq) {
    s += fmt::format(", and it is {} {}", p.current.state == OpState::failed ? "failed at" : "still in",
                     p.current.name());
  }
  return s;
}

}  // namespace

Explanation explain(uint64_t seq, const std::vector<std::optional<Position>>& ranks) {
  Explanation x;
  // Ranks that made a call #seq, grouped by the call (first seen first).
  struct Call {
    OpRecord op;
    std::vector<int> ranks;
  };
  std::vector<Call> calls;
  std::vector<std::string> sentences;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    if (!ranks[r]) {
      x.silent.push_back(r);
      continue;
    }
    const Position& p = *ranks[r];
    if (p.asked.seq == seq) {
      auto it = std::find_if(calls.begin(), calls.end(), [&](const Call& c) { return c.op.same_call(p.asked); });
      if (it == calls.end()) {
        calls.push_back({p.asked, {r}});
      } else {
        it->ranks.push_back(r);
      }
    } else if (p.queued < seq || p.current.seq < seq) {
      x.behind.push_back(r);
      sentences.push_back(behind_sentence(r, seq, p));
    }
    // Otherwise the rank is past #seq and its record of it was evicted: nothing to compare.
  }
  if (calls.size() > 1) {
    x.desync = true;
    // The largest group last: "rank 1 is at X while ranks 0, 2, 3 are at Y".
    std::stable_sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.ranks.size() < b.ranks.size(); });
    std::vector<std::string> parts;
    for (const Call& c : calls)
      parts.push_back(fmt::format("{} {} at {}", name_ranks(c.ranks), c.ranks.size() == 1 ? "is" : "are", c.op.name()));
    sentences.insert(sentences.begin(), fmt::format("desync at #{}: {}", seq, fmt::join(parts, " while ")));
  }
  if (!x.silent.empty()) {
    sentences.push_back(fmt::format("{} did not answer (dead, stopped, or gone before the question)",
                                    name_ranks(x.silent)));
  }
  if (sentences.empty()) sentences.push_back(fmt::format("every rank arrived at #{}", seq));
  x.text = fmt::format("{}", fmt::join(sentences, "; "));
  return x;
}

}  // namespace braid::comm
