#include "braid/data/text_parse.h"

#include <charconv>
#include <cmath>

#include "braid/base/error.h"

namespace braid::data {

std::string TextPos::str() const { return fmt::format("{}:{}:{}", *path, line, column); }

namespace {
// from_chars rejects the leading '+' that libsvm files use for positive labels.
std::string_view drop_plus(std::string_view t) {
  return t.size() > 1 && t[0] == '+' && t[1] != '-' && t[1] != '+' ? t.substr(1) : t;
}
}  // namespace

float parse_float(std::string_view token, const TextPos& pos, const char* what) {
  float v = 0;
  std::string_view t = drop_plus(token);
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) {
    fail<IoError>("{}: expected {}, found '{}'", pos.str(), what, token);
  }
  return v;
}

int64_t parse_int(std::string_view token, const TextPos& pos, const char* what) {
  int64_t v = 0;
  std::string_view t = drop_plus(token);
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
    fail<IoError>("{}: expected {}, found '{}'", pos.str(), what, token);
  }
  return v;
}

}  // namespace braid::data
