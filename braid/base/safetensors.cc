#include "braid/base/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <string_view>

#include "braid/base/abridge.h"
#include "braid/base/atomic_file.h"
#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/json_number.h"

namespace braid::safetensors {

namespace {

constexpr const char* kCrcKey = "braid.crc32";
constexpr uint64_t kMaxHeader = 100 << 20;  // bytes; the limit Python's reader uses
constexpr size_t kMaxDims = 64;             // a tensor's dimensions

// Elements of `shape`, or -1 when a dimension is negative or the product
// (times 8, the widest dtype, so byte sizes fit too) overflows 63 bits.
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n > (int64_t{1} << 60) ? -1 : n;
}

// The header's length, the first 8 bytes little-endian; IoError naming the
// file when it is beyond what a safetensors file may have.
uint64_t header_length(const std::byte* first8, const std::string& name) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::to_integer<uint64_t>(first8[i]) << (8 * i);
  if (n > kMaxHeader) fail<IoError>("{}: not a safetensors file: header length {} at byte 0 is implausible", name, n);
  return n;
}

// A shape or data_offsets list: non-negative integers below 2^63, else
// IoError naming the tensor and the field. nlohmann's get<> converts a JSON
// float with a cast, undefined behaviour out of range ([1e30]) and silently
// truncating in range ([0.5] read as 0).
std::vector<int64_t> counts_of(const nlohmann::json& entry, const char* field, const std::string& tensor,
                               const std::string& name) {
  const nlohmann::json& list = entry.at(field);
  if (!list.is_array()) {
    fail<IoError>("{}: corrupt safetensors header: tensor {}: {} is not a list of non-negative integers ({})", name,
                  abridge(tensor), field, abridge(list.dump()));
  }
  std::vector<int64_t> out;
  out.reserve(std::min<size_t>(list.size(), kMaxDims + 1));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::optional<int64_t> v = json_integer_if<int64_t>(list[i]);
    if (!v || *v < 0) {
      fail<IoError>("{}: corrupt safetensors header: tensor {}: {}[{}] = {} is not a non-negative integer below 2^63",
                    name, abridge(tensor), field, i, abridge(list[i].dump()));
    }
    out.push_back(*v);
  }
  return out;
}

nlohmann::json parse_header(std::string_view text, const std::string& name) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("{}: corrupt safetensors header (JSON at bytes 8..{}): {}", name, 8 + text.size(), e.what());
  }
  if (!header.is_object()) fail<IoError>("{}: corrupt safetensors header: not a JSON object", name);
  return header;
}

// The header's __metadata__ without braid.crc32, which goes to `crc`.
Metadata metadata_of(const nlohmann::json& header, const std::string& name, std::string* crc) {
  Metadata out;
  const auto it = header.find("__metadata__");
  if (it == header.end()) return out;
  try {
    for (auto& [k, v] : it->items()) {
      if (k == kCrcKey) *crc = v.get<std::string>();
      else out[k] = v.get<std::string>();
    }
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("{}: corrupt safetensors header: {}", name, e.what());
  }
  return out;
}

}  // namespace

size_t dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

std::vector<std::byte> header(const std::vector<std::pair<std::string, TensorRef>>& tensors, const Metadata& metadata,
                              uint32_t data_crc) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  Metadata meta = metadata;
  uint64_t offset = 0;
  nlohmann::ordered_json entries = nlohmann::ordered_json::object();
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail<ValueError>("safetensors: the tensor name __metadata__ is reserved");
    if (entries.contains(name)) fail<ValueError>("safetensors: tensor {} is named twice", name);
    size_t size = dtype_size(t.dtype);
    if (size == 0) fail<ValueError>("safetensors: tensor {} has unknown dtype '{}'", name, t.dtype);
    int64_t n = checked_numel(t.shape);
    if (n < 0 || static_cast<size_t>(n) * size != t.data.size()) {
      fail<ValueError>("safetensors: tensor {} of shape {} and dtype {} needs {} bytes, got {}", name, t.shape,
                       t.dtype, n * static_cast<int64_t>(size), t.data.size());
    }
    entries[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  meta[kCrcKey] = fmt::format("{:08x}", data_crc);
  header["__metadata__"] = meta;
  for (auto& [k, v] : entries.items()) header[k] = v;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::vector<std::byte> out(8 + text.size());
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  return out;
}

