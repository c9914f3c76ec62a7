#include "braid/nn/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "braid/autograd/node.h"
#include "braid/nn/attention.h"
#include "braid/nn/init.h"
#include "braid/ops/ops.h"

namespace braid::nn {

namespace {

Tensor i64_tensor(const std::vector<int64_t>& v) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
}

// out = y; backward gives y its gradient and `aux` (a scalar) the gradient
// `scale`, so the auxiliary losses reach the parameters through any loss
// computed from y.
Tensor carry_aux_loss(const Tensor& y, const Tensor& aux, double scale) {
  if (!autograd::needs_grad({y, aux})) return y;
  Tensor out = y.detach();
  const Device device = aux.device();
  const DType dtype = aux.dtype();
  autograd::record("moe_aux_loss", {y, aux}, out, [scale, device, dtype](const Tensor& grad) {
    return std::vector<Tensor>{grad, Tensor::full({}, scale, dtype, device)};
  });
  return out;
}

// The top_k experts per row of probs [N, E] plus bias [E] (when defined; ties
// to the lower index), row-major [N, k].
std::vector<int64_t> top_k(const Tensor& probs, const Tensor& bias, int64_t k) {
  Tensor p = probs.detach().to(DType::f64);
  if (bias.defined()) p = add(p, unsqueeze(bias.to(DType::f64), 0));
  p = p.contiguous();
  const int64_t n = p.size(0), e = p.size(1);
  const double* v = p.data<double>();
  std::vector<int64_t> out(static_cast<size_t>(n * k));
  std::vector<int64_t> idx(static_cast<size_t>(e));
  for (int64_t r = 0; r < n; ++r) {
    const double* row = v + r * e;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [row](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    std::copy(idx.begin(), idx.begin() + k, out.begin() + r * k);
  }
  return out;
}

}  // namespace

void RouterStats::add(const RouterStats& o) {
  if (tokens.size() < o.tokens.size()) tokens.resize(o.tokens.size(), 0);
  for (size_t e = 0; e < o.tokens.size(); ++e) tokens[e] += o.tokens[e];
  assigned += o.assigned;
  dropped += o.dropped;
  aux_loss += o.aux_loss;
  z_loss += o.z_loss;
  calls += o.calls;
}

Tensor mlp_activation(const Tensor& h, MlpKind kind) {
  switch (kind) {
    case MlpKind::gelu: return gelu(h);
    case MlpKind::gelu_tanh: return gelu(h, GeluApproximation::tanh);
    case MlpKind::swiglu: return swiglu(h);
  }
  return Tensor();
}

Experts::Experts(int64_t count, int64_t dim, int64_t hidden, MlpKind mlp, Generator& gen) : mlp_(mlp) {
  const int64_t fc1_out = mlp == MlpKind::swiglu ? 2 * hidden : hidden;
  Tensor w1 = Tensor::empty({count, fc1_out, dim}), w2 = Tensor::empty({count, dim, hidden});
  // Each expert as a Linear draws its weight: U(-1/sqrt(in), 1/sqrt(in)).
  init::uniform_(w1, -1 / std::sqrt(static_cast<double>(dim)), 1 / std::sqrt(static_cast<double>(dim)), gen);
  init::uniform_(w2, -1 / std::sqrt(static_cast<double>(hidden)), 1 / std::sqrt(static_cast<double>(hidden)), gen);
  fc1_ = register_parameter("fc1", w1);
  fc2_ = register_parameter("fc2", w2);
}

Experts::Experts(const Experts& all, int64_t first, int64_t count) : mlp_(all.mlp_) {
  if (first < 0 || count <= 0 || first + count > all.count()) {
    fail<ValueError>("Experts: experts {}..{} are not among the {} held", first, first + count - 1, all.count());
  }
  fc1_ = register_parameter("fc1", slice(all.fc1_.detach(), 0, first, first + count).clone());
  fc2_ = register_parameter("fc2", slice(all.fc2_.detach(), 0, first, first + count).clone());
}

Tensor Experts::forward(const Tensor& rows, const std::vector<int64_t>& counts) {
  return grouped_gemm(mlp_activation(grouped_gemm(rows, fc1_, counts), mlp_), fc2_, counts);
}

Tensor Experts::forward(const Tensor&) {
  fail<ValueError>("Experts: forward needs the rows per expert (call MoE::forward)");
}

MoE::MoE(int64_t dim, int64_t hidden, MlpKind mlp, const MoeOptions& options, Generator& gen)
    : dim_(dim), hidden_(hidden), mlp_(mlp), o_(options) {
  if (o_.experts <= 0) fail<ValueError>("MoE: experts must be positive, got {}", o_.experts);
  if (o_.top_k <= 0 || o_.top_k > o_.experts) {
    fail<ValueError>("MoE: top_k = {} must lie in 1..experts = {}", o_.top_k, o_.experts);
  }
  if (o_.capacity_factor < 0 || o_.shared_experts < 0) {
    fail<ValueError>("MoE: capacity_factor ({}) and shared_experts ({}) cannot be negative", o_.capacity_factor,
                     o_.shared_experts);
  }
  router_ = register_module("router", std::make_shared<Linear>(dim, o_.experts, gen, LinearOptions{.bias = false}));
  experts_ = register_module("experts", std::make_shared<Experts>(o_.experts, dim, hidden, mlp, gen));
  if (o_.shared_experts > 0) {
    const int64_t h = o_.shared_experts * hidden;
    shared_fc1_ = register_module("shared_fc1", std::make_shared<Linear>(
                                                    dim, mlp == MlpKind::swiglu ? 2 * h : h, gen,
                                                    LinearOptions{.bias = false}));
    shared_fc2_ = register_module("shared_fc2", std::make_shared<Linear>(h, dim, gen, LinearOptions{.bias = false}));
  }
  stats_.tokens.assign(static_cast<size_t>(o_.experts), 0);
  if (o_.balance == MoeBalance::bias) {
    if (!(o_.bias_rate > 0)) fail<ValueError>("MoE: bias_rate must be positive, got {}", o_.bias_rate);
    bias_ = register_buffer("balance_bias", Tensor::zeros({o_.experts}));
    step_load_.assign(static_cast<size_t>(o_.experts), 0);
  }
}

std::vector<int64_t> MoE::take_step_load() {
  std::vector<int64_t> load = step_load_;
  std::fill(step_load_.begin(), step_load_.end(), 0);
  return load;
}

void MoE::update_balance_bias(const std::vector<int64_t>& load) {
  if (!bias_.defined()) fail<ValueError>("MoE: update_balance_bias needs balance = bias");
  if (static_cast<int64_t>(load.size()) != o_.experts) {
    fail<ValueError>("MoE: update_balance_bias got {} loads for {} experts", load.size(), o_.experts);
  }
  const double total = static_cast<double>(std::accumulate(load.begin(), load.end(), int64_t{0}));
  const double mean = total / static_cast<double>(o_.experts);
  // Exact in f32 steps of the rate: the same on every rank given the same loads.
  float* b = bias_.data<float>();
  for (size_t e = 0; e < load.size(); ++e) {
    const double d = mean - static_cast<double>(load[e]);
    b[e] += static_cast<float>(o_.bias_rate * static_cast<double>((d > 0) - (d < 0)));
  }
}

void MoE::keep_experts(int64_t first, int64_t count, std::shared_ptr<ExpertExchange> exchange) {
  if (first_ != 0 || experts_->count() != o_.experts) fail<ValueError>("MoE: the experts are already split");
  auto kept = std::make_shared<Experts>(*experts_, first, count);
  for (size_t i = 0; i < children().size(); ++i) {
    if (children()[i].first == "experts") replace_child(i, kept);
  }
  experts_ = kept;
  first_ = first;
  exchange_ = std::move(exchange);
}

RouterStats MoE::take_stats() {
  RouterStats s = std::move(stats_);
  stats_ = RouterStats{};
  stats_.tokens.assign(static_cast<size_t>(o_.experts), 0);
  return s;
}

Tensor MoE::forward(const Tensor& x) {
  if (x.ndim() < 1 || x.size(-1) != dim_) {
    fail<ValueError>("MoE: expects [..., {}], got {}", dim_, to_string(x.shape()));
  }
  if (x.device() == Device::meta) {
    fail<ValueError>("MoE: routing reads the router's probabilities, which a meta-device trace has not got "
                     "(graph capture and braid graph do not take mixture-of-experts layers)");
  }
  const int64_t n = x.numel() / dim_, e = o_.experts, k = o_.top_k;
  const Tensor xf = reshape(x, {n, dim_});
  const Tensor logits = router_->forward(xf);  // [N, E]
  const Tensor probs = softmax(logits, 1);
  const std::vector<int64_t> choice = top_k(probs, bias_, k);  // [N, k]; the bias chooses, p gates
  Tensor gates = gather(probs, 1, Tensor::from_vector(choice, {n, k}));
  if (k > 1) gates = div(gates, sum(gates, {1}, true));

  // Capacity: first choices of every token before second choices, tokens in order.
  const int64_t capacity = o_.capacity_factor > 0
                               ? static_cast<int64_t>(std::ceil(o_.capacity_factor * static_cast<double>(n * k) /
                                                                static_cast<double>(e)))
                               : n * k;
  std::vector<int64_t> routed(static_cast<size_t>(e), 0), kept(static_cast<size_t>(e), 0);
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(e));  // assignment ids n k + s
  for (int64_t s = 0; s < k; ++s) {
    for (int64_t t = 0; t < n; ++t) {
      const auto ex = static_cast<size_t>(choice[static_cast<size_t>(t * k + s)]);
      ++routed[ex];
      if (kept[ex] < capacity) {
        ++kept[ex];
        by_expert[ex].push_back(t * k + s);
      }
    }
  }
  std::vector<int64_t> order, token;
  order.reserve(static_cast<size_t>(n * k));
  for (const auto& list : by_expert) order.insert(order.end(), list.begin(), list.end());
  token.reserve(order.size());
  for (const int64_t a : order) token.push_back(a / k);
  const Tensor token_t = i64_tensor(token);

