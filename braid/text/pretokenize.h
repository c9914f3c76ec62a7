// GPT-2's pre-tokenizer: splits text into the pieces BPE then encodes, exactly
// as the pattern that GPT-2, Hugging Face's ByteLevel pre-tokenizer and
// tiktoken's r50k use,
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// but as a hand-written scan over UTF-8 instead of a regex engine (measured on
// 2 cores: several times faster than the backtracking engines that the pattern's
// look-ahead needs). The pattern, read as a state machine:
//   - a contraction ('s 't 're 've 'm 'll 'd, lower case only) is one piece;
//   - otherwise an optional ' ' and then a maximal run of one class: letters,
//     numbers, or "other" (neither letter, number nor space);
//   - a whitespace run is one piece when the text ends after it; followed by a
//     non-space it gives all but its last character, which then starts the next
//     piece (" word") or, when it is not ' ', stands alone.
#pragma once

#include <string_view>
#include <vector>

#include "braid/text/unicode.h"

namespace braid::text {

namespace detail {
inline size_t peek(const char* p, const char* end, uint32_t* cp, CharClass* k) {
  const auto b = static_cast<unsigned char>(*p);
  size_t n = 1;
  if (b < 0x80) {
    *cp = b;
  } else {
    n = decode_utf8(p, end, cp);
  }
  *k = classify(*cp);
  return n;
}
}  // namespace detail

// Calls emit(std::string_view piece) for each piece of `text`, in order; the
// pieces concatenate to `text`. `text` should be valid UTF-8 (repair_utf8);
// an ill-formed byte is classed as U+FFFD is.
template <class Emit>
void for_each_pretoken(std::string_view text, Emit&& emit) {
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    uint32_t c;
    CharClass k;
    size_t n = detail::peek(p, end, &c, &k);
    const char* const start = p;
    if (c == '\'' && p + 1 < end) {
      const char c1 = p[1];
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        emit(std::string_view(start, 2));
        p += 2;
        continue;
      }
      if (p + 2 < end) {
        const char c2 = p[2];
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          emit(std::string_view(start, 3));
          p += 3;
          continue;
        }
      }
    }
    if (c == ' ' && p + 1 < end) {
      uint32_t d;
      CharClass kd;
      const size_t m = detail::peek(p + 1, end, &d, &kd);
      if (kd != CharClass::Space) {  // " " joins the run that follows
        k = kd;
        p += 1;
        n = m;
      }
    }
    if (k != CharClass::Space) {
      const char* q = p + n;
      while (q < end) {
        uint32_t d;
        CharClass kd;
        const size_t m = detail::peek(q, end, &d, &kd);
        if (kd != k) break;
        q += m;
      }
      emit(std::string_view(start, static_cast<size_t>(q - start)));
      p = q;
      continue;
    }
    const char* q = p + n;
    const char* last = p;  // start of the run's last character
    while (q < end) {
      uint32_t d;
      CharClass kd;
      const size_t m = detail::peek(q, end, &d, &kd);
      if (kd != CharClass::Space) break;
      last = q;
      q += m;
    }
    if (q == end || last == p) {
      emit(std::string_view(p, static_cast<size_t>(q - p)));
      p = q;
    } else {
      emit(std::string_view(p, static_cast<size_t>(last - p)));
      p = last;
    }
  }
}

// The pieces as a list (tests, tools); encoders use for_each_pretoken.
std::vector<std::string_view> pretokenize(std::string_view text);

// Whether `text` may be cut at `pos` into two parts whose pieces are the
// pieces of the whole: `pos` starts an ASCII whitespace character that follows
// a non-space ASCII character. No piece reaches across such a point, and a
// piece never takes a trailing space, so parts can be pre-tokenized apart (in
// parallel) with the same result.
bool is_safe_cut(std::string_view text, size_t pos);

}  // namespace braid::text
