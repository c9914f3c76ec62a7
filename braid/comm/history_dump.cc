#include "braid/comm/history_dump.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "braid/base/json_number.h"
#include "braid/base/rank_files.h"

namespace braid::comm {

namespace fs = std::filesystem;

std::vector<nlohmann::json> read_history_dumps(const std::string& dir) {
  const auto files = rank_files({fs::path(dir), fs::path(dir) / "history"});
  if (files.empty()) fail<IoError>("no history dumps (rank-<R>.json) in {} or {}/history", dir, dir);
  std::vector<nlohmann::json> out;
  for (const auto& [rank, path] : files) {
    std::ifstream in(path);
    auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("communicators"))
      fail<IoError>("{}: not a braid history dump", path.string());
    out.push_back(std::move(j));
  }
  return out;
}

namespace {

Position position_in(const std::vector<OpRecord>& ops, uint64_t seq) {
  Position p;
  for (const OpRecord& r : ops) {
    p.queued = std::max(p.queued, r.seq);
    if (r.seq == seq) p.asked = r;
    if (r.state != OpState::queued && r.seq > p.current.seq) p.current = r;
    if (r.state == OpState::done && r.seq > p.last_done.seq) p.last_done = r;
  }
  return p;
}

}  // namespace

std::vector<CommStory> history_stories(const std::vector<nlohmann::json>& dumps) {
  std::map<uint32_t, CommStory> by_id;
  try {
    for (const auto& d : dumps) {
      for (const auto& c : d.at("communicators")) {
        CommStory& s = by_id[json_integer<uint32_t>(c.at("id"))];
        s.id = json_integer<uint32_t>(c.at("id"));
        s.size = json_integer<int>(c.at("size"));
        const int r = json_integer<int>(c.at("rank"));
        if (r < 0 || r >= s.size) fail<IoError>("history dump: group rank {} outside size {}", r, s.size);
        s.ops.resize(s.size);
        for (const auto& op : c.at("ops")) s.ops[r].push_back(op_record_from_json(op));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("malformed history dump: {}", e.what());
  }
  std::vector<CommStory> out;
  for (auto& [id, s] : by_id) {
    // The first failure: the failed op that ended earliest (refusals come later by construction).
    double first_end = 0;
    for (int r = 0; r < s.size; ++r) {
      for (const OpRecord& op : s.ops[r]) {
        if (op.state != OpState::failed || op.error.starts_with("refused")) continue;
        if (s.seq == 0 || op.seq < s.seq || (op.seq == s.seq && op.ended < first_end)) {
          s.seq = op.seq, first_end = op.ended, s.first_failed_rank = r, s.first_failure = op.error;
        }
      }
    }
    if (s.seq == 0) {
      // Nothing failed here: the story is about the newest op some rank started.
      for (int r = 0; r < s.size; ++r)
        for (const OpRecord& op : s.ops[r])
          if (op.state == OpState::started) s.seq = std::max(s.seq, op.seq);
    }
    s.ranks.resize(s.size);
    for (int r = 0; r < s.size; ++r)
      if (!s.ops[r].empty()) s.ranks[r] = position_in(s.ops[r], s.seq);
    if (s.seq != 0) s.explanation = explain(s.seq, s.ranks);
    out.push_back(std::move(s));
  }
  return out;
}

std::string format_stories(const std::vector<CommStory>& stories, size_t last_ops) {
  std::string out;
  for (const CommStory& s : stories) {
    std::vector<int> dumped;
    for (int r = 0; r < s.size; ++r)
      if (s.ranks[r]) dumped.push_back(r);
    out += fmt::format("communicator {} ({} ranks; history from {})\n", s.id, s.size, name_ranks(dumped));
    if (s.seq == 0) {
      out += "  nothing failed or was running\n";
      continue;
    }
    if (s.first_failed_rank >= 0) {
      out += fmt::format("  first failure: #{} on rank {}: {}\n", s.seq, s.first_failed_rank, s.first_failure);
    } else {
      out += fmt::format("  no failure recorded; the newest op started is #{}\n", s.seq);
    }
    out += fmt::format("  story: {}\n", s.explanation.text);
    uint64_t newest = 0;
    for (int r = 0; r < s.size; ++r) {
      if (!s.ranks[r]) {
        out += fmt::format("  rank {}: no history\n", r);
        continue;
      }
      const Position& p = *s.ranks[r];
      newest = std::max(newest, p.queued);
      out += fmt::format("  rank {}: {}; last finished {}\n", r,
                         p.current.empty() ? "started nothing"
                                           : fmt::format("{} {}", name(p.current.state), p.current.name()),
                         p.last_done.empty() ? "nothing" : p.last_done.name());
    }
    // The last ops side by side: one row per sequence number, one column per rank.
    const uint64_t from = newest > last_ops ? newest - last_ops + 1 : 1;
    out += fmt::format("  {:>6}", "seq");
    for (int r = 0; r < s.size; ++r) out += fmt::format(" | {:<22}", fmt::format("rank {}", r));
    out += "\n";
    for (uint64_t q = from; q <= newest; ++q) {
      out += fmt::format("  {:>6}", fmt::format("#{}", q));
      for (int r = 0; r < s.size; ++r) {
        std::string cell = "-";
        for (const OpRecord& op : s.ops[r])
          if (op.seq == q) cell = fmt::format("{} {} {}", op.op, human_bytes(op.bytes), name(op.state));
        out += fmt::format(" | {:<22}", cell);
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace braid::comm
