#include "braid/text/byte_level.h"

#include "braid/text/unicode.h"

namespace braid::text {

const std::array<uint32_t, 256>& byte_to_char() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> a{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      a[b] = printable ? b : next++;
    }
    return a;
  }();
  return t;
}

int char_to_byte(uint32_t cp) {
  static const std::array<int16_t, 512> t = [] {
    std::array<int16_t, 512> a;
    a.fill(-1);
    const auto& f = byte_to_char();
    for (int b = 0; b < 256; ++b) a[f[b]] = static_cast<int16_t>(b);
    return a;
  }();
  return cp < t.size() ? t[cp] : -1;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  const auto& f = byte_to_char();
  for (const char c : bytes) append_utf8(f[static_cast<unsigned char>(c)], &out);
  return out;
}

bool from_byte_level(std::string_view token, std::string* out) {
  std::string r;
  const char* p = token.data();
  const char* end = p + token.size();
  while (p < end) {
    uint32_t cp;
    p += decode_utf8(p, end, &cp);
    const int b = char_to_byte(cp);
    if (b < 0) return false;
    r.push_back(static_cast<char>(b));
  }
  *out = std::move(r);
  return true;
}

}  // namespace braid::text
