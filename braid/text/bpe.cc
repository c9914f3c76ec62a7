#include "braid/text/bpe.h"

#include <algorithm>
#include <atomic>
#include <cstring>

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

// Open addressing over (hash, key) with keys and ids in two arenas: a piece
// is found with one probe and one memcmp in the common case. Measured on the
// fortunes: std::unordered_map<std::string, ...> lookups took a third of the
// encoding time.
struct Tokenizer::Cache {
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, ids_off = 0;
    uint16_t key_len = 0, ids_len = 0;  // key_len 0: empty (pieces are never empty)
  };
  std::vector<Slot> slots = std::vector<Slot>(1 << 12);
  size_t used = 0;
  std::string keys;
  std::vector<uint32_t> pool;
  std::vector<uint32_t> scratch;

  static uint64_t hash_of(std::string_view s) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
  }
  const Slot* find(std::string_view piece, uint64_t h) const {
    const size_t mask = slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots[i];
      if (s.key_len == 0) return nullptr;
      if (s.hash == h && s.key_len == piece.size() && std::memcmp(keys.data() + s.key_off, piece.data(), piece.size()) == 0)
        return &s;
    }
  }
  void insert_slot(const Slot& n) {
    const size_t mask = slots.size() - 1;
    size_t i = n.hash & mask;
    while (slots[i].key_len != 0) i = (i + 1) & mask;
    slots[i] = n;
  }
  void insert(std::string_view piece, uint64_t h, std::span<const uint32_t> ids) {
    if (2 * (used + 1) > slots.size()) {  // grow at half full
      std::vector<Slot> old(slots.size() * 2);
      old.swap(slots);
      for (const Slot& s : old)
        if (s.key_len != 0) insert_slot(s);
    }
    insert_slot({h, static_cast<uint32_t>(keys.size()), static_cast<uint32_t>(pool.size()),
                 static_cast<uint16_t>(piece.size()), static_cast<uint16_t>(ids.size())});
    keys.append(piece);
    pool.insert(pool.end(), ids.begin(), ids.end());
    ++used;
  }
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
  uint64_t h = 0;
  if (cacheable) {
    h = Cache::hash_of(piece);
    if (const Cache::Slot* s = cache.find(piece, h)) {
      out->insert(out->end(), cache.pool.begin() + s->ids_off, cache.pool.begin() + s->ids_off + s->ids_len);
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
  if (cacheable && cache.used < kCacheEntries) cache.insert(piece, h, cache.scratch);
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
  // About 16 parts per thread, taken in turn, so threads finish together; no
  // smaller than 16 KiB, a cache's worth of words.
  const size_t target = std::clamp<size_t>(total / (static_cast<size_t>(num_threads()) * 16), 16 << 10, 1 << 20);
  std::vector<Part> parts;
  for (size_t d = 0; d < views.size(); ++d) split_added(d, views[d], target, &parts);

  std::vector<std::vector<uint32_t>> encoded(parts.size());
  // Threads take parts in turn rather than a fixed half each: on a machine
  // shared with other work, a fixed split waits for the thread that got the
  // least CPU (measured on 2 busy cores: 2 threads slower than 1).
  std::atomic<size_t> next{0};
  const int64_t workers = std::min<int64_t>(num_threads(), static_cast<int64_t>(parts.size()));
  parallel_for(0, workers, 1, [&](int64_t lo, int64_t hi) {
    Cache cache;
    for (int64_t w = lo; w < hi; ++w) {
      for (size_t i = next++; i < parts.size(); i = next++) {
        const Part& p = parts[i];
        auto& out = encoded[i];
        if (p.added_id >= 0) {
          out.push_back(static_cast<uint32_t>(p.added_id));
        } else {
          out.reserve((p.end - p.begin) / 3);
          encode_segment(views[p.doc].substr(p.begin, p.end - p.begin), p.prefix_space, cache, &out);
        }
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
