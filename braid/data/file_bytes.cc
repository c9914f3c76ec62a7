#include "braid/data/file_bytes.h"

#include <zlib.h>

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

std::vector<std::byte> gunzip(const std::vector<std::byte>& in, const std::string& name) {
  z_stream z{};
  // 16 + MAX_WBITS: expect a gzip header and check its CRC-32 and length trailer.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail<IoError>("{}: zlib init failed", name);
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, &inflateEnd);
  std::vector<std::byte> out(in.size() * 4 + 1024);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (z.total_out == out.size()) out.resize(out.size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + z.total_out);
    z.avail_out = static_cast<uInt>(out.size() - z.total_out);
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR) {
      fail<IoError>("{}: corrupt gzip data at compressed byte {} (after {} decoded bytes): {}", name,
                    z.total_in, z.total_out, z.msg ? z.msg : "invalid stream");
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0) {
      fail<IoError>("{}: truncated gzip stream: input ends at byte {} before the end of the compressed data "
                    "(after {} decoded bytes)", name, in.size(), z.total_out);
    }
  }
  out.resize(z.total_out);
  return out;
}

std::vector<std::byte> read_maybe_gzip(const std::string& path) {
  std::vector<std::byte> raw = read_file(path);
  bool gz = raw.size() >= 2 && raw[0] == std::byte{0x1f} && raw[1] == std::byte{0x8b};
  return gz ? gunzip(raw, path) : raw;
}

}  // namespace braid::data
