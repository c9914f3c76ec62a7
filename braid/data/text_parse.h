// Small helpers shared by the text-format readers (CSV, libsvm): a line
// cursor that knows file:line:column for error messages, and strict number
// parsing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace braid::data {

// Position of a token in a text file, for messages: "path:line:column" (1-based).
struct TextPos {
  const std::string* path;
  int64_t line;
  int64_t column;
  std::string str() const;
};

// Parses all of `token` as a float / integer, or throws IoError
// "<pos>: expected <what>, found '<token>'".
float parse_float(std::string_view token, const TextPos& pos, const char* what);
int64_t parse_int(std::string_view token, const TextPos& pos, const char* what);

}  // namespace braid::data
