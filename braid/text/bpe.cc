#include "braid/text/bpe.h"

#include <algorithm>

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"
#include "braid/text/byte_level.h"
#include "braid/text/pretokenize.h"
#include "braid/text/unicode.h"

namespace braid::text {
namespace {

constexpr size_t kCacheEntries = size_t{1} << 20;  // per thread; past it, pieces are merged uncached
constexpr size_t kCachedPieceBytes = 64;            // longer pieces are rare and not worth keeping

uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

}  // namespace

struct Tokenizer::Cache {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> index;  // -> offset, count
  std::vector<uint32_t> pool;
  std::vector<uint32_t> scratch;
};

Tokenizer::Tokenizer(std::vector<std::string> vocab, std::vector<std::pair<std::string, std::string>> merges,
                     std::vector<AddedToken> added, TokenizerOptions options)
    : vocab_(std::move(vocab)), merge_list_(std::move(merges)), added_(std::move(added)), options_(options) {
  size_t n = vocab_.size();
  for (const auto& a : added_) n = std::max<size_t>(n, size_t{a.id} + 1);
  id_to_token_.resize(n);
  id_special_.assign(n, false);
  token_ids_.reserve(vocab_.size());
  for (uint32_t id = 0; id < vocab_.size(); ++id) {
    if (vocab_[id].empty()) continue;
    if (!token_ids_.emplace(vocab_[id], id).second)
      fail<ValueError>("vocabulary: token '{}' has two ids, {} and {}", vocab_[id], token_ids_[vocab_[id]], id);
    id_to_token_[id] = vocab_[id];
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    const auto& a = added_[i];
    if (a.content.empty()) fail<ValueError>("added token {} is empty", a.id);
    added_ids_[a.content] = a.id;
    id_to_token_[a.id] = a.content;
    id_special_[a.id] = a.special;
    added_by_first_byte_[static_cast<unsigned char>(a.content[0])].push_back(static_cast<uint32_t>(i));
  }
  for (auto& list : added_by_first_byte_)
    std::stable_sort(list.begin(), list.end(),
                     [&](uint32_t x, uint32_t y) { return added_[x].content.size() > added_[y].content.size(); });

  merge_rules_.reserve(merge_list_.size() * 2);
  for (size_t rank = 0; rank < merge_list_.size(); ++rank) {
    const auto& [l, r] = merge_list_[rank];
    const auto li = token_ids_.find(l), ri = token_ids_.find(r), ci = token_ids_.find(l + r);
    if (li == token_ids_.end() || ri == token_ids_.end())
      fail<ValueError>("merge {} ('{} {}'): '{}' is not in the vocabulary", rank + 1, l, r,
                       li == token_ids_.end() ? l : r);
    if (ci == token_ids_.end())
      fail<ValueError>("merge {} ('{} {}'): the merged token '{}' is not in the vocabulary", rank + 1, l, r, l + r);
    // A repeated pair takes its last rank, as Hugging Face's map of merges does.
    merge_rules_[pair_key(li->second, ri->second)] = {static_cast<uint32_t>(rank), ci->second};
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = token_ids_.find(to_byte_level(std::string(1, static_cast<char>(b))));
    byte_ids_[b] = it == token_ids_.end() ? -1 : static_cast<int32_t>(it->second);
  }
  id_bytes_.resize(n);
  for (size_t id = 0; id < n; ++id)
    if (!from_byte_level(id_to_token_[id], &id_bytes_[id])) id_bytes_[id] = id_to_token_[id];
}

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view token) const {
  const std::string t(token);
  if (const auto it = added_ids_.find(t); it != added_ids_.end()) return it->second;
  if (const auto it = token_ids_.find(t); it != token_ids_.end()) return it->second;
  return std::nullopt;
}

const std::string& Tokenizer::id_to_token(uint32_t id) const {
  if (id >= id_to_token_.size() || id_to_token_[id].empty())
    fail<IndexError>("token id {} is not in the vocabulary ({} ids)", id, id_to_token_.size());
  return id_to_token_[id];
}

