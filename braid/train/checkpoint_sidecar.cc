#include "braid/train/checkpoint_sidecar.h"

#include <cstdint>
#include <limits>
#include <optional>

#include "braid/base/error.h"
#include "braid/base/json_number.h"

namespace braid::train {

namespace {

using json = nlohmann::json;

// Checks one sidecar, naming the file and the dotted path of a bad field.
class Checker {
 public:
  explicit Checker(const std::string& path) : path_(path) {}

  [[noreturn]] void bad(const std::string& field, const std::string& want, const json& got) const {
    std::string text = got.dump();
    if (text.size() > 64) text = text.substr(0, 61) + "...";
    fail<IoError>("checkpoint sidecar {} is malformed: {} should be {}, found {}", path_, field, want, text);
  }

  const json& object(const json& parent, const std::string& key, const std::string& field, bool required) const {
    static const json kEmpty = json::object();
    const auto it = parent.find(key);
    // An optional object written as null (a run's config when it had none) is absent.
    if (it == parent.end() || (!required && it->is_null())) {
      if (required) fail<IoError>("checkpoint sidecar {} is malformed: it lacks {}", path_, field);
      return kEmpty;
    }
    if (!it->is_object()) bad(field, "an object", *it);
    return *it;
  }

  // An integer in [lo, hi]; absent is fine unless `required`.
  void integer(const json& parent, const std::string& key, const std::string& field, bool required,
               int64_t lo = std::numeric_limits<int64_t>::min(), int64_t hi = std::numeric_limits<int64_t>::max()) const {
    const auto it = parent.find(key);
    if (it == parent.end()) {
      if (required) fail<IoError>("checkpoint sidecar {} is malformed: it lacks {}", path_, field);
      return;
    }
    const std::optional<int64_t> v = json_integer_if<int64_t>(*it);
    if (!v || *v < lo || *v > hi) bad(field, fmt::format("an integer in [{}, {}]", lo, hi), *it);
  }

  void unsigned_integer(const json& parent, const std::string& key, const std::string& field, uint64_t hi) const {
    const auto it = parent.find(key);
    if (it == parent.end()) fail<IoError>("checkpoint sidecar {} is malformed: it lacks {}", path_, field);
    const std::optional<uint64_t> v = json_integer_if<uint64_t>(*it);
    if (!v || *v > hi) bad(field, fmt::format("an integer in [0, {}]", hi), *it);
  }

  void string(const json& parent, const std::string& key, const std::string& field) const {
    const auto it = parent.find(key);
    if (it != parent.end() && !it->is_string()) bad(field, "a string", *it);
  }

  void strings(const json& parent, const std::string& key, const std::string& field) const {
    const auto it = parent.find(key);
    if (it == parent.end()) return;
    if (!it->is_array()) bad(field, "an array of strings", *it);
    for (const json& s : *it)
      if (!s.is_string()) bad(field, "an array of strings", *it);
  }

  // parallel::ShardSpec as parallel::to_json writes it; its full shape is
  // allocated when shards are merged, so its size is bounded here.
  void spec(const json& s, const std::string& field) const {
    if (!s.is_object()) bad(field, "an object", s);
    constexpr int64_t kMaxElements = int64_t{1} << 40;
    integer(s, "dim", field + ".dim", true, -1, 63);
    integer(s, "offset", field + ".offset", true, 0, kMaxElements);
    integer(s, "blocks", field + ".blocks", false, 1, std::numeric_limits<int>::max());
    const auto shape = s.find("full_shape");
    if (shape == s.end()) fail<IoError>("checkpoint sidecar {} is malformed: it lacks {}.full_shape", path_, field);
    if (!shape->is_array() || shape->size() > 64) bad(field + ".full_shape", "an array of at most 64 sizes", *shape);
    int64_t n = 1;
    for (const json& d : *shape) {
      const std::optional<int64_t> dim_size = json_integer_if<int64_t>(d);
      if (!dim_size || *dim_size < 0 || *dim_size > kMaxElements) bad(field + ".full_shape", "sizes in [0, 2^40]", *shape);
      const int64_t size = *dim_size;
      if (size != 0 && n > kMaxElements / size) bad(field + ".full_shape", "a shape of at most 2^40 elements", *shape);
      n *= size;
    }
  }

 private:
  const std::string& path_;
};

}  // namespace

nlohmann::json parse_checkpoint_sidecar(std::string_view text, const std::string& path) {
  json side;
  try {
    side = json::parse(text);
  } catch (const json::exception& e) {
    fail<IoError>("checkpoint sidecar {} is corrupt: {}", path, e.what());
  }
  const Checker c(path);
  if (!side.is_object()) c.bad("the sidecar", "a JSON object", side);
  c.unsigned_integer(side, "tensors_crc32", "tensors_crc32", std::numeric_limits<uint32_t>::max());
  for (const char* k : {"step", "epoch", "batch"}) c.integer(side, k, k, true, 0);
  const json& rng = c.object(side, "rng", "rng", true);
  for (const char* k : {"seed", "stream", "offset"})
    c.unsigned_integer(rng, k, std::string("rng.") + k, std::numeric_limits<uint64_t>::max());
  // A checkpoint of the model alone (a shard, a consolidated model) has a
  // null optimizer; otherwise it is an object with these fields.
  if (const auto o = side.find("optimizer"); o == side.end() || !o->is_null()) {
    const json& opt = c.object(side, "optimizer", "optimizer", true);
    c.string(opt, "name", "optimizer.name");
    c.integer(opt, "steps", "optimizer.steps", false, 0);
    c.integer(opt, "num_params", "optimizer.num_params", false, 0);
  }
  const json& config = c.object(side, "config", "config", false);
  for (const auto& [section, keys] : config.items()) c.object(config, section, "config." + section, true);
  c.integer(c.object(config, "parallel", "config.parallel", false), "data", "config.parallel.data", false);
  const json& extra = c.object(side, "extra", "extra", false);
  c.string(extra, "run_id", "extra.run_id");
  c.strings(extra, "params", "extra.params");
  c.object(extra, "plan", "extra.plan", false);
  c.object(extra, "batch_schedule", "extra.batch_schedule", false);
  const json& zero = c.object(extra, "zero", "extra.zero", false);
  c.integer(zero, "stage", "extra.zero.stage", false, 0, 3);
  c.integer(zero, "data_world", "extra.zero.data_world", false, 0, std::numeric_limits<int>::max());
  const json& shard = c.object(extra, "shard", "extra.shard", false);
  c.string(shard, "name", "extra.shard.name");
  c.string(shard, "mesh", "extra.shard.mesh");
  c.strings(shard, "params", "extra.shard.params");
  for (const auto& [name, s] : c.object(shard, "specs", "extra.shard.specs", false).items())
    c.spec(s, "extra.shard.specs." + name);
  return side;
}

}  // namespace braid::train
