// The IDX format (LeCun's MNIST files, also used by Fashion-MNIST):
//   bytes 0-1  zero; byte 2  element type (0x08 = u8); byte 3  number of dims;
//   then one big-endian u32 per dim; then the elements, row-major.
// braid reads the unsigned-byte type, the only one the MNIST family uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace braid::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // row-major, product(dims) entries
};

// Parses an IDX file (gzip or plain). Malformed headers, unsupported element
// types and truncated or over-long payloads throw IoError naming the file and
// the byte offset (in the decoded stream).
IdxArray read_idx(const std::string& path);
IdxArray parse_idx(const std::vector<std::byte>& bytes, const std::string& name);

}  // namespace braid::data
