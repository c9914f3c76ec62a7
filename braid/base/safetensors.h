// The safetensors file format (huggingface/safetensors), so checkpoints open
// in Python tools:
//   bytes 0-7   header length N, unsigned little-endian
//   bytes 8..   N bytes of JSON: {"__metadata__": {str: str},
//               "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...}
//               padded with spaces to a multiple of 8
//   then        the data buffer; offsets are relative to its start, and the
//               tensors tile it with no gaps.
// braid adds "braid.crc32" (hex CRC-32 of the data buffer) to __metadata__ and
// refuses a file whose data does not match it, so a torn or tampered
// checkpoint is detected even when its length is right.
//
// This layer works on raw bytes; braid/tensor's Tensor converts to and from
// these views (dtype names: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace braid::safetensors {

using Metadata = std::map<std::string, std::string>;

// A tensor to write: its bytes are row-major, size = numel * dtype size.
struct TensorRef {
  std::string dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};

// A tensor read back (owns its bytes).
struct TensorData {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};

struct File {
  std::map<std::string, TensorData> tensors;
  Metadata metadata;  // without braid.crc32
};

// Bytes per element of a safetensors dtype name; 0 if unknown.
size_t dtype_size(const std::string& dtype);

// The bytes before the data buffer (length and header) of a file whose data
// buffer holds `tensors` back to back in the order given, whose data has
// CRC-32 `data_crc`: for writers that stream the data from their own buffers
// (sharded checkpoints write a staging buffer as it is). The spans' bytes are
// not read.
std::vector<std::byte> header(const std::vector<std::pair<std::string, TensorRef>>& tensors, const Metadata& metadata,
                              uint32_t data_crc);

// The complete file contents. ValueError for unknown dtypes or sizes that do
// not match the shape; the key "__metadata__" is reserved.
std::vector<std::byte> serialize(const std::map<std::string, TensorRef>& tensors, const Metadata& metadata = {});
// Serialises and writes atomically (temp file + fsync + rename + fsync folder).
void write(const std::string& path, const std::map<std::string, TensorRef>& tensors, const Metadata& metadata = {});

// Parses and verifies a file. IoError naming `name` when it is truncated, has
// a malformed header or offsets, or its data fails the braid.crc32 check.
// Files without braid.crc32 (written by other tools) are accepted unverified.
File parse(std::span<const std::byte> bytes, const std::string& name);
File read(const std::string& path);
// Only the header's __metadata__ (without braid.crc32), reading the header
// and not the data: the data is not verified. IoError naming `path` when the
// header is truncated or malformed.
Metadata read_metadata(const std::string& path);

}  // namespace braid::safetensors
