#include "braid/parallel/mesh.h"

#include "braid/base/error.h"

namespace braid::parallel {

std::string_view name(Axis axis) {
  switch (axis) {
    case Axis::data: return "data";
    case Axis::tensor: return "tensor";
    case Axis::pipeline: return "pipeline";
  }
  return "?";
}

Mesh::Mesh() = default;

Mesh Mesh::build(const comm::Communicator& world, MeshShape shape) {
  const int p = world.size();
  if (shape.tensor < 1 || shape.pipeline < 1 || shape.data < 0) {
    fail<ConfigError>("mesh: degrees must be >= 1 (data {}, tensor {}, pipeline {})", shape.data, shape.tensor,
                      shape.pipeline);
  }
  if (shape.data == 0) {
    if (p % (shape.tensor * shape.pipeline) != 0) {
      fail<ConfigError>("mesh: tensor {} x pipeline {} does not divide the world of {} ranks", shape.tensor,
                        shape.pipeline, p);
    }
    shape.data = p / (shape.tensor * shape.pipeline);
  }
  if (shape.data * shape.tensor * shape.pipeline != p) {
    fail<ConfigError>("mesh: data {} x tensor {} x pipeline {} = {} ranks, but the world has {}", shape.data,
                      shape.tensor, shape.pipeline, shape.data * shape.tensor * shape.pipeline, p);
  }
  Mesh m;
  m.world_ = world;
  m.rank_ = world.rank();
  m.size_ = p;
  m.degree_ = {shape.data, shape.tensor, shape.pipeline};
  const int t = m.rank_ % shape.tensor, d = (m.rank_ / shape.tensor) % shape.data,
            pp = m.rank_ / (shape.tensor * shape.data);
  m.coord_ = {d, t, pp};
  // One split per axis, in the same order on every rank: the color is the
  // rank's position on the other two axes, the key its coordinate on this one.
  for (Axis a : kAxes) {
    const size_t i = static_cast<size_t>(a);
    int color = 0, stride = 1;
    for (Axis other : kAxes) {
      if (other == a) continue;
      color += m.coord(other) * stride;
      stride *= m.degree(other);
    }
    m.groups_[i] = world.split(color, m.coord_[i]);
  }
  return m;
}

int Mesh::world_rank(int data, int tensor, int pipeline) const {
  if (data < 0 || data >= degree(Axis::data) || tensor < 0 || tensor >= degree(Axis::tensor) || pipeline < 0 ||
      pipeline >= degree(Axis::pipeline)) {
    fail<IndexError>("mesh: coordinates (d {}, t {}, p {}) outside {}", data, tensor, pipeline, describe());
  }
  return (pipeline * degree(Axis::data) + data) * degree(Axis::tensor) + tensor;
}

std::string Mesh::describe() const {
  return fmt::format("data {} x tensor {} x pipeline {}; rank {} = (d {}, t {}, p {})", degree(Axis::data),
                     degree(Axis::tensor), degree(Axis::pipeline), rank_, coord(Axis::data), coord(Axis::tensor),
                     coord(Axis::pipeline));
}

}  // namespace braid::parallel
