// The little of Unicode a byte-level BPE needs: UTF-8 decoding that turns
// invalid bytes into U+FFFD exactly as Python's errors="replace" does (so a
// file read by Hugging Face users through Python gives the same ids), and the
// three classes the GPT-2 pre-tokenizer's pattern names: \p{L}, \p{N}, \s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace braid::text {

struct CodePointRange {
  uint32_t lo, hi;  // inclusive
};

enum class CharClass : uint8_t { Other, Letter, Number, Space };

// \p{L} (Lu Ll Lt Lm Lo), \p{N} (Nd Nl No), \s (the White_Space property, as
// Oniguruma's \s matches on Unicode text), or anything else.
CharClass classify(uint32_t cp);

// Decodes the code point at p (p < end) into *cp and returns its length in
// bytes. An ill-formed sequence gives U+FFFD and the length of its maximal
// subpart (at least 1): the Unicode "substitution of maximal subparts" that
// Python's decoder follows, so "\xe2\x82!" is one U+FFFD and then "!".
size_t decode_utf8(const char* p, const char* end, uint32_t* cp);

// `bytes` with every ill-formed sequence replaced by U+FFFD (EF BF BD). Returns
// false and leaves *out untouched when `bytes` is already valid UTF-8.
bool repair_utf8(std::string_view bytes, std::string* out);

namespace detail {
extern const CodePointRange kLetters[];
extern const size_t kLetters_size;
extern const CodePointRange kNumbers[];
extern const size_t kNumbers_size;
}  // namespace detail

}  // namespace braid::text