std::vector<std::byte> serialize(const std::map<std::string, TensorRef>& tensors, const Metadata& metadata) {
  std::vector<std::pair<std::string, TensorRef>> ordered(tensors.begin(), tensors.end());
  uint32_t crc = 0;
  size_t bytes = 0;
  for (const auto& [name, t] : ordered) crc = crc32(t.data, crc), bytes += t.data.size();
  std::vector<std::byte> out = header(ordered, metadata, crc);
  out.reserve(out.size() + bytes);
  for (const auto& [name, t] : ordered) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

void write(const std::string& path, const std::map<std::string, TensorRef>& tensors, const Metadata& metadata) {
  write_file_atomic(path, serialize(tensors, metadata));
}

File parse(std::span<const std::byte> bytes, const std::string& name) {
  if (bytes.size() < 8) fail<IoError>("{}: truncated safetensors file: {} bytes, the header length alone needs 8", name, bytes.size());
  const uint64_t n = header_length(bytes.data(), name);
  if (n > bytes.size() - 8) {
    fail<IoError>("{}: truncated safetensors file: header of {} bytes, but only {} bytes follow the length", name, n,
                  bytes.size() - 8);
  }
  const nlohmann::json header = parse_header({reinterpret_cast<const char*>(bytes.data() + 8), n}, name);
  std::span<const std::byte> data = bytes.subspan(8 + n);
  File out;
  std::string expected_crc;
  out.metadata = metadata_of(header, name, &expected_crc);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  try {
    for (auto& [key, v] : header.items()) {
      if (key == "__metadata__") continue;
      TensorData t;
      t.dtype = v.at("dtype").get<std::string>();
      t.shape = counts_of(v, "shape", key, name);
      std::vector<uint64_t> off;
      for (int64_t o : counts_of(v, "data_offsets", key, name)) off.push_back(static_cast<uint64_t>(o));
      size_t size = dtype_size(t.dtype);
      int64_t numel = checked_numel(t.shape);
      if (size == 0) fail<IoError>("{}: tensor {} has unknown dtype '{}'", name, key, t.dtype);
      if (t.shape.size() > kMaxDims) fail<IoError>("{}: tensor {} has {} dimensions (at most {})", name, key, t.shape.size(), kMaxDims);
      if (off.size() != 2 || off[0] > off[1] || numel < 0 || off[1] - off[0] != static_cast<uint64_t>(numel) * size) {
        fail<IoError>("{}: corrupt safetensors header: tensor {} has offsets {} for shape {} of {}", name, key, off,
                      t.shape, t.dtype);
      }
      if (off[1] > data.size()) {
        fail<IoError>("{}: truncated safetensors file: tensor {} ends at data byte {} (file byte {}), but the file "
                      "has {} bytes", name, key, off[1], 8 + n + off[1], bytes.size());
      }
      t.data.assign(data.begin() + static_cast<ptrdiff_t>(off[0]), data.begin() + static_cast<ptrdiff_t>(off[1]));
      ranges.emplace_back(off[0], off[1]);
      out.tensors.emplace(key, std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("{}: corrupt safetensors header: {}", name, e.what());
  }
  // The tensors must tile the data buffer exactly (as Python's reader requires).
  std::sort(ranges.begin(), ranges.end());
  uint64_t end = 0;
  for (auto [b, e] : ranges) {
    if (b != end) fail<IoError>("{}: corrupt safetensors header: data bytes {}..{} overlap or leave a gap", name, std::min(b, end), std::max(b, end));
    end = e;
  }
  if (end != data.size()) {
    fail<IoError>("{}: safetensors data is {} bytes but the header describes {}: truncated or appended to", name,
                  data.size(), end);
  }
  if (!expected_crc.empty()) {
    std::string actual = fmt::format("{:08x}", crc32(data));
    if (actual != expected_crc) {
      fail<IoError>("{}: checksum mismatch: data CRC-32 is {}, the header records {}; the file is corrupt or was "
                    "modified", name, actual, expected_crc);
    }
  }
  return out;
}

File read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("cannot open safetensors file {}", path);
  std::vector<char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail<IoError>("error reading {}", path);
  return parse({reinterpret_cast<const std::byte*>(buf.data()), buf.size()}, path);
}

Metadata read_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("cannot open safetensors file {}", path);
  std::byte len[8];
  if (!in.read(reinterpret_cast<char*>(len), 8)) fail<IoError>("{}: truncated safetensors file: no header length", path);
  const uint64_t n = header_length(len, path);
  std::string text(n, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(n)))
    fail<IoError>("{}: truncated safetensors file: the header of {} bytes is cut short", path, n);
  std::string crc;  // the data's; not read here
  return metadata_of(parse_header(text, path), path, &crc);
}

}  // namespace braid::safetensors
