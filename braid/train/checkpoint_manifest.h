// Sharded checkpoints (train.checkpoint_format = sharded): every rank writes
// what it holds, in parallel and with no gather, and one manifest written
// last names it all.
//
//   <dir>/ckpt-00001200/rank-00003.safetensors  rank 3's pieces, back to back
//   <dir>/ckpt-00001200/rank-00003.json         its index: every piece's tensor,
//                                               byte range and CRC-32
//   <dir>/ckpt-00001200/manifest.json           world rank 0's, written once every
//                                               rank's index of this save is there
//
// A piece is a run [begin, end) of the row-major elements of one tensor's
// slice. The slice is what a tensor-parallel rank holds of the whole tensor
// (its ShardSpec; the whole tensor when replicated); the run is what a ZeRO
// rank owns of it, or a data rank's share of a tensor every replica holds
// (data rank r of N writes the r-th of N runs, so replicas write in parallel
// too). Logical names: "model/<name>", "optim/<param>/<buffer>" (buffers by
// their parameter's name, so any plan's parameter order reads them) and
// "plan/<shard>/<name>" (a codec's memory, gathered on the data axis).
//
// The manifest is the commit record: a folder without one is a save cut
// short, never a checkpoint. Its own CRC refuses an altered manifest, and
// each piece's CRC a damaged shard, naming the file and both checksums.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "braid/base/rng.h"
#include "braid/parallel/shard_spec.h"

namespace braid::train {

struct Piece {
  std::string tensor{};            // logical name, "model/fc.weight"
  std::string dtype{};             // safetensors name, "F32"
  Shape slice_shape{};             // the slice this piece is a run of
  parallel::ShardSpec spec{};      // how the slice lies in the whole; dim -1: it is the whole
  int64_t begin = 0, end = 0;      // elements of the slice, row-major
  std::string file{};              // in the step's folder, "rank-00003.safetensors"
  int64_t offset = 0, bytes = 0;   // the run's bytes in the file
  uint32_t crc32 = 0;              // of those bytes
};

// The whole tensor's shape a piece belongs to.
Shape whole_shape(const Piece& p);

// What one rank wrote for one save.
struct RankIndex {
  int rank = 0;                      // world rank
  std::string session{};             // agreed by the job's ranks at start: an earlier attempt's files differ
  int64_t step = 0;
  std::string shard{};               // the plan's shard name ("t0-p1"), "" unsharded
  int data_rank = 0;
  std::vector<std::string> params{}; // this rank's parameter names in order
  std::vector<std::string> state{};  // its model's state names in order (parameters and buffers)
  Generator::State rng{0, 0, 0};     // its trainer's generator
  std::vector<Piece> pieces{};
};

struct Manifest {
  int64_t step = 0, epoch = 0, batch = 0;
  int world = 1;
  std::string session{};
  // The plan's layout (mesh and gradient sync): a codec's memory is restored
  // only under the same one, as with whole checkpoints.
  std::string layout{};
  nlohmann::json optimizer = nlohmann::json::object();  // world rank 0's scalars
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json extra = nlohmann::json::object();      // world rank 0's (plan state, run id, ...)
  std::vector<RankIndex> ranks{};                       // by world rank
};

// "rank-00003.safetensors" and "rank-00003.json".
std::string rank_data_file(int rank);
std::string rank_index_file(int rank);

nlohmann::json to_json(const RankIndex& index);
// IoError naming `path` when a field is missing, of the wrong type or out of
// range (a piece's bytes not its elements', a file name with a folder in it).
RankIndex rank_index_from_json(const nlohmann::json& j, const std::string& path);

// Writes <dir>/ckpt-<step>/manifest.json atomically, with its own CRC.
void write_manifest(const std::string& dir, const Manifest& m);
// Reads and verifies it: IoError naming the file when it is missing,
// malformed, fails its CRC or names another step than its folder.
Manifest read_manifest(const std::string& dir, int64_t step);

// Steps of the complete sharded checkpoints (a manifest present), ascending.
std::vector<int64_t> sharded_steps(const std::string& dir);
// Steps of every sharded checkpoint folder, complete or not, ascending.
std::vector<int64_t> sharded_folders(const std::string& dir);

// Keeps the newest `keep` complete sharded checkpoints of `dir` and deletes
// the older ones, and the folders without a manifest older than the newest
// complete one (saves cut short). A folder newer than every complete one may
// be a save in flight and is never touched. ValueError when keep < 1.
void prune_sharded(const std::string& dir, int keep);

// The whole model's parameter (or state) names in order, from the ranks'
// own orders: stage after stage, each name once.
std::vector<std::string> whole_order(const Manifest& m, bool state);

}  // namespace braid::train
