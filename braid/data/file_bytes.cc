#include "braid/data/file_bytes.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "braid/base/error.h"

namespace braid::data {

std::vector<std::byte> read_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail<IoError>("cannot open {}: {}", path, std::strerror(errno));
  std::vector<std::byte> out;
  std::byte chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) out.insert(out.end(), chunk, chunk + n);
  if (std::ferror(f.get())) fail<IoError>("error reading {}: {}", path, std::strerror(errno));
  return out;
}

std::vector<std::byte> gunzip(const std::vector<std::byte>& in, const std::string& name, size_t max_bytes) {
  z_stream z{};
  // 16 + MAX_WBITS: expect a gzip header and check its CRC-32 and length trailer.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail<IoError>("{}: zlib init failed", name);
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, &inflateEnd);
  std::vector<std::byte> out(std::min(in.size() * 4 + 1024, max_bytes));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  // zlib counts in uInt (32 bits): larger inputs and outputs go in 1 GiB windows.
  constexpr size_t kWindow = size_t{1} << 30;
  size_t fed = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (z.avail_in == 0 && fed < in.size()) {
      z.avail_in = static_cast<uInt>(std::min(kWindow, in.size() - fed));
      fed += z.avail_in;
    }
    // At the bound inflate runs on with no room: it may still reach the end
    // (the trailer needs none), and otherwise stops with Z_BUF_ERROR.
    if (z.total_out == out.size() && out.size() < max_bytes) out.resize(std::min(out.size() * 2, max_bytes));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + z.total_out);
    z.avail_out = static_cast<uInt>(std::min(kWindow, out.size() - z.total_out));
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR) {
      fail<IoError>("{}: corrupt gzip data at compressed byte {} (after {} decoded bytes): {}", name,
                    z.total_in, z.total_out, z.msg ? z.msg : "invalid stream");
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && fed == in.size()) {
      fail<IoError>("{}: truncated gzip stream: input ends at byte {} before the end of the compressed data "
                    "(after {} decoded bytes)", name, in.size(), z.total_out);
    }
    if (rc == Z_BUF_ERROR && z.total_out == max_bytes) {
      fail<IoError>("{}: gzip data decodes to more than {} bytes (at compressed byte {}); refused", name, max_bytes,
                    z.total_in);
    }
  }
  out.resize(z.total_out);
  return out;
}

std::vector<std::byte> read_maybe_gzip(const std::string& path, size_t max_bytes) {
  std::vector<std::byte> raw = read_file(path);
  bool gz = raw.size() >= 2 && raw[0] == std::byte{0x1f} && raw[1] == std::byte{0x8b};
  return gz ? gunzip(raw, path, max_bytes) : raw;
}

}  // namespace braid::data
