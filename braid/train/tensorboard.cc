#include "braid/train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "braid/base/error.h"

namespace braid::train {

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;  // reflected Castagnoli
    t[i] = c;
  }
  return t;
}
constexpr auto kCrc32cTable = make_crc32c_table();

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <class T>
void put_fixed(std::string& out, T v) {  // little-endian, as protobuf and TFRecord store it
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::span<const uint8_t> u8(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

}  // namespace

uint32_t crc32c(std::span<const uint8_t> data) {
  uint32_t c = 0xffffffffu;
  for (uint8_t b : data) c = kCrc32cTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(std::span<const uint8_t> data) {
  uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string encode_file_version_event(double wall_time, const std::string& version) {
  std::string e;
  e.push_back(0x09);  // field 1, fixed64
  put_fixed(e, wall_time);
  put_bytes_field(e, 3, version);
  return e;
}

std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;
  put_bytes_field(v, 1, tag);
  v.push_back(0x15);  // field 2, fixed32
  put_fixed(v, value);
  std::string summary;
  put_bytes_field(summary, 1, v);
  std::string e;
  e.push_back(0x09);
  put_fixed(e, wall_time);
  e.push_back(0x10);  // field 2, varint
  put_varint(e, static_cast<uint64_t>(step));
  put_bytes_field(e, 5, summary);
  return e;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail<IoError>("cannot create TensorBoard folder {}: {}", dir, ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  double t = now_seconds();
  path_ = (std::filesystem::path(dir) / fmt::format("events.out.tfevents.{}.{}", static_cast<int64_t>(t), host)).string();
  // Two writers started in the same second (a resumed run) must not share a file.
  for (int k = 1; std::filesystem::exists(path_); ++k) {
    path_ = (std::filesystem::path(dir) / fmt::format("events.out.tfevents.{}.{}.{}", static_cast<int64_t>(t), host, k)).string();
  }
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) fail<IoError>("cannot create {}: {}", path_, std::strerror(errno));
  write_record(encode_file_version_event(t, "brain.Event:2"));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::write_record(const std::string& payload) {
  std::string rec;
  put_fixed(rec, static_cast<uint64_t>(payload.size()));
  uint32_t len_crc = masked_crc32c(u8(rec));
  put_fixed(rec, len_crc);
  rec += payload;
  put_fixed(rec, masked_crc32c(u8(payload)));
  if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size()) {
    fail<IoError>("writing {}: {}", path_, std::strerror(errno));
  }
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  add_scalar(tag, value, step, now_seconds());
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  write_record(encode_scalar_event(wall_time, step, tag, static_cast<float>(value)));
}

void TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0) fail<IoError>("flushing {}: {}", path_, std::strerror(errno));
}

std::vector<std::string> read_tfrecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("cannot open {}", path);
  std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  size_t at = 0;
  while (at < b.size()) {
    if (b.size() - at < 12) fail<IoError>("{}: truncated record header at byte {}", path, at);
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, b.data() + at, 8);
    std::memcpy(&len_crc, b.data() + at + 8, 4);
    if (len_crc != masked_crc32c(u8(b.substr(at, 8)))) fail<IoError>("{}: bad length CRC at byte {}", path, at);
    if (b.size() - at - 12 < len + 4) fail<IoError>("{}: truncated record at byte {}", path, at);
    std::string payload = b.substr(at + 12, len);
    std::memcpy(&data_crc, b.data() + at + 12 + len, 4);
    if (data_crc != masked_crc32c(u8(payload))) fail<IoError>("{}: bad data CRC in record at byte {}", path, at);
    out.push_back(std::move(payload));
    at += 16 + len;
  }
  return out;
}

namespace {

// A minimal protobuf reader over one message.
struct Reader {
  const std::string& s;
  size_t at = 0;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= s.size()) fail<IoError>("malformed event: varint runs past the end");
      auto b = static_cast<uint8_t>(s[at++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail<IoError>("malformed event: varint too long");
  }
  std::string bytes(size_t n) {
    if (s.size() - at < n) fail<IoError>("malformed event: field of {} bytes runs past the end", n);
    std::string r = s.substr(at, n);
    at += n;
    return r;
  }
  void skip(uint32_t wire) {
    if (wire == 0) varint();
    else if (wire == 1) bytes(8);
    else if (wire == 2) bytes(varint());
    else if (wire == 5) bytes(4);
    else fail<IoError>("malformed event: wire type {}", wire);
  }
};

template <class T>
T fixed(const std::string& b) {
  T v;
  std::memcpy(&v, b.data(), sizeof(T));
  return v;
}

}  // namespace

ScalarEvent decode_event(const std::string& payload) {
  ScalarEvent e;
  Reader r{payload};
  while (r.at < payload.size()) {
    uint64_t key = r.varint();
    auto field = static_cast<uint32_t>(key >> 3), wire = static_cast<uint32_t>(key & 7);
    if (field == 1 && wire == 1) e.wall_time = fixed<double>(r.bytes(8));
    else if (field == 2 && wire == 0) e.step = static_cast<int64_t>(r.varint());
    else if (field == 3 && wire == 2) e.file_version = r.bytes(r.varint());
    else if (field == 5 && wire == 2) {
      std::string summary = r.bytes(r.varint());
      Reader sr{summary};
      while (sr.at < summary.size()) {
        uint64_t k = sr.varint();
        if ((k >> 3) != 1 || (k & 7) != 2) { sr.skip(static_cast<uint32_t>(k & 7)); continue; }
        std::string value = sr.bytes(sr.varint());
        Reader vr{value};
        while (vr.at < value.size()) {
          uint64_t vk = vr.varint();
          if (vk == 0x0a) e.tag = vr.bytes(vr.varint());
          else if (vk == 0x15) e.value = fixed<float>(vr.bytes(4));
          else vr.skip(static_cast<uint32_t>(vk & 7));
        }
      }
    } else {
      r.skip(wire);
    }
  }
  return e;
}

}  // namespace braid::train
