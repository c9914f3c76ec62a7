#include "braid/parallel/mesh.h"

#include <vector>

#include "braid/base/error.h"
#include "braid/comm/transport/inproc.h"

namespace braid::parallel {

std::string_view name(Axis axis) {
  switch (axis) {
    case Axis::data: return "data";
    case Axis::tensor: return "tensor";
    case Axis::pipeline: return "pipeline";
  }
  return "?";
}

namespace {

std::string shape_text(int64_t data, int64_t tensor, int64_t pipeline) {
  return fmt::format("data {} x tensor {} x pipeline {}", data, tensor, pipeline);
}

// Every rank's shape, so ranks that disagree fail together with both shapes
// named rather than build groups that never match.
void check_same_shape(comm::Communicator& world, const MeshShape& s) {
  const int p = world.size();
  std::vector<int64_t> mine{s.data, s.tensor, s.pipeline};
  std::vector<int64_t> all(3 * static_cast<size_t>(p));
  world.allgather(mine, all).wait(Deadline::after(world.options().timeout + std::chrono::seconds(3)));
  for (int r = 0; r < p; ++r) {
    const int64_t* theirs = &all[3 * static_cast<size_t>(r)];
    if (theirs[0] != s.data || theirs[1] != s.tensor || theirs[2] != s.pipeline)
      fail<ConfigError>("mesh: rank {} asked for {} but rank {} for {} (every rank must pass the same shape)",
                        world.rank(), shape_text(s.data, s.tensor, s.pipeline), r,
                        shape_text(theirs[0], theirs[1], theirs[2]));
  }
}

}  // namespace

Mesh Mesh::build(const comm::Communicator& world_in, MeshShape shape) {
  comm::Communicator world = world_in;
  const int n = world.size();
  check_same_shape(world, shape);
  if (shape.tensor < 1 || shape.pipeline < 1 || shape.data < 0)
    fail<ConfigError>("mesh: degrees must be >= 1 (data 0 means the rest of the world), got {}",
                      shape_text(shape.data, shape.tensor, shape.pipeline));
  const int model = shape.tensor * shape.pipeline;
  int data = shape.data;
  if (data == 0) {
    if (n % model != 0)
      fail<ConfigError>("mesh: tensor {} x pipeline {} = {} does not divide the world of {} ranks", shape.tensor,
                        shape.pipeline, model, n);
    data = n / model;
  }
  if (data * model != n)
    fail<ConfigError>("mesh: {} = {} ranks, but the world has {}", shape_text(data, shape.tensor, shape.pipeline),
                      data * model, n);

  Mesh m;
  m.world_ = world;
  m.degree_ = {data, shape.tensor, shape.pipeline};
  const int w = world.rank();
  const int t = w % shape.tensor, d = (w / shape.tensor) % data, p = w / (shape.tensor * data);
  m.coord_ = {d, t, p};
  // Each split's color names the coordinates the group shares; its key the
  // coordinate along the axis, so group ranks follow it.
  m.group_[index(Axis::data)] = world.split(p * shape.tensor + t, d);
  m.group_[index(Axis::tensor)] = world.split(p * data + d, t);
  m.group_[index(Axis::pipeline)] = world.split(d * shape.tensor + t, p);
  return m;
}

Mesh Mesh::single_process() {
  // The same one-rank world ProcessGroup::join makes for a single process.
  return build(comm::Communicator(comm::InprocWorld::create(1)->transport(0)), {});
}

int Mesh::world_rank(int data, int tensor, int pipeline) const {
  const std::array<int, 3> c{data, tensor, pipeline};
  for (Axis a : kAxes)
    if (c[index(a)] < 0 || c[index(a)] >= degree(a))
      fail<ValueError>("mesh: {} coordinate {} is outside 0..{}", name(a), c[index(a)], degree(a) - 1);
  return (pipeline * degree(Axis::data) + data) * degree(Axis::tensor) + tensor;
}

std::string Mesh::describe() const {
  return fmt::format("{}; rank {} = (d {}, t {}, p {})",
                     shape_text(degree(Axis::data), degree(Axis::tensor), degree(Axis::pipeline)), rank(),
                     coord(Axis::data), coord(Axis::tensor), coord(Axis::pipeline));
}

}  // namespace braid::parallel
