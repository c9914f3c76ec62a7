#include "braid/parallel/context_parallel/layout.h"

#include "braid/base/error.h"
#include "braid/comm/tensor_buffer.h"
#include "braid/ops/shape.h"

namespace braid::parallel::context_parallel {

void ContextLayout::check_length(int64_t length, const char* what) const {
  if (length <= 0 || length % chunks() != 0) {
    fail<ConfigError>("{}: parallel.context = {} ({}) cuts the sequence into {} equal chunks, which {} tokens are not",
                      what, size, zigzag ? "ring, zig-zag" : "ulysses", chunks(), length);
  }
}

std::vector<std::pair<int64_t, int64_t>> ContextLayout::spans(int64_t length) const {
  const int64_t c = length / chunks();
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int i = 0; i < chunks_per_rank(); ++i) {
    const int64_t g = chunk_of(rank, i);
    out.emplace_back(g * c, (g + 1) * c);
  }
  return out;
}

Tensor ContextLayout::shard(const Tensor& x, int64_t dim) const {
  if (size == 1) return x;
  check_length(x.size(dim), "context parallel input");
  std::vector<Tensor> parts;
  for (const auto& [begin, end] : spans(x.size(dim))) parts.push_back(slice(x, dim, begin, end));
  return parts.size() == 1 ? contiguous(parts[0]) : concat(parts, dim);
}

Tensor gather_sequence(const Tensor& local, const comm::Communicator& cp, const ContextLayout& layout) {
  if (layout.size == 1) return local;
  const int n = layout.size;
  const Tensor mine = local.detach().contiguous();
  Shape all_shape = mine.shape();
  all_shape.insert(all_shape.begin(), n);
  Tensor all = Tensor::empty(all_shape, mine.dtype(), mine.device());  // [C, B, T / C, ...]
  const Duration timeout = cp.options().timeout;
  comm::Communicator(cp)
      .allgather(comm::buffer_of(mine), comm::buffer_of(all), {.timeout = timeout})
      .wait(Deadline::after(timeout * 2));
  // Rank r's local chunk i is global chunk chunk_of(r, i); put each in place.
  const int per = layout.chunks_per_rank();
  const int64_t c = mine.size(1) / per;
  std::vector<Tensor> chunks(static_cast<size_t>(layout.chunks()));
  for (int r = 0; r < n; ++r) {
    const Tensor block = squeeze(slice(all, 0, r, r + 1), 0);
    for (int i = 0; i < per; ++i) chunks[static_cast<size_t>(layout.chunk_of(r, i))] = slice(block, 1, i * c, (i + 1) * c);
  }
  return concat(chunks, 1);
}

}  // namespace braid::parallel::context_parallel
