#include "braid/train/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "braid/base/atomic_file.h"
#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/json_number.h"
#include "braid/base/safetensors.h"
#include "braid/train/checkpoint_sidecar.h"

namespace braid::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimPrefix = "optim.";
constexpr const char* kPlanPrefix = "plan.";

}  // namespace

std::string safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::b8: return "BOOL";
  }
  return "?";
}

DType dtype_from_safetensors(const std::string& s, const std::string& what) {
  for (DType t : kAllDTypes) {
    if (safetensors_dtype(t) == s) return t;
  }
  fail<IoError>("{}: unsupported tensor dtype {}", what, s);
}

namespace {

Tensor to_tensor(const safetensors::TensorData& d, const std::string& what) {
  Tensor t = Tensor::empty(d.shape, dtype_from_safetensors(d.dtype, what));
  if (t.nbytes() != d.data.size()) fail<IoError>("{}: {} bytes for shape {}", what, d.data.size(), to_string(t.shape()));
  std::copy(d.data.begin(), d.data.end(), static_cast<std::byte*>(t.raw_data()));
  return t;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("cannot open checkpoint sidecar {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint32_t file_crc(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail<IoError>("cannot open checkpoint {}", path);
  std::vector<char> buf(1 << 20);
  uint32_t crc = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    crc = crc32({reinterpret_cast<const std::byte*>(buf.data()), n}, crc);
  }
  return crc;
}

// CRC-32 of the sidecar's compact JSON without its own CRC. The tensor file
// carries a CRC and the sidecar repeats it, but the sidecar itself (step,
// epoch, batch, RNG offset, optimizer scalars) was trusted as read: a step
// edited by hand or a damaged digit resumed silently at the wrong place.
uint32_t sidecar_crc(nlohmann::json side) {
  side.erase("sidecar_crc32");
  const std::string text = side.dump();
  return crc32({reinterpret_cast<const std::byte*>(text.data()), text.size()});
}

// The step a stem names ("<dir>/ckpt-00001200" -> 1200), if it has that form.
std::optional<int64_t> stem_step(const std::string& stem) {
  const std::string n = fs::path(stem).filename().string();
  if (n.size() != 13 || !n.starts_with("ckpt-")) return std::nullopt;
  if (!std::all_of(n.begin() + 5, n.end(), ::isdigit)) return std::nullopt;
  return std::stoll(n.substr(5));
}

// The model's tensors as "<model_prefix><name>", the optimizer's as
// "optim.<i>.<buffer>", in one safetensors file written atomically.
void write_tensors(const std::string& path, const Checkpoint& ckpt, const std::string& model_prefix,
                   const safetensors::Metadata& metadata) {
  std::map<std::string, safetensors::TensorRef> refs;
  std::vector<Tensor> keep;  // contiguous copies alive until written
  auto add = [&](const std::string& name, const Tensor& t) {
    Tensor c = t.to(Device::cpu).contiguous();  // a device's tensors are written from a host copy
    keep.push_back(c);
    refs[name] = {safetensors_dtype(c.dtype()), c.shape(),
                  {static_cast<const std::byte*>(c.raw_data()), c.nbytes()}};
  };
  for (const auto& [n, t] : ckpt.model) add(model_prefix + n, t);
  for (const auto& [n, t] : ckpt.optimizer.tensors) add(kOptimPrefix + n, t);
  for (const auto& [n, t] : ckpt.plan) add(kPlanPrefix + n, t);
  safetensors::write(path, refs, metadata);
}

}  // namespace

std::string checkpoint_stem(const std::string& dir, int64_t step) {
  return (fs::path(dir) / fmt::format("ckpt-{:08d}", step)).string();
}

void save_checkpoint(const std::string& dir, const Checkpoint& ckpt) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail<IoError>("cannot create checkpoint folder {}: {}", dir, ec.message());
  const std::string stem = checkpoint_stem(dir, ckpt.step);
  write_tensors(stem + ".safetensors", ckpt, kModelPrefix,
                {{"format", "braid-checkpoint"}, {"step", std::to_string(ckpt.step)}});
  nlohmann::json side = {{"step", ckpt.step},
                         {"epoch", ckpt.epoch},
                         {"batch", ckpt.batch},
                         {"rng", {{"seed", ckpt.rng.seed}, {"stream", ckpt.rng.stream}, {"offset", ckpt.rng.offset}}},
                         {"optimizer", ckpt.optimizer.scalars},
                         {"config", ckpt.config},
                         {"extra", ckpt.extra},
                         {"tensors_crc32", file_crc(stem + ".safetensors")}};
  side["sidecar_crc32"] = sidecar_crc(side);
  write_file_atomic(stem + ".json", side.dump(2) + "\n");
}

