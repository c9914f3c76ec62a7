#include "braid/data/idx.h"

#include <cstring>

#include "braid/base/error.h"
#include "braid/data/file_bytes.h"

namespace braid::data {

IdxArray parse_idx(const std::vector<std::byte>& b, const std::string& name) {
  auto byte = [&](size_t i) { return std::to_integer<uint32_t>(b[i]); };
  if (b.size() < 4) fail<IoError>("{}: truncated IDX header: {} bytes, need at least 4 at byte 0", name, b.size());
  if (byte(0) != 0 || byte(1) != 0) {
    fail<IoError>("{}: not an IDX file: bytes 0-1 are {:#04x} {:#04x}, expected 0x00 0x00", name, byte(0), byte(1));
  }
  if (byte(2) != 0x08) {
    fail<IoError>("{}: unsupported IDX element type {:#04x} at byte 2 (braid reads unsigned bytes, 0x08)", name, byte(2));
  }
  size_t ndim = byte(3);
  if (ndim == 0) fail<IoError>("{}: IDX file with 0 dimensions at byte 3", name);
  size_t header = 4 + 4 * ndim;
  if (b.size() < header) {
    fail<IoError>("{}: truncated IDX header at byte {}: {} dims need {} header bytes", name, b.size(), ndim, header);
  }
  IdxArray out;
  int64_t count = 1;
  for (size_t d = 0; d < ndim; ++d) {
    size_t at = 4 + 4 * d;
    int64_t n = (int64_t{byte(at)} << 24) | (byte(at + 1) << 16) | (byte(at + 2) << 8) | byte(at + 3);
    out.dims.push_back(n);
    // Checked before multiplying: 2^40 times a u32 dimension overflows int64.
    if (n != 0 && count > (int64_t{1} << 40) / n)
      fail<IoError>("{}: implausible IDX dimension {} at byte {}", name, n, at);
    count *= n;
  }
  size_t payload = b.size() - header;
  if (payload < static_cast<size_t>(count)) {
    fail<IoError>("{}: truncated IDX data: header promises {} bytes from byte {}, file ends at byte {}", name,
                  count, header, b.size());
  }
  if (payload > static_cast<size_t>(count)) {
    fail<IoError>("{}: IDX file has {} unexpected trailing bytes at byte {}", name, payload - count, header + count);
  }
  // A copy, not memcpy: an empty array's data() may be null, which memcpy must not get even for 0 bytes.
  const auto* values = reinterpret_cast<const uint8_t*>(b.data() + header);
  out.values.assign(values, values + count);
  return out;
}

IdxArray read_idx(const std::string& path) { return parse_idx(read_maybe_gzip(path), path); }

}  // namespace braid::data
