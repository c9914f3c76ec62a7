#include "braid/text/pretokenize.h"

namespace braid::text {

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> out;
  for_each_pretoken(text, [&](std::string_view piece) { out.push_back(piece); });
  return out;
}

bool is_safe_cut(std::string_view text, size_t pos) {
  if (pos == 0 || pos >= text.size()) return false;
  const auto here = static_cast<unsigned char>(text[pos]);
  const auto before = static_cast<unsigned char>(text[pos - 1]);
  const bool here_space = here == ' ' || (here >= '\t' && here <= '\r');
  const bool before_plain = before > ' ' && before < 0x7f;
  return here_space && before_plain;
}

}  // namespace braid::text
