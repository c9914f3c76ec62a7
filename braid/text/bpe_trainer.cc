#include "braid/text/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"
#include "braid/text/byte_level.h"
#include "braid/text/pretokenize.h"
#include "braid/text/unicode.h"

namespace braid::text {
namespace {

using Counts = std::unordered_map<std::string, uint64_t>;

uint64_t pair_of(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

void count_lines(std::string_view text, Counts* counts) {
  std::string repaired;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    end = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view line = text.substr(begin, end - begin);
    if (repair_utf8(line, &repaired)) line = repaired;
    for_each_pretoken(line, [&](std::string_view piece) { ++(*counts)[std::string(piece)]; });
    begin = end;
  }
}

// Pieces and their counts over all texts; parallel over line-aligned chunks.
Counts count_pieces(std::span<const std::string_view> texts) {
  std::vector<std::string_view> chunks;
  for (std::string_view t : texts) {
    constexpr size_t kChunk = 1 << 20;
    while (t.size() > kChunk) {
      size_t cut = t.find('\n', kChunk);
      if (cut == std::string_view::npos) break;
      chunks.push_back(t.substr(0, cut + 1));
      t.remove_prefix(cut + 1);
    }
    chunks.push_back(t);
  }
  std::vector<Counts> partial(chunks.size());
  parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) count_lines(chunks[static_cast<size_t>(i)], &partial[static_cast<size_t>(i)]);
  });
  Counts all;
  for (auto& p : partial) {
    if (all.empty()) {
      all = std::move(p);
      continue;
    }
    for (auto& [k, v] : p) all[k] += v;
  }
  return all;
}

struct Change {
  uint64_t pair;
  int32_t delta;
};

// Hugging Face's Word::merge: replaces each (a, b) left to right by c and
// reports the pair counts that change around each replacement.
void merge_word(std::vector<uint32_t>& w, uint32_t a, uint32_t b, uint32_t c, std::vector<Change>* changes) {
  size_t out = 0;
  size_t i = 0;
  while (i < w.size()) {
    if (w[i] == a && i + 1 < w.size() && w[i + 1] == b) {
      if (out > 0) {
        changes->push_back({pair_of(w[out - 1], a), -1});
        changes->push_back({pair_of(w[out - 1], c), +1});
      }
      if (i + 2 < w.size()) {
        changes->push_back({pair_of(b, w[i + 2]), -1});
        changes->push_back({pair_of(c, w[i + 2]), +1});
      }
      w[out++] = c;
      i += 2;
    } else {
      w[out++] = w[i++];
    }
  }
  w.resize(out);
}

struct Entry {
  int64_t count;
  uint64_t pair;
  uint32_t where;  // index into the heap's lists of words
  // Max-heap on count; equal counts: the smaller (left, right) first.
  bool operator<(const Entry& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

}  // namespace

Tokenizer train_bpe(std::span<const std::string_view> texts, const TrainOptions& o) {
  if (o.vocab_size < 256 + o.special_tokens.size())
    fail<ValueError>("tokenize train: vocab_size {} is below the 256 byte tokens plus {} special tokens", o.vocab_size,
                     o.special_tokens.size());
  ThreadsScope threads(o.threads);

  std::vector<std::string> vocab;
  std::unordered_map<std::string, uint32_t> ids;
  const auto add = [&](const std::string& t) {
    if (ids.emplace(t, static_cast<uint32_t>(vocab.size())).second) vocab.push_back(t);
  };
  for (const auto& s : o.special_tokens) add(s);
  std::vector<std::pair<uint32_t, int>> alphabet;  // (code point, byte)
  for (int b = 0; b < 256; ++b) alphabet.emplace_back(byte_to_char()[b], b);
  std::sort(alphabet.begin(), alphabet.end());
  uint32_t byte_id[256];
  for (const auto& [cp, b] : alphabet) {
    std::string s;
    append_utf8(cp, &s);
    add(s);
    byte_id[b] = ids.at(s);
  }

  const Counts counts = count_pieces(texts);
  std::vector<std::vector<uint32_t>> words;
  std::vector<int64_t> freq;
  words.reserve(counts.size());
  for (const auto& [piece, n] : counts) {
    std::vector<uint32_t> w;
    w.reserve(piece.size());
    for (const char c : piece) w.push_back(byte_id[static_cast<unsigned char>(c)]);
    words.push_back(std::move(w));
    freq.push_back(static_cast<int64_t>(n));
  }

  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  for (uint32_t i = 0; i < words.size(); ++i)
    for (size_t j = 0; j + 1 < words[i].size(); ++j) {
      const uint64_t p = pair_of(words[i][j], words[i][j + 1]);
      pair_counts[p] += freq[i];
      where[p].push_back(i);
    }

  std::vector<std::vector<uint32_t>> lists;
  std::priority_queue<Entry> heap;
  const auto push_where = [&] {
    for (auto& [p, ws] : where) {
      const int64_t c = pair_counts[p];
      if (c <= 0) continue;
      std::sort(ws.begin(), ws.end());
      ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
      lists.push_back(std::move(ws));
      heap.push({c, p, static_cast<uint32_t>(lists.size() - 1)});
    }
    where.clear();
  };
  push_where();

  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<Change> changes;
  while (vocab.size() < o.vocab_size && !heap.empty()) {
    Entry top = heap.top();
    heap.pop();
    const int64_t now = pair_counts[top.pair];
    if (top.count != now) {
      top.count = now;
      heap.push(top);
      continue;
    }
    if (top.count < 1 || static_cast<uint64_t>(top.count) < o.min_frequency) break;
    const auto a = static_cast<uint32_t>(top.pair >> 32), b = static_cast<uint32_t>(top.pair);
    const std::string token = vocab[a] + vocab[b];
    add(token);
    const uint32_t c = ids.at(token);
    merges.emplace_back(vocab[a], vocab[b]);
    for (const uint32_t w : lists[top.where]) {
      changes.clear();
      merge_word(words[w], a, b, c, &changes);
      for (const Change& ch : changes) {
        pair_counts[ch.pair] += ch.delta * freq[w];
        if (ch.delta > 0) where[ch.pair].push_back(w);
      }
    }
    std::vector<uint32_t>().swap(lists[top.where]);
    push_where();
  }

  // A pair merged twice (two merge orders spelling one token) keeps its last
  // rank, as Hugging Face's map of merges does when it writes merges.txt.
  std::unordered_map<std::string, size_t> last;
  for (size_t i = 0; i < merges.size(); ++i) last[merges[i].first + " " + merges[i].second] = i;
  std::vector<std::pair<std::string, std::string>> unique;
  for (size_t i = 0; i < merges.size(); ++i)
    if (last[merges[i].first + " " + merges[i].second] == i) unique.push_back(merges[i]);

  std::vector<AddedToken> added;
  for (const auto& s : o.special_tokens) added.push_back({s, ids.at(s), true});
  return Tokenizer(std::move(vocab), std::move(unique), std::move(added));
}

}  // namespace braid::text
