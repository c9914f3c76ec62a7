/* Open MPI ping-pong with the same sizes, iteration counts and warm-up as
 * `p2p_worker bench` (tests/comm/p2p_worker.cc), so bench/p2p_vs_mpi.sh can
 * print both side by side. Prints: bytes, one-way us, GB/s. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  double scale = argc > 1 ? atof(argv[1]) : 1.0;
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const size_t sizes[] = {8, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  const int nsizes = sizeof sizes / sizeof sizes[0];
  char* buf = malloc(sizes[nsizes - 1]);
  memset(buf, 1, sizes[nsizes - 1]);
  if (rank == 0) printf("%-10s %12s %12s\n", "bytes", "one-way us", "GB/s");
  for (int k = 0; k < nsizes && rank < 2; ++k) {
    int n = (int)sizes[k];
    int iters = (int)(scale * (n <= 65536 ? 2000 : (256 << 20) / n));
    if (iters < 4) iters = 4;
    int warm = iters / 10 > 2 ? iters / 10 : 2;
    double t0 = 0;
    for (int i = 0; i < warm + iters; ++i) {
      if (i == warm) t0 = MPI_Wtime();
      if (rank == 0) {
        MPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    double one_way = (MPI_Wtime() - t0) / (2.0 * iters);
    if (rank == 0) printf("%-10d %12.2f %12.3f\n", n, one_way * 1e6, n / one_way / 1e9);
    fflush(stdout);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
