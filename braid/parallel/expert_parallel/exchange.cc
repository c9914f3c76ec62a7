#include "braid/parallel/expert_parallel/exchange.h"

#include <memory>
#include <numeric>

#include "braid/autograd/node.h"
#include "braid/ops/index.h"

namespace braid::parallel::expert_parallel {

namespace {

comm::BufferRef buffer(const Tensor& t) {
  if (t.numel() == 0) return comm::BufferRef(nullptr, 0, t.dtype());
  return comm::BufferRef(t.raw_data(), static_cast<size_t>(t.numel()), t.dtype());
}

Tensor exchange_rows(const Tensor& x, const comm::Communicator& group, const std::vector<int64_t>& send_rows,
                     const std::vector<int64_t>& recv_rows, const char* what) {
  const int64_t d = x.ndim() == 2 ? x.size(1) : 0;
  const Tensor in = x.detach().contiguous();
  Tensor out = Tensor::empty({std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0}), d}, x.dtype());
  std::vector<size_t> s(send_rows.size()), r(recv_rows.size());
  for (size_t i = 0; i < s.size(); ++i) {
    s[i] = static_cast<size_t>(send_rows[i] * d);
    r[i] = static_cast<size_t>(recv_rows[i] * d);
  }
  comm::Communicator g(group);
  wait_for(g.alltoallv(buffer(in), buffer(out), std::move(s), std::move(r), {.timeout = group.options().timeout}), group,
       what);
  return out;
}

struct Route {
  std::vector<int64_t> send_rows, recv_rows;  // per group rank
  Tensor inverse;                             // local-expert order -> (source, expert) order
};

}  // namespace

void wait_for(comm::Work w, const comm::Communicator& c, const char* what) {
  try {
    w.wait(Deadline::after(c.options().timeout * 2));
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("expert parallel {} (rank {} of {}): {}", what, c.rank(), c.size(), e.what());
  }
}

Tensor alltoallv_rows(const Tensor& x, const comm::Communicator& group, const std::vector<int64_t>& send_rows,
                      const std::vector<int64_t>& recv_rows) {
  if (x.ndim() != 2) fail<ValueError>("alltoallv_rows: expects rows [N, D], got {}", to_string(x.shape()));
  Tensor y = exchange_rows(x, group, send_rows, recv_rows, "all-to-all of rows");
  autograd::record("expert_alltoallv", {x}, y, [group, send_rows, recv_rows](const Tensor& g) {
    return std::vector<Tensor>{alltoallv_rows(g, group, recv_rows, send_rows)};
  });
  return y;
}

CommExchange::CommExchange(comm::Communicator group, int64_t experts) : group_(std::move(group)), experts_(experts) {
  if (experts % group_.size() != 0) {
    fail<ConfigError>("expert parallel: {} experts do not split over {} ranks", experts, group_.size());
  }
  local_ = experts / group_.size();
}

nn::ExpertBatch CommExchange::dispatch(const Tensor& rows, const std::vector<int64_t>& counts) {
  const int x = group_.size();
  if (static_cast<int64_t>(counts.size()) != experts_) {
    fail<ValueError>("expert parallel: {} counts for {} experts", counts.size(), experts_);
  }
  // recv[i L + l]: rows group rank i sends for local expert l.
  std::vector<int64_t> recv(static_cast<size_t>(experts_));
  comm::Communicator g(group_);
  wait_for(g.alltoall(comm::BufferRef(const_cast<int64_t*>(counts.data()), counts.size(), DType::i64),
                  comm::BufferRef(recv.data(), recv.size(), DType::i64), {.timeout = group_.options().timeout}),
       group_, "count exchange");
  auto route = std::make_shared<Route>();
  route->send_rows.assign(static_cast<size_t>(x), 0);
  route->recv_rows.assign(static_cast<size_t>(x), 0);
  for (int64_t e = 0; e < experts_; ++e) route->send_rows[static_cast<size_t>(e / local_)] += counts[static_cast<size_t>(e)];
  for (int64_t e = 0; e < experts_; ++e) route->recv_rows[static_cast<size_t>(e / local_)] += recv[static_cast<size_t>(e)];
  const Tensor arrived = alltoallv_rows(rows, group_, route->send_rows, route->recv_rows);

  // Arrived rows are in (source rank, local expert) blocks; the grouped GEMM
  // wants them by local expert.
  std::vector<int64_t> start(static_cast<size_t>(experts_), 0);  // of block (i, l)
  for (int64_t b = 1; b < experts_; ++b) start[static_cast<size_t>(b)] = start[static_cast<size_t>(b - 1)] + recv[static_cast<size_t>(b - 1)];
  nn::ExpertBatch batch;
  batch.counts.assign(static_cast<size_t>(local_), 0);
  std::vector<int64_t> order, inverse(static_cast<size_t>(arrived.size(0)));
  order.reserve(inverse.size());
  for (int64_t l = 0; l < local_; ++l) {
    for (int64_t i = 0; i < x; ++i) {
      const auto b = static_cast<size_t>(i * local_ + l);
      for (int64_t r = 0; r < recv[b]; ++r) {
        inverse[static_cast<size_t>(start[b] + r)] = static_cast<int64_t>(order.size());
        order.push_back(start[b] + r);
      }
      batch.counts[static_cast<size_t>(l)] += recv[b];
    }
  }
  const auto as_tensor = [](const std::vector<int64_t>& v) {
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  };
  batch.rows = index_select(arrived, 0, as_tensor(order));
  route->inverse = as_tensor(inverse);
  batch.route = route;
  return batch;
}

Tensor CommExchange::combine(const Tensor& rows, const nn::ExpertBatch& batch) {
  const auto& route = *std::static_pointer_cast<Route>(batch.route);
  return alltoallv_rows(index_select(rows, 0, route.inverse), group_, route.recv_rows, route.send_rows);
}

}  // namespace braid::parallel::expert_parallel