  // Experts on their rows, [A, D] sorted by expert; through the exchange
  // when other ranks hold some of them.
  const Tensor rows = index_select(xf, 0, token_t);
  Tensor out_rows;
  if (exchange_) {
    const ExpertBatch batch = exchange_->dispatch(rows, kept);
    out_rows = exchange_->combine(experts_->forward(batch.rows, batch.counts), batch);
  } else {
    out_rows = experts_->forward(rows, kept);
  }
  const Tensor g = index_select(reshape(gates, {n * k}), 0, i64_tensor(order));
  Tensor y = index_select_backward(mul(out_rows, unsqueeze(g, 1)), 0, token_t, {n, dim_});
  if (shared_fc1_) y = add(y, shared_fc2_->forward(mlp_activation(shared_fc1_->forward(xf), mlp_)));

  // Load balance: E sum_e f_e P_e; z-loss: mean logsumexp^2 (logsumexp =
  // logit - log_softmax, of any one column).
  std::vector<double> f(static_cast<size_t>(e));
  for (int64_t i = 0; i < e; ++i) f[static_cast<size_t>(i)] = static_cast<double>(routed[static_cast<size_t>(i)]) / static_cast<double>(n * k);
  const Tensor balance = mul(sum(mul(mean(probs, {0}), Tensor::from_vector(f, {e}).to(probs.dtype()))),
                             static_cast<double>(e));
  const Tensor lse = sub(slice(logits, 1, 0, 1), slice(log_softmax(logits, 1), 1, 0, 1));
  const Tensor z = mean(mul(lse, lse));
  const double aux_coef = o_.balance == MoeBalance::bias ? 0.0 : o_.aux_loss;
  y = carry_aux_loss(y, add(mul(balance, aux_coef), mul(z, o_.z_loss)), loss_scale_);

  if (is_training()) {
    RouterStats s;
    s.tokens = routed;
    s.assigned = n * k;
    for (int64_t i = 0; i < e; ++i) s.dropped += routed[static_cast<size_t>(i)] - kept[static_cast<size_t>(i)];
    s.aux_loss = balance.item();
    s.z_loss = z.item();
    s.calls = 1;
    stats_.add(s);
    for (size_t i = 0; i < step_load_.size(); ++i) step_load_[i] += routed[i];
  }
  Shape shape = x.shape();
  return reshape(y, shape);
}

}  // namespace braid::nn
