#include "braid/train/checkpoint_sharded.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/ops/shape.h"
#include "braid/train/checkpoint_manifest.h"
#include "braid/train/checkpoint_shards.h"

namespace braid::train {

namespace fs = std::filesystem;

namespace {

using Run = std::pair<int64_t, int64_t>;

// The step's rank files, opened once each; a piece's bytes by pread, checked
// against the manifest's CRC before anyone uses them.
class PieceReader {
 public:
  explicit PieceReader(std::string folder) : folder_(std::move(folder)) {}
  ~PieceReader() {
    for (auto& [name, fd] : fds_) ::close(fd);
  }
  PieceReader(const PieceReader&) = delete;
  PieceReader& operator=(const PieceReader&) = delete;

  const std::vector<std::byte>& read(const Piece& p) {
    if (&p == last_) return bytes_;  // runs of one piece asked for in turn
    const std::string path = (fs::path(folder_) / p.file).string();
    auto it = fds_.find(p.file);
    if (it == fds_.end()) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) fail<IoError>("checkpoint shard {} (named by its manifest): {}", path, std::strerror(errno));
      it = fds_.emplace(p.file, fd).first;
    }
    bytes_.resize(static_cast<size_t>(p.bytes));
    size_t got = 0;
    while (got < bytes_.size()) {
      const ssize_t n = ::pread(it->second, bytes_.data() + got, bytes_.size() - got, p.offset + static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail<IoError>("reading checkpoint shard {}: {}", path, std::strerror(errno));
      if (n == 0) {
        fail<IoError>("checkpoint shard {} is truncated: {} [{}, {}) lies at bytes {}..{}, the file ends at {}", path,
                      p.tensor, p.begin, p.end, p.offset, p.offset + p.bytes, p.offset + static_cast<int64_t>(got));
      }
      got += static_cast<size_t>(n);
    }
    if (const uint32_t crc = crc32(bytes_); crc != p.crc32) {
      last_ = nullptr;
      fail<IoError>("checkpoint shard {} is damaged: {} [{}, {}) at bytes {}..{} has crc32 {:08x}, its manifest "
                    "records {:08x}", path, p.tensor, p.begin, p.end, p.offset, p.offset + p.bytes, crc, p.crc32);
    }
    last_ = &p;
    bytes_read_ += p.bytes;
    return bytes_;
  }
  int64_t bytes_read() const { return bytes_read_; }

