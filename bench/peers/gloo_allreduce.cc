// Gloo's ring all-reduce over its tcp transport (f32 sum, in place) per size,
// for bench/collective_vs_peers.py. Ranks rendezvous through a FileStore.
//   RANK=r WORLD_SIZE=p GLOO_STORE_DIR=/tmp/x bench_gloo_allreduce --sizes 4096,...
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdlib>
#include <vector>

#include "bench/peers/peer_common.h"

int main(int argc, char** argv) {
  const char* r = std::getenv("RANK");
  const char* p = std::getenv("WORLD_SIZE");
  const char* dir = std::getenv("GLOO_STORE_DIR");
  if (!r || !p || !dir) {
    std::fprintf(stderr, "set RANK, WORLD_SIZE and GLOO_STORE_DIR\n");
    return 2;
  }
  const int rank = std::atoi(r), size = std::atoi(p);
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);

  const peer::Args args = peer::parse(argc, argv);
  size_t max_bytes = 0;
  for (size_t s : args.sizes) max_bytes = std::max(max_bytes, s);
  std::vector<float> buf(max_bytes / sizeof(float) + 1, 0.0f);
  const auto rows = peer::measure(
      args,
      [&](size_t bytes) {
        gloo::AllreduceOptions opts(context);
        opts.setOutput(buf.data(), bytes / sizeof(float));
        opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        gloo::allreduce(opts);
      },
      [&](double x, bool max) {
        if (max) {
          gloo::AllreduceOptions opts(context);
          opts.setOutput(&x, 1);
          opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
          gloo::allreduce(opts);
        } else {
          gloo::BroadcastOptions opts(context);
          opts.setOutput(&x, 1);
          opts.setRoot(0);
          gloo::broadcast(opts);
        }
        return x;
      },
      [&] {
        gloo::BarrierOptions opts(context);
        gloo::barrier(opts);
      });
  if (rank == 0) peer::print_json("gloo", "ring", size, rows);
  return 0;
}
