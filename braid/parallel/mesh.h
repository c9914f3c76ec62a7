// The device mesh: the world's ranks laid out on a data x context x tensor x
// pipeline grid, with one communicator per axis (docs/mesh.md).
//
// Rank layout, tensor fastest, then context, then data, then pipeline (as
// Megatron-LM lays them), so a tensor group is neighbouring ranks (one host,
// where the all-reduces of every layer stay on shared memory), a context group
// (the ring of context parallelism, docs/context_parallel.md) is the next
// nearest, and a pipeline stage is a contiguous block:
//
//   world rank = ((p * data + d) * context + c) * tensor + t
//
// group(a) is a plain comm::Communicator over the ranks that differ from this
// one only along a, ordered by that coordinate; tensor-parallel layers and
// pipeline schedules take it as their communicator. All groups share the
// world's progress engine and tag space (comm/engine.h, comm/tags.h).
//
//   auto pg = ProcessGroup::join({});
//   Mesh mesh = Mesh::build(pg->comm(), {.tensor = 2, .pipeline = 2});
//   comm::Communicator tp = mesh.group(Axis::tensor);
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "braid/comm/communicator.h"

namespace braid::parallel {

enum class Axis : uint8_t { data, tensor, pipeline, context };
inline constexpr std::array<Axis, 4> kAxes{Axis::data, Axis::tensor, Axis::pipeline, Axis::context};
std::string_view name(Axis axis);

struct MeshShape {
  int data = 0;  // 0: world size / (tensor * pipeline * context)
  int tensor = 1;
  int pipeline = 1;
  int context = 1;  // sequence split over this many ranks (context parallelism)
};

class Mesh {
 public:
  // Collective over `world`: every rank calls it with the same shape (checked:
  // ranks that disagree get a ConfigError naming both shapes). The degrees
  // must be >= 1 and multiply to world.size(). Splits the world four times
  // (five with a context axis: the data x context group).
  static Mesh build(const comm::Communicator& world, MeshShape shape);
  // A mesh of one rank (all degrees 1) over an in-process world: no sockets,
  // no launcher.
  static Mesh single_process();

  int rank() const { return world_.rank(); }
  int size() const { return world_.size(); }
  int degree(Axis a) const { return degree_[index(a)]; }
  int coord(Axis a) const { return coord_[index(a)]; }
  const comm::Communicator& world() const { return world_; }
  // The ranks differing from this one only along `a`, ordered by that
  // coordinate: group(a).rank() == coord(a), group(a).size() == degree(a).
  // A degree-1 axis gets a valid one-rank communicator.
  const comm::Communicator& group(Axis a) const { return group_[index(a)]; }
  // The ranks differing from this one only along data and context, ordered
  // by d * context + c: every rank holding a replica of the same parameters,
  // over which gradients are averaged (each context rank's gradient covers
  // its part of the sequence). group(Axis::data) itself without a context axis.
  const comm::Communicator& data_context_group() const {
    return degree(Axis::context) > 1 ? data_context_ : group(Axis::data);
  }
  // World rank at the given coordinates (e.g. the next pipeline stage);
  // ValueError when one is outside its degree.
  int world_rank(int data, int tensor, int pipeline, int context = 0) const;
  // "data 2 x tensor 1 x pipeline 2; rank 3 = (d 1, t 0, p 1)"; a context
  // axis of degree > 1 adds "x context C" and "c" to the coordinates.
  std::string describe() const;

 private:
  Mesh() = default;
  static size_t index(Axis a) { return static_cast<size_t>(a); }
  comm::Communicator world_;
  std::array<int, 4> degree_{1, 1, 1, 1};
  std::array<int, 4> coord_{0, 0, 0, 0};
  std::array<comm::Communicator, 4> group_;
  comm::Communicator data_context_;  // valid with a context axis only
};

}  // namespace braid::parallel
