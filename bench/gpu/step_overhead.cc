// Framework overhead of one training step on the GPU: the CNN of
// examples/configs/fashion_cnn.toml (SGD with momentum), or the char
// transformer of bench/gpu/train_gpu.py under bf16 autocast (AdamW), steps
// queued back to back without reading the loss. CUPTI records every kernel and
// copy; the overhead is the share of the step's wall time in which the GPU ran
// none of them (it waited for the host), and the kernels that took the most
// GPU time are listed.
//
//   build/bin/gpu_step_overhead [cnn|transformer] [BATCH] [STEPS]
#include <cupti.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "braid/braid.h"

namespace {

using namespace braid;

std::mutex g_mu;
std::vector<std::pair<uint64_t, uint64_t>> g_intervals;  // ns, GPU clock
std::map<std::string, std::pair<uint64_t, int>> g_kernels;  // name -> (ns, calls)

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 16 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      g_intervals.emplace_back(k->start, k->end);
      auto& [ns, calls] = g_kernels[std::string(k->name).substr(0, 90)];
      ns += k->end - k->start;
      ++calls;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      g_intervals.emplace_back(m->start, m->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      g_intervals.emplace_back(m->start, m->end);
    }
  }
  std::free(buffer);
}

// Nanoseconds covered by the union of the intervals.
uint64_t busy_ns(std::vector<std::pair<uint64_t, uint64_t>> v) {
  std::sort(v.begin(), v.end());
  uint64_t busy = 0, end = 0;
  for (const auto& [s, e] : v) {
    if (e <= end) continue;
    busy += e - std::max(s, end);
    end = e;
  }
  return busy;
}

std::shared_ptr<nn::Module> cnn(Generator& gen) {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Conv2d>(1, 32, std::array<int64_t, 2>{3, 3}, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(Pool2dOptions{.kernel = {2, 2}}));
  m->push_back(std::make_shared<nn::Conv2d>(32, 64, std::array<int64_t, 2>{3, 3}, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(Pool2dOptions{.kernel = {2, 2}}));
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(1600, 128, gen));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(128, 10, gen));
  return m;
}

// bench/gpu/train_gpu.py's transformer: d_model 768, 12 heads, 6 layers, context 256, 256 symbols.
std::shared_ptr<nn::Module> transformer(Generator& gen) {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::TokenPositionEmbedding>(256, 256, 768, gen));
  for (int i = 0; i < 6; ++i) m->push_back(std::make_shared<nn::TransformerBlock>(768, 12, gen));
  m->push_back(std::make_shared<nn::LayerNorm>(Shape{768}));
  m->push_back(std::make_shared<nn::Linear>(768, 256, gen));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "cnn";
  const bool is_cnn = which == "cnn";
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : (is_cnn ? 256 : 32);
  const int steps = argc > 3 ? std::atoi(argv[3]) : (is_cnn ? 200 : 20);
  const Device gpu = Device::cuda(0);
  if (!available(gpu)) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  Generator gen(0);
  auto model = is_cnn ? cnn(gen) : transformer(gen);
  model->to(gpu);
  std::unique_ptr<optim::Optimizer> opt;
  Tensor x, y;
  if (is_cnn) {
    opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    x = Tensor::empty({batch, 1, 28, 28});
    nn::init::uniform_(x, -1, 1, gen);
    x = x.to(gpu);
    y = Tensor::zeros({batch}, DType::i64).to(gpu);
  } else {
    opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 3e-3});
    x = Tensor::full({batch, 256}, 7, DType::i64).to(gpu);
    y = Tensor::full({batch * 256}, 9, DType::i64).to(gpu);
  }
  auto step = [&] {
    opt->zero_grad();
    Tensor loss;
    {
      Autocast autocast(is_cnn ? DType::f32 : DType::bf16);
      Tensor out = model->forward(x);
      loss = cross_entropy(reshape(out, {-1, out.size(-1)}), y);
    }
    backward(loss);
    opt->step();
  };
  for (int i = 0; i < (is_cnn ? 20 : 5); ++i) step();  // warm-up: cuDNN choices, the allocator's cache
  backend(gpu).synchronize(0);

  cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  const auto t0 = std::chrono::steady_clock::now();
  double host_s = 0;
  for (int i = 0; i < steps; ++i) {
    const auto h0 = std::chrono::steady_clock::now();
    step();
    host_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
  }
  backend(gpu).synchronize(0);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cuptiActivityFlushAll(1);
  const double gpu_s = static_cast<double>(busy_ns(g_intervals)) * 1e-9;
  std::printf("%s batch %lld, %d steps: wall %.1f us/step, host (queueing) %.1f us/step, GPU busy %.1f us/step "
              "(%zu kernels+copies/step); framework overhead %.1f %% of the step\n",
              which.c_str(), static_cast<long long>(batch), steps, wall_s / steps * 1e6, host_s / steps * 1e6,
              gpu_s / steps * 1e6, g_intervals.size() / steps, 100.0 * (1 - gpu_s / wall_s));
  std::vector<std::pair<uint64_t, std::string>> top;
  for (const auto& [name, t] : g_kernels) top.emplace_back(t.first, name);
  std::sort(top.rbegin(), top.rend());
  for (size_t i = 0; i < std::min<size_t>(top.size(), 12); ++i) {
    std::printf("  %7.1f us/step %5d calls/step  %s\n", top[i].first * 1e-3 / steps, g_kernels[top[i].second].second / steps,
                top[i].second.c_str());
  }
  return 0;
}
