// Reading whole data files into memory, with gzip decoding (zlib).
//
// Datasets here are small enough (Fashion-MNIST: 30 MB compressed, 55 MB raw)
// to read whole; decoding from memory lets a corrupt stream be reported with
// the exact compressed byte where zlib gave up.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace braid::data {

// Bound on a gzip stream's decoded size (bytes). Deflate expands up to about
// 1000x, so a small hostile file could otherwise claim any amount of memory;
// braid's datasets decode to well under this (Fashion-MNIST: 55 MB).
inline constexpr size_t kMaxDecodedBytes = size_t{16} << 30;

// The file's bytes. IoError naming the path when it is missing or unreadable.
std::vector<std::byte> read_file(const std::string& path);

// The decoded contents of a gzip file (a plain file is returned as is, so a
// user may gunzip a dataset by hand). Corrupt or truncated streams, and
// streams that decode to more than `max_bytes`, throw IoError naming the file
// and the compressed byte offset.
std::vector<std::byte> read_maybe_gzip(const std::string& path, size_t max_bytes = kMaxDecodedBytes);

// Decodes an in-memory gzip stream; `name` is used in error messages.
std::vector<std::byte> gunzip(const std::vector<std::byte>& compressed, const std::string& name,
                              size_t max_bytes = kMaxDecodedBytes);

}  // namespace braid::data