 private:
  std::string folder_;
  std::map<std::string, int> fds_;
  std::vector<std::byte> bytes_;
  const Piece* last_ = nullptr;
  int64_t bytes_read_ = 0;
};

std::string spec_key(const Piece& p) {
  return fmt::format("{}|{}|{}|{}|{}", to_string(p.slice_shape), p.spec.dim, to_string(p.spec.full_shape),
                     p.spec.offset, p.spec.blocks);
}

bool same_cut(const Piece& p, const Shape& shape, const parallel::ShardSpec* spec) {
  if (p.slice_shape != shape) return false;
  if (!spec || spec->dim < 0) return p.spec.dim < 0;
  return p.spec.dim == spec->dim && p.spec.offset == spec->offset && p.spec.blocks == spec->blocks &&
         p.spec.full_shape == spec->full_shape;
}

// Copies the elements `runs` of a slice from its pieces (one cut) into `out`
// (the slice, contiguous): every needed element must lie in some piece.
void fill_runs(PieceReader& reader, const std::string& name, std::vector<const Piece*> pieces, Tensor& out,
               const std::vector<Run>& runs) {
  std::sort(pieces.begin(), pieces.end(), [](const Piece* a, const Piece* b) { return a->begin < b->begin; });
  const size_t item = itemsize(out.dtype());
  auto* dst = static_cast<std::byte*>(out.raw_data());
  for (const auto& [a, b] : runs) {
    int64_t at = a;
    for (const Piece* p : pieces) {
      if (at >= b) break;
      if (p->end <= at) continue;
      if (p->begin > at) break;
      const int64_t until = std::min(p->end, b);
      const std::vector<std::byte>& bytes = reader.read(*p);
      std::memcpy(dst + static_cast<size_t>(at) * item, bytes.data() + static_cast<size_t>(at - p->begin) * item,
                  static_cast<size_t>(until - at) * item);
      at = until;
    }
    if (at < b) {
      fail<IoError>("checkpoint: the pieces of '{}' (slice {}) leave elements [{}, {}) unwritten", name,
                    to_string(out.shape()), at, b);
    }
  }
}

// Before allocating a slice whose shape a file gave: its pieces must hold
// that many elements, so a manifest cannot make a reader allocate more than
// the bytes written.
void check_covers(const std::string& name, std::vector<const Piece*> pieces, const Shape& slice) {
  int64_t numel = 1;
  for (int64_t d : slice) numel *= d;
  std::sort(pieces.begin(), pieces.end(), [](const Piece* a, const Piece* b) { return a->begin < b->begin; });
  int64_t covered = 0, at = 0;
  for (const Piece* p : pieces) {
    const int64_t from = std::max(at, p->begin);
    if (p->end > from) covered += p->end - from, at = p->end;
  }
  if (covered < numel) {
    fail<IoError>("checkpoint {}: the pieces of '{}' hold {} of the {} elements of its slice {}", pieces.front()->file,
                  name, covered, numel, to_string(slice));
  }
}

// The tensor `name` as a rank holds it: shape `shape`, cut by `spec` (null:
// whole), with only `runs` read when its pieces have this very cut (null:
// every element), the rest zeros.
Tensor read_tensor(PieceReader& reader, const std::string& name, const std::vector<const Piece*>& pieces,
                   const Shape& shape, const parallel::ShardSpec* spec, const std::vector<Run>* runs = nullptr) {
  const Piece& first = *pieces.front();
  const DType dtype = dtype_from_safetensors(first.dtype, name);
  std::map<std::string, std::vector<const Piece*>> cuts;
  for (const Piece* p : pieces) {
    if (p->dtype != first.dtype || whole_shape(*p) != whole_shape(first)) {
      fail<IoError>("checkpoint: pieces of '{}' in {} and {} disagree on its dtype or whole shape", name, first.file,
                    p->file);
    }
    cuts[spec_key(*p)].push_back(p);
  }
  for (const auto& [key, group] : cuts) {
    if (!same_cut(*group.front(), shape, spec)) continue;
    if (!runs) check_covers(name, group, shape);
    Tensor out = Tensor::zeros(shape, dtype);
    fill_runs(reader, name, group, out, runs ? *runs : std::vector<Run>{{0, out.numel()}});
    return out;
  }
  // Another cut: the whole tensor from a replicated copy or from the slices.
  Tensor whole;
  std::vector<TensorSlice> slices;
  for (const auto& [key, group] : cuts) {
    const Piece& p = *group.front();
    check_covers(name, group, p.slice_shape);
    Tensor t = Tensor::zeros(p.slice_shape, dtype);
    fill_runs(reader, name, group, t, {{0, t.numel()}});
    if (p.spec.dim < 0) {
      whole = t;
      break;
    }
    slices.push_back({p.spec, t, p.file});
  }
  if (!whole.defined()) whole = assemble_slices(name, slices);
  return cut_slice(name, whole, shape, spec);
}

std::map<std::string, std::vector<const Piece*>> by_tensor(const Manifest& m) {
  std::map<std::string, std::vector<const Piece*>> out;
  for (const RankIndex& r : m.ranks) {
    for (const Piece& p : r.pieces) out[p.tensor].push_back(&p);
  }
  return out;
}

// The tensors named "<prefix><rest>" with no '/' in rest, by rest.
std::vector<std::pair<std::string, const std::vector<const Piece*>*>> under(
    const std::map<std::string, std::vector<const Piece*>>& all, const std::string& prefix) {
  std::vector<std::pair<std::string, const std::vector<const Piece*>*>> out;
  for (auto it = all.lower_bound(prefix); it != all.end() && it->first.starts_with(prefix); ++it) {
    const std::string rest = it->first.substr(prefix.size());
    if (!rest.empty() && rest.find('/') == std::string::npos) out.emplace_back(rest, &it->second);
  }
  return out;
}

Checkpoint header_of(const Manifest& m, const RankIndex& rng_of) {
  Checkpoint c;
  c.step = m.step, c.epoch = m.epoch, c.batch = m.batch;
  c.rng = rng_of.rng;
  c.config = m.config;
  c.extra = m.extra;
  c.optimizer.scalars = m.optimizer;
  return c;
}

}  // namespace

