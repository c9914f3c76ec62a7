// GPT-2's byte-to-unicode table: byte-level BPE vocabularies spell each byte as
// one printable character, so vocab.json and merges.txt stay valid text. The
// 188 printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the
// other 68, in byte order, become U+0100, U+0101, ... (' ' is 'Ġ', '\n' is 'Ċ').
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace braid::text {

// The character (code point) standing for each byte.
const std::array<uint32_t, 256>& byte_to_char();
// The byte a character stands for, or -1 when it stands for none.
int char_to_byte(uint32_t cp);

// The byte-level spelling of `bytes` (UTF-8 of the mapped characters).
std::string to_byte_level(std::string_view bytes);
// The bytes a byte-level token spells. False when a character of `token`
// stands for no byte (added tokens such as "<|endoftext|>" are spelled in
// mapped characters too, so this is false only for foreign vocabularies).
bool from_byte_level(std::string_view token, std::string* out);

void append_utf8(uint32_t cp, std::string* out);

}  // namespace braid::text
