// Mesh: the job's ranks on named axes (data, tensor, pipeline), with one
// communicator per axis group built once (docs/design.md, "parallel").
//
// Rank layout: tensor fastest, then data, then pipeline,
//   world rank = (p * data + d) * tensor + t,
// so a tensor-parallel group is neighbouring ranks (one host under braid
// launch), whose collectives run once per layer, while the pipeline's
// point-to-point traffic, the lightest, crosses the widest distance.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "braid/comm/communicator.h"

namespace braid::parallel {

enum class Axis : uint8_t { data, tensor, pipeline };
inline constexpr std::array<Axis, 3> kAxes = {Axis::data, Axis::tensor, Axis::pipeline};
std::string_view name(Axis axis);

struct MeshShape {
  int data = 0;  // 0: world / (tensor * pipeline)
  int tensor = 1;
  int pipeline = 1;
};

class Mesh {
 public:
  // A one-rank mesh (every axis of degree 1) without a communicator.
  Mesh();
  // Collective over `world`. ConfigError when the degrees are not >= 1 or do
  // not multiply to world.size().
  static Mesh build(const comm::Communicator& world, MeshShape shape);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int degree(Axis a) const { return degree_[static_cast<size_t>(a)]; }
  int coord(Axis a) const { return coord_[static_cast<size_t>(a)]; }
  // Invalid for a one-rank mesh.
  const comm::Communicator& world() const { return world_; }
  // Ranks that differ from this one only along `axis`, ordered by that
  // coordinate (group(a).rank() == coord(a)). Invalid when degree(a) == 1
  // and the mesh has one rank.
  const comm::Communicator& group(Axis a) const { return groups_[static_cast<size_t>(a)]; }
  int world_rank(int data, int tensor, int pipeline) const;
  // "data 2 x tensor 1 x pipeline 2; rank 3 = (d 1, t 0, p 1)"
  std::string describe() const;

 private:
  int rank_ = 0, size_ = 1;
  std::array<int, 3> degree_{1, 1, 1}, coord_{0, 0, 0};
  comm::Communicator world_;
  std::array<comm::Communicator, 3> groups_;
};

}  // namespace braid::parallel