Checkpoint load_sharded_for_part(const std::string& dir, int64_t step, const RankPart& part, int64_t* bytes_read) {
  const Manifest m = read_manifest(dir, step);
  const auto all = by_tensor(m);
  PieceReader reader(checkpoint_stem(dir, step));
  // The generator of the rank that held this part on the data axis's first
  // replica, as whole checkpoints keep that rank's; else world rank 0's.
  const RankIndex* rng_of = &m.ranks.front();
  for (const RankIndex& r : m.ranks) {
    if (r.shard == part.shard && r.data_rank == 0) {
      rng_of = &r;
      break;
    }
  }
  Checkpoint c = header_of(m, *rng_of);
  auto spec_of = [&](const std::string& name) -> const parallel::ShardSpec* {
    const auto it = part.specs.find(name);
    return it == part.specs.end() || it->second.dim < 0 ? nullptr : &it->second;
  };
  std::map<std::string, Shape> shape_of;
  for (const auto& [name, t] : part.state) {
    shape_of[name] = t.shape();
    const auto it = all.find("model/" + name);
    if (it == all.end()) fail<IoError>("checkpoint {}: no tensor '{}' for this run's model", checkpoint_stem(dir, step), name);
    c.model.emplace_back(name, read_tensor(reader, name, it->second, t.shape(), spec_of(name)));
  }
  for (size_t j = 0; j < part.param_order.size(); ++j) {
    const std::string& pname = part.param_order[j];
    const auto shape = shape_of.find(pname);
    if (shape == shape_of.end()) fail<ValueError>("load_sharded_for_part: parameter {} is not in the part's state", pname);
    const parallel::ShardSpec* spec = spec_of(pname);
    // Under ZeRO only the runs this rank's optimizer updates (none, for a
    // parameter it owns nothing of).
    const auto found = part.optimizer_runs.find(pname);
    const std::vector<Run> none;
    const std::vector<Run>* runs =
        part.optimizer_runs.empty() ? nullptr : found == part.optimizer_runs.end() ? &none : &found->second;
    for (const auto& [buffer, pieces] : under(all, "optim/" + pname + "/")) {
      const std::string key = fmt::format("optim/{}/{}", pname, buffer);
      const Shape whole = whole_shape(*pieces->front());
      const bool like_param = spec ? whole == spec->full_shape : whole == shape->second;
      // A buffer shaped like its parameter is cut as it is; another (a counter) is taken whole.
      c.optimizer.tensors.emplace_back(
          fmt::format("{}.{}", j, buffer),
          read_tensor(reader, key, *pieces, like_param ? shape->second : whole, like_param ? spec : nullptr,
                      like_param ? runs : nullptr));
    }
  }
  c.optimizer.scalars["num_params"] = part.param_order.size();
  if (!part.layout.empty() && m.layout == part.layout) {
    for (const auto& [name, pieces] : under(all, "plan/" + part.shard + "/")) {
      const Shape whole = whole_shape(*pieces->front());
      c.plan.emplace_back(name, read_tensor(reader, "plan/" + name, *pieces, whole, nullptr));
    }
  }
  if (bytes_read) *bytes_read = reader.bytes_read();
  return c;
}

Checkpoint load_sharded_whole(const std::string& dir, int64_t step) {
  const Manifest m = read_manifest(dir, step);
  const auto all = by_tensor(m);
  PieceReader reader(checkpoint_stem(dir, step));
  Checkpoint c = header_of(m, m.ranks.front());
  for (const std::string& name : whole_order(m, true)) {
    const auto it = all.find("model/" + name);
    if (it == all.end()) fail<IoError>("checkpoint {}: no pieces of '{}'", checkpoint_stem(dir, step), name);
    c.model.emplace_back(name, read_tensor(reader, name, it->second, whole_shape(*it->second.front()), nullptr));
  }
  const std::vector<std::string> params = whole_order(m, false);
  for (size_t i = 0; i < params.size(); ++i) {
    for (const auto& [buffer, pieces] : under(all, "optim/" + params[i] + "/")) {
      c.optimizer.tensors.emplace_back(fmt::format("{}.{}", i, buffer),
                                       read_tensor(reader, "optim/" + params[i] + "/" + buffer, *pieces,
                                                   whole_shape(*pieces->front()), nullptr));
    }
  }
  c.optimizer.scalars["num_params"] = params.size();
  c.extra["params"] = params;
  return c;
}

}  // namespace braid::train
