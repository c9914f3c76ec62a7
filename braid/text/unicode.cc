#include "braid/text/unicode.h"

#include <algorithm>
#include <array>

namespace braid::text {
namespace {

bool in_ranges(const CodePointRange* r, size_t n, uint32_t cp) {
  const CodePointRange* end = r + n;
  const CodePointRange* it = std::upper_bound(r, end, cp, [](uint32_t c, const CodePointRange& x) { return c < x.lo; });
  return it != r && cp <= (it - 1)->hi;
}

bool is_white_space(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xd) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

CharClass classify_slow(uint32_t cp) {
  if (is_white_space(cp)) return CharClass::Space;
  if (in_ranges(detail::kLetters, detail::kLetters_size, cp)) return CharClass::Letter;
  if (in_ranges(detail::kNumbers, detail::kNumbers_size, cp)) return CharClass::Number;
  return CharClass::Other;
}

// Code points below 0x800 (ASCII, Latin, Greek, Cyrillic, Hebrew, Arabic) by table.
const std::array<CharClass, 0x800>& low_table() {
  static const std::array<CharClass, 0x800> t = [] {
    std::array<CharClass, 0x800> a{};
    for (uint32_t c = 0; c < a.size(); ++c) a[c] = classify_slow(c);
    return a;
  }();
  return t;
}

}  // namespace

CharClass classify(uint32_t cp) {
  if (cp < 0x800) return low_table()[cp];
  return classify_slow(cp);
}

size_t decode_utf8(const char* p, const char* end, uint32_t* cp) {
  const auto* s = reinterpret_cast<const unsigned char*>(p);
  const size_t avail = static_cast<size_t>(end - p);
  const unsigned b0 = s[0];
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t need;
  uint32_t v;
  unsigned lo = 0x80, hi = 0xbf;  // the second byte's valid range
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    need = 2, v = b0 & 0x1f;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    need = 3, v = b0 & 0x0f;
    if (b0 == 0xe0) lo = 0xa0;  // overlong
    if (b0 == 0xed) hi = 0x9f;  // surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    need = 4, v = b0 & 0x07;
    if (b0 == 0xf0) lo = 0x90;  // overlong
    if (b0 == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    *cp = 0xfffd;
    return 1;
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= avail) {
      *cp = 0xfffd;
      return i;
    }
    const unsigned b = s[i];
    const unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
    if (b < l || b > h) {
      *cp = 0xfffd;
      return i;
    }
    v = (v << 6) | (b & 0x3f);
  }
  *cp = v;
  return need;
}

bool repair_utf8(std::string_view bytes, std::string* out) {
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  const char* bad = nullptr;
  while (p < end) {
    if (static_cast<unsigned char>(*p) < 0x80) {
      ++p;
      continue;
    }
    uint32_t cp;
    const size_t n = decode_utf8(p, end, &cp);
    if (cp == 0xfffd && !(n == 3 && static_cast<unsigned char>(p[0]) == 0xef)) {
      bad = p;
      break;
    }
    p += n;
  }
  if (bad == nullptr) return false;
  std::string r(bytes.data(), bad);
  r.reserve(bytes.size() + 16);
  p = bad;
  while (p < end) {
    uint32_t cp;
    const size_t n = decode_utf8(p, end, &cp);
    if (cp == 0xfffd)
      r += "\xef\xbf\xbd";
    else
      r.append(p, n);
    p += n;
  }
  *out = std::move(r);
  return true;
}

}  // namespace braid::text
