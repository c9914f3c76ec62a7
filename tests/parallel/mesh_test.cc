// The device mesh over in-process ranks: coordinates against a layout built by
// counting, axis groups against the ranks an all-reduce actually sums, bad
// shapes, and threads that do not grow with the number of communicators.
#include <gtest/gtest.h>

#include <dirent.h>

#include <map>
#include <optional>
#include <thread>

#include "braid/base/error.h"
#include "braid/comm/transport/inproc.h"
#include "braid/parallel/mesh.h"
#include "tests/testing/first_error.h"

namespace braid::parallel {
namespace {

using namespace std::chrono_literals;

// Runs fn(rank, world) on n in-process ranks.
void on_world(int n, const std::function<void(int, comm::Communicator&)>& fn,
              const std::function<comm::CommOptions(int)>& options = nullptr) {
  auto inproc = comm::InprocWorld::create(n);
  std::vector<comm::Communicator> worlds;
  for (int r = 0; r < n; ++r)
    worlds.emplace_back(std::shared_ptr<comm::Transport>(inproc->transport(r)),
                        options ? options(r) : comm::CommOptions{});
  test::run_threads_first_error(n, [&](int r) { fn(r, worlds[r]); });
}

struct Coords {
  int d, t, p, c;
};

// The layout the mesh promises, built by counting: ranks in order, tensor
// fastest, then context, then data, then pipeline.
std::vector<Coords> expected_layout(int data, int tensor, int pipeline, int context) {
  std::vector<Coords> layout;
  for (int p = 0; p < pipeline; ++p)
    for (int d = 0; d < data; ++d)
      for (int c = 0; c < context; ++c)
        for (int t = 0; t < tensor; ++t) layout.push_back({d, t, p, c});
  return layout;
}

int coord_of(const Coords& c, Axis a) {
  switch (a) {
    case Axis::data: return c.d;
    case Axis::tensor: return c.t;
    case Axis::pipeline: return c.p;
    case Axis::context: return c.c;
  }
  return -1;
}

TEST(Mesh, CoordsGroupsAndAllReducesForEveryShapeUpTo8Ranks) {
  for (int n = 1; n <= 8; ++n) {
    for (int tensor = 1; tensor <= n; ++tensor) {
      for (int pipeline = 1; tensor * pipeline <= n; ++pipeline) {
       for (int context = 1; tensor * pipeline * context <= n; ++context) {
        if (n % (tensor * pipeline * context) != 0) continue;
        const int data = n / (tensor * pipeline * context);
        const std::vector<Coords> layout = expected_layout(data, tensor, pipeline, context);
        SCOPED_TRACE(fmt::format("world {}: data {} x context {} x tensor {} x pipeline {}", n, data, context, tensor,
                                 pipeline));
        on_world(n, [&](int r, comm::Communicator& world) {
          Mesh mesh = Mesh::build(world, {.tensor = tensor, .pipeline = pipeline, .context = context});
          ASSERT_EQ(mesh.rank(), r);
          ASSERT_EQ(mesh.size(), n);
          EXPECT_EQ(mesh.degree(Axis::data), data);
          EXPECT_EQ(mesh.degree(Axis::tensor), tensor);
          EXPECT_EQ(mesh.degree(Axis::pipeline), pipeline);
          EXPECT_EQ(mesh.degree(Axis::context), context);
          for (Axis a : kAxes) EXPECT_EQ(mesh.coord(a), coord_of(layout[r], a)) << name(a);
          EXPECT_EQ(mesh.world_rank(layout[r].d, layout[r].t, layout[r].p, layout[r].c), r);
          // The data x context group: the ranks sharing tensor and pipeline
          // coordinates, ordered by d * context + c.
          {
            const comm::Communicator& g = mesh.data_context_group();
            ASSERT_EQ(g.size(), data * context);
            EXPECT_EQ(g.rank(), layout[r].d * context + layout[r].c);
            for (int i = 0; i < g.size(); ++i)
              EXPECT_EQ(g.transport_rank(i), mesh.world_rank(i / context, layout[r].t, layout[r].p, i % context));
          }
          for (Axis a : kAxes) {
            comm::Communicator g = mesh.group(a);
            ASSERT_TRUE(g.valid());
            ASSERT_EQ(g.size(), mesh.degree(a));
            EXPECT_EQ(g.rank(), mesh.coord(a));
            // The expected members: every rank that matches this one off axis a,
            // in order of their coordinate along a.
            std::vector<int> members;
            for (int q = 0; q < n; ++q) {
              bool same = true;
              for (Axis b : kAxes)
                if (b != a && coord_of(layout[q], b) != coord_of(layout[r], b)) same = false;
              if (same) members.push_back(q);
            }
            ASSERT_EQ(static_cast<int>(members.size()), g.size());
            for (int i = 0; i < g.size(); ++i) {
              EXPECT_EQ(g.transport_rank(i), members[i]);
              EXPECT_EQ(coord_of(layout[members[i]], a), i);
            }
            // Each rank contributes the bit of its world rank: the sum is the
            // set of ranks the all-reduce really reached.
            std::vector<int64_t> bits{int64_t{1} << r};
            g.allreduce(bits).wait(Deadline::after(30s));
            int64_t want = 0;
            for (int q : members) want |= int64_t{1} << q;
            EXPECT_EQ(bits[0], want) << name(a);
          }
        });
       }
      }
    }
  }
}

TEST(Mesh, DescribeNamesShapeAndCoordinates) {
  std::vector<std::string> text(4);
  on_world(4, [&](int r, comm::Communicator& world) {
    text[r] = Mesh::build(world, {.data = 2, .pipeline = 2}).describe();
  });
  EXPECT_EQ(text[3], "data 2 x tensor 1 x pipeline 2; rank 3 = (d 1, t 0, p 1)");
  EXPECT_EQ(text[1], "data 2 x tensor 1 x pipeline 2; rank 1 = (d 1, t 0, p 0)");
  on_world(8, [&](int r, comm::Communicator& world) {
    if (r == 5) text[0] = Mesh::build(world, {.tensor = 2, .context = 2}).describe();
    else Mesh::build(world, {.tensor = 2, .context = 2});
  });
  EXPECT_EQ(text[0], "data 2 x context 2 x tensor 2 x pipeline 1; rank 5 = (d 1, c 0, t 1, p 0)");
}

TEST(Mesh, WorldRankNamesTheNextPipelineStageAndRejectsOutsideCoords) {
  on_world(8, [&](int r, comm::Communicator& world) {
    Mesh mesh = Mesh::build(world, {.tensor = 2, .pipeline = 2});
    const int d = mesh.coord(Axis::data), t = mesh.coord(Axis::tensor), p = mesh.coord(Axis::pipeline);
    if (p == 0) {
      EXPECT_EQ(mesh.world_rank(d, t, 1), r + 4);  // a stage is 2 x 2 ranks
    }
    EXPECT_EQ(mesh.world_rank(d, t, p), r);
    EXPECT_THROW(mesh.world_rank(2, 0, 0), ValueError);
    EXPECT_THROW(mesh.world_rank(0, -1, 0), ValueError);
  });
}

// Every rank passes the same bad shape, so every rank fails with the same message.
void expect_rejected(int n, MeshShape shape, const std::string& expected) {
  on_world(n, [&](int, comm::Communicator& world) {
    try {
      Mesh::build(world, shape);
      ADD_FAILURE() << "accepted " << expected;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  });
}

TEST(Mesh, WrongShapesAreRejectedWithTheDegreesAndWorldSize) {
  expect_rejected(6, {.tensor = 4}, "tensor 4 x pipeline 1 = 4 does not divide the world of 6 ranks");
  expect_rejected(6, {.data = 4, .tensor = 2}, "data 4 x tensor 2 x pipeline 1 = 8 ranks, but the world has 6");
  expect_rejected(4, {.data = 1, .tensor = 2}, "data 1 x tensor 2 x pipeline 1 = 2 ranks, but the world has 4");
  expect_rejected(2, {.tensor = 0}, "degrees must be >= 1");
  expect_rejected(2, {.data = 1, .tensor = 2, .pipeline = -1}, "degrees must be >= 1");
  expect_rejected(1, {.data = -2}, "degrees must be >= 1");
  expect_rejected(6, {.tensor = 2, .context = 2}, "context 2 x tensor 2 x pipeline 1 = 4 does not divide the world of 6");
  expect_rejected(4, {.data = 1, .context = 2}, "data 1 x context 2 x tensor 1 x pipeline 1 = 2 ranks, but the world has 4");
  expect_rejected(2, {.context = 0}, "degrees must be >= 1");
}

TEST(Mesh, RanksPassingDifferentShapesAllFail) {
  on_world(4, [&](int r, comm::Communicator& world) {
    try {
      Mesh::build(world, {.tensor = r == 2 ? 4 : 2});
      ADD_FAILURE() << "rank " << r << " built a mesh";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("every rank must pass the same shape"), std::string::npos) << e.what();
    }
  });
}

TEST(Mesh, SingleProcessMeshHasOneRankGroups) {
  Mesh mesh = Mesh::single_process();
  EXPECT_EQ(mesh.size(), 1);
  EXPECT_EQ(mesh.describe(), "data 1 x tensor 1 x pipeline 1; rank 0 = (d 0, t 0, p 0)");
  for (Axis a : kAxes) {
    comm::Communicator g = mesh.group(a);
    ASSERT_EQ(g.size(), 1);
    std::vector<float> x{2.5f};
    g.allreduce(x).wait(Deadline::after(10s));
    EXPECT_EQ(x[0], 2.5f);
  }
}

int threads_in_process() {
  int n = 0;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  while (dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n;
}

// 8 ranks x (world + 4 axis groups) = 40 communicators, which had a thread
// each before the progress engine. The engine of each rank's family keeps at
// most Engine::Options::max_idle (2) idle threads (measured: 16 for all 8).
TEST(Mesh, A2x2x2MeshDoesNotAddAThreadPerCommunicator) {
  if (threads_in_process() < 0) GTEST_SKIP() << "no /proc/self/task";
  auto inproc = comm::InprocWorld::create(8);
  std::vector<comm::Communicator> worlds;
  std::vector<std::optional<Mesh>> meshes(8);
  const int before = threads_in_process();
  for (int r = 0; r < 8; ++r) worlds.emplace_back(std::shared_ptr<comm::Transport>(inproc->transport(r)));
  test::run_threads_first_error(8, [&](int r) {
    meshes[r] = Mesh::build(worlds[r], {.data = 2, .tensor = 2, .pipeline = 2});
    // One collective on every axis, in the background, so engine threads run.
    for (Axis a : kAxes) {
      comm::Communicator g = meshes[r]->group(a);
      std::vector<double> x{1.0};
      g.allreduce(x, {.algorithm = comm::Algorithm::ring, .background = true}).wait(Deadline::after(30s));
      EXPECT_EQ(x[0], static_cast<double>(meshes[r]->degree(a)));
    }
  });
  const int communicators = 8 * 5;  // world + 4 axes
  // Threads that have left an engine leave /proc a little later; on a loaded
  // machine (the test suite at -j2) that can take a while: wait for them.
  int after = threads_in_process();
  for (int i = 0; i < 200 && after - before > 8 * 3; ++i) {
    std::this_thread::sleep_for(10ms);
    after = threads_in_process();
  }
  std::printf("threads: %d before the 8 worlds, %d with 8 meshes (%d communicators) built and used\n", before,
              after, communicators);
  // 2 idle per engine, plus slack.
  EXPECT_LE(after - before, 8 * 3) << "threads before " << before << ", after " << after;
  EXPECT_LT(after - before, communicators);
  meshes.clear();
  worlds.clear();
}

}  // namespace
}  // namespace braid::parallel
