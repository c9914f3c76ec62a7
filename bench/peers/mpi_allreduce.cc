// Open MPI's MPI_Allreduce (f32 sum, in place) per size, for
// bench/collective_vs_peers.py.  mpirun -n 2 bench_mpi_allreduce --sizes 4096,...
#include <mpi.h>

#include <vector>

#include "bench/peers/peer_common.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const peer::Args args = peer::parse(argc, argv);
  size_t max_bytes = 0;
  for (size_t s : args.sizes) max_bytes = std::max(max_bytes, s);
  std::vector<float> buf(max_bytes / sizeof(float) + 1, 0.0f);
  const auto rows = peer::measure(
      args,
      [&](size_t bytes) {
        MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(bytes / sizeof(float)), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      },
      [&](double x, bool max) {
        if (max) MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        else MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        return x;
      },
      [] { MPI_Barrier(MPI_COMM_WORLD); });
  if (rank == 0) peer::print_json("openmpi", "MPI_Allreduce", size, rows);
  MPI_Finalize();
  return 0;
}
