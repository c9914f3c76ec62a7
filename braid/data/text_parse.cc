#include "braid/data/text_parse.h"

#include <charconv>
#include <cmath>

#include "braid/base/error.h"

namespace braid::data {

std::string TextPos::str() const { return fmt::format("{}:{}:{}", *path, line, column); }

float parse_float(std::string_view token, const TextPos& pos, const char* what) {
  float v = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (token.empty() || ec != std::errc() || end != token.data() + token.size() || !std::isfinite(v)) {
    fail<IoError>("{}: expected {}, found '{}'", pos.str(), what, token);
  }
  return v;
}

int64_t parse_int(std::string_view token, const TextPos& pos, const char* what) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (token.empty() || ec != std::errc() || end != token.data() + token.size()) {
    fail<IoError>("{}: expected {}, found '{}'", pos.str(), what, token);
  }
  return v;
}

}  // namespace braid::data
