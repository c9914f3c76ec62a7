// Values quoted in error messages, cut to a readable length.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace braid {

// `text` as an error message may quote it: whole when it has at most `max`
// bytes, else its first `max` bytes or fewer (never half a UTF-8 character),
// "..." and its whole length: "aaaa... (20971520 bytes)". A message names
// what was wrong in one line; a 20 MB config value echoed whole buries it.
std::string abridge(std::string_view text, size_t max = 80);

}  // namespace braid
