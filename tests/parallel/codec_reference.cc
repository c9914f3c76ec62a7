// The braid side of codec_vs_torch.py: every rank's bucket gradients for a
// few steps (from the Python side's file) averaged by braid's fp16 and
// PowerSGD codecs over the in-process transport, one thread per rank; writes
// the averaged buckets and PowerSGD's error memories for Python to compare.
//
//   braid_codec_reference IN OUT --ranks W --steps T --warmup S
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "braid/comm/codec/codec.h"
#include "braid/comm/transport/inproc.h"
#include "tests/parallel/reference_io.h"

using namespace braid;
namespace cc = comm::codec;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s IN OUT --ranks W --steps T --warmup S\n", argv[0]);
    return 2;
  }
  int ranks = 2, steps = 5, warmup = 2;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::stoi(argv[i + 1]);
    if (k == "--ranks") ranks = v;
    else if (k == "--steps") steps = v;
    else if (k == "--warmup") warmup = v;
  }
  try {
    const safetensors::File in = safetensors::read(argv[1]);
    std::map<std::string, Tensor> t;
    for (const auto& [name, d] : in.tensors) t[name] = testing::to_tensor(d);
    // shapes: [k, 2] (rows, cols of each tensor as a matrix; cols 1 for a vector)
    std::vector<cc::Matrix> layout;
    const Tensor& shapes = t.at("shapes");
    for (int64_t i = 0; i < shapes.shape()[0]; ++i) {
      layout.push_back({static_cast<size_t>(shapes.data<int64_t>()[2 * i]), static_cast<size_t>(shapes.data<int64_t>()[2 * i + 1])});
    }
    std::map<std::string, Tensor> out;
    std::mutex mu;
    for (const std::string codec : {"fp16", "powersgd"}) {
      auto world = comm::InprocWorld::create(ranks);
      std::vector<std::thread> threads;
      std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
      for (int r = 0; r < ranks; ++r) {
        threads.emplace_back([&, r] {
          try {
            comm::Communicator comm(std::shared_ptr<comm::Transport>(world->transport(r)));
            cc::CodecOptions o{.name = codec, .powersgd_rank = 2, .powersgd_min_rate = 2,
                               .warmup_steps = codec == "powersgd" ? warmup : 0};
            auto c = cc::make_codec(o);
            cc::BucketState state;
            if (codec == "powersgd") {  // PyTorch's state holds this Q before its first compressed step
              const Tensor& q0 = t.at("q0");
              state.tensors["q"].assign(q0.data<float>(), q0.data<float>() + q0.numel());
            }
            for (int s = 0; s < steps; ++s) {
              Tensor g = t.at(fmt::format("g.{}.{}", r, s)).clone();
              cc::CodecStats stats;
              c->average(comm, {g.data<float>(), static_cast<size_t>(g.numel())}, layout, state, {}, stats);
              std::lock_guard lock(mu);
              out[fmt::format("{}.{}.{}", codec, r, s)] = g;
              if (codec == "powersgd") {
                const std::vector<float>& m = state.tensor("memory", static_cast<size_t>(g.numel()));
                Tensor e = Tensor::empty({g.numel()}, DType::f32);
                std::copy(m.begin(), m.end(), e.data<float>());
                out[fmt::format("err.{}.{}", r, s)] = e;
              }
            }
          } catch (...) {
            errors[static_cast<size_t>(r)] = std::current_exception();
          }
        });
      }
      for (auto& th : threads) th.join();
      for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    }
    testing::write_f32(argv[2], out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid_codec_reference: %s\n", e.what());
    return 1;
  }
  return 0;
}
