#include "braid/parallel/pipeline/p2p_tensor.h"

#include <array>

#include "braid/base/error.h"
#include "braid/comm/tensor_buffer.h"

namespace braid::parallel::pipeline {

namespace {

constexpr int kMaxDims = 6;

}  // namespace

TensorSend::TensorSend(comm::Communicator& comm, const Tensor& t, int peer, uint64_t tag)
    : header_(std::make_shared<std::array<int64_t, 8>>()), values_(t.contiguous()) {
  if (t.ndim() > kMaxDims) fail<ValueError>("pipeline: cannot send a tensor of rank {} (at most {})", t.ndim(), kMaxDims);
  auto& h = *header_;
  h.fill(0);
  h[0] = static_cast<int64_t>(t.dtype());
  h[1] = t.ndim();
  for (int64_t d = 0; d < t.ndim(); ++d) h[static_cast<size_t>(2 + d)] = t.size(d);
  header_work_ = comm.send({h.data(), h.size(), DType::i64}, peer, {.tag = tag});
  values_work_ = comm.send(comm::buffer_of(values_), peer, {.tag = tag});
}

void TensorSend::wait(Deadline deadline) const {
  header_work_.wait(deadline);
  values_work_.wait(deadline);
}

Tensor recv_tensor(comm::Communicator& comm, int peer, uint64_t tag, Deadline deadline, const std::string& what,
                   Device device) {
  std::array<int64_t, 8> h{};
  comm.recv({h.data(), h.size(), DType::i64}, peer, {.tag = tag}).wait(deadline);
  const int64_t dtype = h[0], ndim = h[1];
  bool ok = dtype >= 0 && dtype <= static_cast<int64_t>(DType::b8) && ndim >= 0 && ndim <= kMaxDims;
  Shape shape;
  int64_t n = 1;
  for (int64_t d = 0; ok && d < ndim; ++d) {
    const int64_t s = h[static_cast<size_t>(2 + d)];
    ok = s >= 0 && (s == 0 || n <= kMaxElements / s);
    n *= ok ? s : 1;
    shape.push_back(s);
  }
  if (!ok) fail<ValueError>("pipeline: refused the header of {}: dtype {}, rank {}", what, dtype, ndim);
  Tensor t = Tensor::empty(shape, static_cast<DType>(dtype), device);
  comm.recv(comm::buffer_of(t), peer, {.tag = tag}).wait(deadline);
  return t;
}

}  // namespace braid::parallel::pipeline
