#include "braid/data/loader.h"

#include <algorithm>

#include "braid/base/rng.h"
#include "braid/base/thread_name.h"

namespace braid::data {

Loader::Loader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Sampler> sampler,
               const LoaderOptions& options, Transforms transforms)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(options),
      transforms_(std::move(transforms)) {
  if (!dataset_ || !sampler_) fail<ValueError>("Loader: dataset and sampler are required");
  if (options_.batch_size < 1) fail<ValueError>("Loader: batch_size must be >= 1, got {}", options_.batch_size);
  if (options_.workers < 0) fail<ValueError>("Loader: workers must be >= 0, got {}", options_.workers);
  if (options_.prefetch < 0) fail<ValueError>("Loader: prefetch must be >= 0, got {}", options_.prefetch);
  spec_ = dataset_->spec();
  auto_prefetch_ = options_.prefetch == 0;
  size_prefetch();
  if (!transforms_.empty() && spec_.input_dtype != DType::f32) {
    fail<ValueError>("Loader: transforms need f32 inputs, the dataset gives {}", name(spec_.input_dtype));
  }
}

Loader::~Loader() { stop_workers(); }

void Loader::size_prefetch() {
  if (auto_prefetch_) {
    const int64_t batch_bytes =
        options_.batch_size * static_cast<int64_t>(spec_.input_bytes() + spec_.target_bytes());
    const int64_t fit = (int64_t{4} << 20) / std::max<int64_t>(batch_bytes, 1);  // batches in 4 MiB
    options_.prefetch = static_cast<int>(std::clamp<int64_t>(fit, 2, 16));
  }
  ahead_ = static_cast<int64_t>(options_.workers) * options_.prefetch;
  refill_ = std::max<int64_t>(1, ahead_ / 2);
}

int64_t Loader::batches_per_epoch() const {
  int64_t n = sampler_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void Loader::set_batch_size(int64_t batch_size) {
  if (batch_size < 1) fail<ValueError>("Loader: batch_size must be >= 1, got {}", batch_size);
  if (batch_size == options_.batch_size) return;
  stop_workers();
  epoch_ = -1;  // the current epoch's batches were cut at the old size
  options_.batch_size = batch_size;
  size_prefetch();
  // Buffers of the old size leave the pool; batches still held keep theirs alive.
  std::lock_guard lock(mu_);
  pool_.clear();
  ready_.clear();
}

void Loader::stop_workers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void Loader::start_epoch(int64_t epoch) {
  stop_workers();
  epoch_ = epoch;
  order_ = sampler_->indices(epoch);
  num_batches_ = batches_per_epoch();
  {
    std::lock_guard lock(mu_);
    stop_ = false;
    claimed_ = consumed_ = 0;
    ready_.clear();
    error_ = nullptr;
  }
  for (int i = 0; i < options_.workers; ++i) {
    threads_.emplace_back([this, i] {
      name_this_thread(fmt::format("loader:{}", i));
      worker_loop();
    });
  }
}

size_t Loader::acquire_buffer() {
  // Caller holds mu_. A buffer is free when nothing but the pool references its
  // storage: the pool's own tensor is the one owner, published views add more.
  for (size_t i = 0; i < pool_.size(); ++i) {
    Buffer& b = pool_[i];
    if (!b.filling && b.input.storage().use_count() == 1 && b.target.storage().use_count() == 1) {
      b.filling = true;
      return i;
    }
  }
  Shape in = spec_.input_shape, tg = spec_.target_shape;
  in.insert(in.begin(), options_.batch_size);
  tg.insert(tg.begin(), options_.batch_size);
  pool_.push_back({Tensor::empty(in, spec_.input_dtype), Tensor::empty(tg, spec_.target_dtype), true});
  return pool_.size() - 1;
}

Batch Loader::fill(int64_t b) {
  Tensor input, target;
  size_t slot;
  {
    std::lock_guard lock(mu_);
    slot = acquire_buffer();
    input = pool_[slot].input;
    target = pool_[slot].target;
  }
  const int64_t first = b * options_.batch_size;
  const int64_t count = std::min<int64_t>(options_.batch_size, static_cast<int64_t>(order_.size()) - first);
  const size_t in_bytes = spec_.input_bytes(), tg_bytes = spec_.target_bytes();
  auto* in = static_cast<std::byte*>(input.raw_data());
  auto* tg = static_cast<std::byte*>(target.raw_data());
  try {
    for (int64_t j = 0; j < count; ++j) {
      const int64_t pos = first + j;
      dataset_->read(order_[pos], in + j * in_bytes, tg + j * tg_bytes);
      if (transforms_.empty()) continue;
      // Stream = (epoch, position in epoch): augmentation independent of threads and batch size.
      Generator rng(options_.seed, (static_cast<uint64_t>(epoch_) << 40) | static_cast<uint64_t>(pos));
      auto* x = reinterpret_cast<float*>(in + j * in_bytes);
      for (const auto& t : transforms_) t->apply(x, spec_.input_shape, rng);
    }
  } catch (...) {
    std::lock_guard lock(mu_);
    pool_[slot].filling = false;
    throw;
  }
  auto view = [count](const Tensor& full) {
    Shape shape = full.shape();
    shape[0] = count;
    return full.as_strided(shape, full.strides(), 0);
  };
  Batch batch{view(input), view(target), b};
  std::lock_guard lock(mu_);
  pool_[slot].filling = false;
  return batch;
}

void Loader::worker_loop() {
  while (true) {
    int64_t b;
    {
      std::unique_lock lock(mu_);
      // Waits for the consumer to make room; stop_workers() wakes it to exit.
      cv_.wait(lock, [&] { return stop_ || error_ || claimed_ >= num_batches_ || claimed_ < consumed_ + ahead_; });
      if (stop_ || error_ || claimed_ >= num_batches_) return;
      b = claimed_++;
    }
    try {
      Batch batch = fill(b);
      std::lock_guard lock(mu_);
      ready_.emplace(b, std::move(batch));
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

std::optional<Batch> Loader::next() {
  if (epoch_ < 0) start_epoch(0);
  if (options_.workers == 0) {
    if (consumed_ >= num_batches_) return std::nullopt;
    return fill(consumed_++);
  }
  std::unique_lock lock(mu_);
  if (consumed_ >= num_batches_) return std::nullopt;
  const Deadline deadline = Deadline::after(options_.timeout);
  bool ok = cv_.wait_until(lock, deadline.at(), [&] { return error_ || ready_.count(consumed_) > 0; });
  if (error_) std::rethrow_exception(error_);
  if (!ok) {
    fail<TimeoutError>("data loader: batch {} of epoch {} not ready after {} ({} worker threads, {} batches ready)",
                       consumed_, epoch_, format_duration(options_.timeout), options_.workers, ready_.size());
  }
  auto it = ready_.find(consumed_);
  Batch batch = std::move(it->second);
  ready_.erase(it);
  ++consumed_;
  const bool wake = claimed_ < num_batches_ && consumed_ + ahead_ - claimed_ >= refill_;
  lock.unlock();
  // A worker sleeps only when all ahead_ batches are claimed, so whenever a
  // batch is missing some worker is still awake filling it: skipping this wake
  // until refill_ slots are free never leaves next() waiting on a sleeper.
  if (wake) cv_.notify_all();
  return batch;
}

}  // namespace braid::data
