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
    case Axis::context: return "context";
  }
  return "?";
}

namespace {

// A context axis of degree 1 is left out, so meshes without one read as before.
std::string shape_text(int64_t data, int64_t tensor, int64_t pipeline, int64_t context = 1) {
  if (context == 1) return fmt::format("data {} x tensor {} x pipeline {}", data, tensor, pipeline);
  return fmt::format("data {} x context {} x tensor {} x pipeline {}", data, context, tensor, pipeline);
}

// Every rank's shape, so ranks that disagree fail together with both shapes
// named rather than build groups that never match.
void check_same_shape(comm::Communicator& world, const MeshShape& s) {
  const int p = world.size();
  std::vector<int64_t> mine{s.data, s.tensor, s.pipeline, s.context};
  std::vector<int64_t> all(4 * static_cast<size_t>(p));
  world.allgather(mine, all).wait(Deadline::after(world.options().timeout + std::chrono::seconds(3)));
  for (int r = 0; r < p; ++r) {
    const int64_t* theirs = &all[4 * static_cast<size_t>(r)];
    if (theirs[0] != s.data || theirs[1] != s.tensor || theirs[2] != s.pipeline || theirs[3] != s.context)
      fail<ConfigError>("mesh: rank {} asked for {} but rank {} for {} (every rank must pass the same shape)",
                        world.rank(), shape_text(s.data, s.tensor, s.pipeline, s.context), r,
                        shape_text(theirs[0], theirs[1], theirs[2], theirs[3]));
  }
}

}  // namespace

Mesh Mesh::build(const comm::Communicator& world_in, MeshShape shape) {
  comm::Communicator world = world_in;
  const int n = world.size();
  check_same_shape(world, shape);
  if (shape.tensor < 1 || shape.pipeline < 1 || shape.context < 1 || shape.data < 0)
    fail<ConfigError>("mesh: degrees must be >= 1 (data 0 means the rest of the world), got {}",
                      shape_text(shape.data, shape.tensor, shape.pipeline, shape.context));
  const int model = shape.tensor * shape.pipeline * shape.context;
  int data = shape.data;
  if (data == 0) {
    if (n % model != 0) {
      if (shape.context == 1)
        fail<ConfigError>("mesh: tensor {} x pipeline {} = {} does not divide the world of {} ranks", shape.tensor,
                          shape.pipeline, model, n);
      fail<ConfigError>("mesh: context {} x tensor {} x pipeline {} = {} does not divide the world of {} ranks",
                        shape.context, shape.tensor, shape.pipeline, model, n);
    }
    data = n / model;
  }
  if (data * model != n)
    fail<ConfigError>("mesh: {} = {} ranks, but the world has {}",
                      shape_text(data, shape.tensor, shape.pipeline, shape.context), data * model, n);

  Mesh m;
  m.world_ = world;
  const int T = shape.tensor, C = shape.context, D = data;
  m.degree_ = {D, T, shape.pipeline, C};
  const int w = world.rank();
  const int t = w % T, c = (w / T) % C, d = (w / (T * C)) % D, p = w / (T * C * D);
  m.coord_ = {d, t, p, c};
  // Each split's color names the coordinates the group shares; its key the
  // coordinate along the axis, so group ranks follow it.
  m.group_[index(Axis::data)] = world.split((p * C + c) * T + t, d);
  m.group_[index(Axis::tensor)] = world.split((p * D + d) * C + c, t);
  m.group_[index(Axis::pipeline)] = world.split((d * C + c) * T + t, p);
  m.group_[index(Axis::context)] = world.split((p * D + d) * T + t, c);
  if (C > 1) m.data_context_ = world.split(p * T + t, d * C + c);
  return m;
}

Mesh Mesh::single_process() {
  // The same one-rank world ProcessGroup::join makes for a single process.
  return build(comm::Communicator(comm::InprocWorld::create(1)->transport(0)), {});
}

int Mesh::world_rank(int data, int tensor, int pipeline, int context) const {
  const std::array<int, 4> c{data, tensor, pipeline, context};
  for (Axis a : kAxes)
    if (c[index(a)] < 0 || c[index(a)] >= degree(a))
      fail<ValueError>("mesh: {} coordinate {} is outside 0..{}", name(a), c[index(a)], degree(a) - 1);
  return ((pipeline * degree(Axis::data) + data) * degree(Axis::context) + context) * degree(Axis::tensor) + tensor;
}

std::string Mesh::describe() const {
  const std::string shape = shape_text(degree(Axis::data), degree(Axis::tensor), degree(Axis::pipeline),
                                       degree(Axis::context));
  if (degree(Axis::context) == 1)
    return fmt::format("{}; rank {} = (d {}, t {}, p {})", shape, rank(), coord(Axis::data), coord(Axis::tensor),
                       coord(Axis::pipeline));
  return fmt::format("{}; rank {} = (d {}, c {}, t {}, p {})", shape, rank(), coord(Axis::data),
                     coord(Axis::context), coord(Axis::tensor), coord(Axis::pipeline));
}

}  // namespace braid::parallel