// Hugging Face's Word::merge_all: a heap of (rank, position) over adjacent
// pairs; a popped entry whose pair has changed since it was pushed is stale.
void Tokenizer::bpe(std::string_view piece, std::vector<uint32_t>* out) const {
  struct Sym {
    uint32_t id;
    int32_t prev, next;
    bool alive;
  };
  struct Entry {
    uint32_t rank, pos, id;
    bool operator<(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Sym> syms;
  thread_local std::vector<Entry> heap;
  syms.clear();
  heap.clear();
  for (const char c : piece) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
    if (id < 0) continue;  // a byte without a token is dropped, as HF does without an unk token
    const auto i = static_cast<int32_t>(syms.size());
    syms.push_back({static_cast<uint32_t>(id), i - 1, i + 1, true});
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  const auto rule = [&](uint32_t a, uint32_t b) -> const MergeRule* {
    const auto it = merge_rules_.find(pair_key(a, b));
    return it == merge_rules_.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i + 1 < syms.size(); ++i)
    if (const MergeRule* m = rule(syms[i].id, syms[i + 1].id)) heap.push_back({m->rank, static_cast<uint32_t>(i), m->id});
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Entry top = heap.back();
    heap.pop_back();
    Sym& cur = syms[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    Sym& right = syms[static_cast<size_t>(cur.next)];
    const MergeRule* now = rule(cur.id, right.id);
    if (now == nullptr || now->id != top.id) continue;
    cur.id = top.id;
    cur.next = right.next;
    right.alive = false;
    if (right.next >= 0) syms[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(top.pos);
    if (cur.prev >= 0)
      if (const MergeRule* m = rule(syms[static_cast<size_t>(cur.prev)].id, cur.id)) {
        heap.push_back({m->rank, static_cast<uint32_t>(cur.prev), m->id});
        std::push_heap(heap.begin(), heap.end());
      }
    if (cur.next >= 0)
      if (const MergeRule* m = rule(cur.id, syms[static_cast<size_t>(cur.next)].id)) {
        heap.push_back({m->rank, top.pos, m->id});
        std::push_heap(heap.begin(), heap.end());
      }
  }
  for (const Sym& s : syms)
    if (s.alive) out->push_back(s.id);
}

void Tokenizer::encode_piece(std::string_view piece, Cache& cache, std::vector<uint32_t>* out) const {
  const bool cacheable = piece.size() <= kCachedPieceBytes;
  if (cacheable) {
    if (const auto it = cache.index.find(piece); it != cache.index.end()) {
      const auto [off, count] = it->second;
      out->insert(out->end(), cache.pool.begin() + off, cache.pool.begin() + off + count);
      return;
    }
  }
  cache.scratch.clear();
  bool whole = false;
  if (options_.ignore_merges) {
    if (const auto it = token_ids_.find(to_byte_level(piece)); it != token_ids_.end()) {
      cache.scratch.push_back(it->second);
      whole = true;
    }
  }
  if (!whole) bpe(piece, &cache.scratch);
  if (cacheable && cache.index.size() < kCacheEntries) {
    cache.index.emplace(std::string(piece),
                        std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(cache.pool.size()),
                                                      static_cast<uint32_t>(cache.scratch.size())));
    cache.pool.insert(cache.pool.end(), cache.scratch.begin(), cache.scratch.end());
  }
  out->insert(out->end(), cache.scratch.begin(), cache.scratch.end());
}

void Tokenizer::encode_segment(std::string_view text, bool prefix_space, Cache& cache,
                               std::vector<uint32_t>* out) const {
  std::string prefixed;
  if (prefix_space && !text.empty() && text[0] != ' ') {
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    text = prefixed;
  }
  for_each_pretoken(text, [&](std::string_view piece) { encode_piece(piece, cache, out); });
}

void Tokenizer::split_added(size_t doc, std::string_view text, size_t target, std::vector<Part>* parts) const {
  // Cuts text [begin, end) into parts of about `target` bytes at safe points.
  const auto add_text = [&](size_t begin, size_t end) {
    bool first = true;
    while (begin < end) {
      size_t cut = end;
      if (end - begin > 2 * target) {
        cut = begin + target;
        while (cut < end && !is_safe_cut(text, cut)) ++cut;
      }
      parts->push_back({doc, begin, cut, -1, first && options_.add_prefix_space});
      first = false;
      begin = cut;
    }
  };
  size_t seg = 0;
  if (!added_.empty()) {
    for (size_t p = 0; p < text.size(); ++p) {
      const auto& candidates = added_by_first_byte_[static_cast<unsigned char>(text[p])];
      for (const uint32_t i : candidates) {
        const std::string& c = added_[i].content;
        if (text.compare(p, c.size(), c) != 0) continue;
        add_text(seg, p);
        parts->push_back({doc, p, p + c.size(), added_[i].id, false});
        p += c.size() - 1;
        seg = p + 1;
        break;
      }
    }
  }
  add_text(seg, text.size());
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& o) const {
  return std::move(encode_batch(std::span<const std::string_view>(&text, 1), o)[0]);
}

std::vector<std::vector<uint32_t>> Tokenizer::encode_batch(std::span<const std::string_view> docs,
                                                           const EncodeOptions& o) const {
  ThreadsScope threads(o.threads);
  std::vector<std::string> repaired(docs.size());
  std::vector<std::string_view> views(docs.begin(), docs.end());
  size_t total = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    if (repair_utf8(docs[d], &repaired[d])) views[d] = repaired[d];
    total += views[d].size();
  }
  // Parts of a few per thread, so threads finish together; no smaller than a
  // cache's worth of words.
  const size_t target = std::clamp<size_t>(total / (static_cast<size_t>(num_threads()) * 4), 16 << 10, 4 << 20);
  std::vector<Part> parts;
  for (size_t d = 0; d < views.size(); ++d) split_added(d, views[d], target, &parts);

  std::vector<std::vector<uint32_t>> encoded(parts.size());
  parallel_for(0, static_cast<int64_t>(parts.size()), 1, [&](int64_t lo, int64_t hi) {
    Cache cache;
    for (int64_t i = lo; i < hi; ++i) {
      const Part& p = parts[static_cast<size_t>(i)];
      auto& out = encoded[static_cast<size_t>(i)];
      if (p.added_id >= 0) {
        out.push_back(static_cast<uint32_t>(p.added_id));
      } else {
        out.reserve((p.end - p.begin) / 3);
        encode_segment(views[p.doc].substr(p.begin, p.end - p.begin), p.prefix_space, cache, &out);
      }
    }
  });
  std::vector<std::vector<uint32_t>> result(docs.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    auto& r = result[parts[i].doc];
    if (r.empty())
      r = std::move(encoded[i]);
    else
      r.insert(r.end(), encoded[i].begin(), encoded[i].end());
  }
  return result;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, const DecodeOptions& o) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t id = ids[i];
    if (id >= id_to_token_.size() || id_to_token_[id].empty())
      fail<IndexError>("token id {} at position {} is not in the vocabulary ({} ids)", id, i, id_to_token_.size());
    if (o.skip_special && id_special_[id]) continue;
    out += id_bytes_[id];
  }
  return out;
}

}  // namespace braid::text