nlohmann::json read_checkpoint_sidecar(const std::string& stem) {
  const std::string path = stem + ".json";
  nlohmann::json side = parse_checkpoint_sidecar(read_text(path), path);
  const auto want = side.find("sidecar_crc32");
  if (want == side.end() || !want->is_number_unsigned())
    fail<IoError>("checkpoint sidecar {} has no sidecar_crc32: altered, or written by an older braid", path);
  if (const uint32_t got = sidecar_crc(side); got != json_integer<uint32_t>(*want))
    fail<IoError>("checkpoint sidecar {} does not match its own crc32 ({:08x}, recorded {:08x}): altered", path, got,
                  json_integer<uint32_t>(*want));
  return side;
}

Checkpoint load_checkpoint(const std::string& stem) {
  const std::string side_path = stem + ".json", st_path = stem + ".safetensors";
  const nlohmann::json side = read_checkpoint_sidecar(stem);
  Checkpoint c;
  // The fields' presence and types were checked by parse_checkpoint_sidecar.
  const uint32_t want = json_integer<uint32_t>(side.at("tensors_crc32"));
  if (!fs::exists(st_path)) fail<IoError>("checkpoint {} is missing (its sidecar {} exists)", st_path, side_path);
  if (const uint32_t got = file_crc(st_path); got != want) {
    fail<IoError>("checkpoint {} does not match its sidecar (crc32 {:08x}, sidecar says {:08x}): truncated or altered",
                  st_path, got, want);
  }
  c.step = json_integer<int64_t>(side.at("step"));
  if (const auto named = stem_step(stem); named && *named != c.step)
    fail<IoError>("checkpoint sidecar {} says step {} but its name says {}: renamed or altered", side_path, c.step,
                  *named);
  c.epoch = json_integer<int64_t>(side.at("epoch"));
  c.batch = json_integer<int64_t>(side.at("batch"));
  const auto& r = side.at("rng");
  c.rng = {json_integer<uint64_t>(r.at("seed")), json_integer<uint64_t>(r.at("stream")), json_integer<uint64_t>(r.at("offset"))};
  c.optimizer.scalars = side.at("optimizer");
  c.config = side.value("config", nlohmann::json::object());
  c.extra = side.value("extra", nlohmann::json::object());
  safetensors::File f = safetensors::read(st_path);  // verifies braid.crc32 too
  for (const auto& [name, data] : f.tensors) {
    const std::string what = st_path + ": " + name;
    if (name.starts_with(kModelPrefix)) {
      c.model.emplace_back(name.substr(6), to_tensor(data, what));
    } else if (name.starts_with(kOptimPrefix)) {
      c.optimizer.tensors.emplace_back(name.substr(6), to_tensor(data, what));
    } else if (name.starts_with(kPlanPrefix)) {
      c.plan.emplace_back(name.substr(5), to_tensor(data, what));
    } else {
      fail<IoError>("{}: unexpected tensor (expected model.*, optim.* or plan.*)", what);
    }
  }
  return c;
}

void save_consolidated(const std::string& path, const Checkpoint& ckpt) {
  for (const auto& [name, t] : ckpt.model) {
    // Unprefixed, such a name would read back as an optimizer buffer.
    if (name.starts_with(kOptimPrefix)) {
      fail<ValueError>("{}: model tensor '{}' clashes with the optimizer's names", path, name);
    }
  }
  safetensors::Metadata meta = {{"format", "braid-consolidated"},
                                {"step", std::to_string(ckpt.step)},
                                {"epoch", std::to_string(ckpt.epoch)},
                                {"batch", std::to_string(ckpt.batch)},
                                {"optimizer", ckpt.optimizer.scalars.dump()},
                                {"config", ckpt.config.dump()}};
  if (const auto id = ckpt.extra.find("run_id"); id != ckpt.extra.end()) {
    meta["run_id"] = id->is_string() ? id->get<std::string>() : id->dump();
  }
  write_tensors(path, ckpt, "", meta);
}

std::vector<int64_t> list_checkpoints(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return steps;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() != 18 || !n.starts_with("ckpt-") || !n.ends_with(".json")) continue;
    const std::string digits = n.substr(5, 8);
    if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    steps.push_back(std::stoll(digits));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<Checkpoint> load_latest_checkpoint(const std::string& dir, std::vector<std::string>* skipped) {
  std::vector<int64_t> steps = list_checkpoints(dir);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    try {
      return load_checkpoint(checkpoint_stem(dir, *it));
    } catch (const IoError& e) {
      if (skipped) skipped->push_back(e.what());
    }
  }
  return std::nullopt;
}

void prune_checkpoints(const std::string& dir, int keep) {
  if (keep < 1) fail<ValueError>("prune_checkpoints: keep must be >= 1, got {}", keep);
  std::vector<int64_t> steps = list_checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i) {
    const std::string stem = checkpoint_stem(dir, steps[i]);
    std::error_code ec;
    fs::remove(stem + ".json", ec);  // the commit record first
    fs::remove(stem + ".safetensors", ec);
  }
}

}  // namespace braid::train
