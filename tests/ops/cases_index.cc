// Op-table cases for the indexing ops (op_table.h).
#include <algorithm>
#include <array>

#include "braid/ops/index.h"
#include "op_table.h"

namespace braid::testing {

namespace {

using Ints = std::vector<int64_t>;

// B bag offsets over n indices: 0, then sorted draws in [0, n], so some bags
// come out empty (equal neighbours) and the last may be too (== n).
Tensor random_offsets(int64_t B, int64_t n, Generator& gen) {
  std::vector<int64_t> o{0};
  for (int64_t b = 1; b < B; ++b) o.push_back(static_cast<int64_t>(gen.below(static_cast<uint64_t>(n) + 1)));
  std::sort(o.begin(), o.end());
  return Tensor::from_vector<int64_t>(o, {B});
}

op::Attrs mode(EmbeddingBagMode m) { return {{"mode", static_cast<int64_t>(m)}}; }

void embedding_bag_cases(std::vector<OpCase>& cases, Generator& gen) {
  // Small V so indices repeat within and across bags; random offsets leave
  // some bags empty; the last configuration has no indices at all.
  for (auto [V, D, n, B] : std::vector<std::array<int64_t, 4>>{{7, 5, 40, 12}, {30, 64, 300, 40}, {5, 3, 0, 4}}) {
    const Tensor w = random_tensor({V, D}, DType::f32, gen);
    const Tensor i = random_index({n}, V, gen);
    const Tensor o = random_offsets(B, n, gen);
    const Tensor p = random_tensor({n}, DType::f32, gen);
    cases.push_back({"embedding_bag", {"F.embedding_bag(i, w, o, mode='sum', per_sample_weights=p)",
                                       {{"w", w}, {"i", i}, {"o", o}, {"p", p}},
                                       [](const auto& v) { return embedding_bag(v[0], v[1], v[2], v[3]); }, {"w", "p"}},
                     "", mode(EmbeddingBagMode::sum)});
    // Without per_sample_weights the op's fourth input is left out, which the
    // oracle cannot send: no dtype sweep (the case above sweeps the op).
    cases.push_back({"embedding_bag", {"F.embedding_bag(i, w, o, mode='sum')", {{"w", w}, {"i", i}, {"o", o}},
                                       [](const auto& v) { return embedding_bag(v[0], v[1], v[2]); }, {"w"}},
                     "", {}, false});
    cases.push_back({"embedding_bag", {"F.embedding_bag(i, w, o, mode='mean')", {{"w", w}, {"i", i}, {"o", o}},
                                       [](const auto& v) {
                                         return embedding_bag(v[0], v[1], v[2], {}, EmbeddingBagMode::mean);
                                       }, {"w"}},
                     "", {}, false});
  }
  // The gradients' own kernels, against PyTorch's gradients of embedding_bag
  // with respect to a zero weight / zero per-sample weights.
  const int64_t V = 7, D = 5, n = 40, B = 12;
  const Tensor g = random_tensor({B, D}, DType::f32, gen);
  const Tensor w = random_tensor({V, D}, DType::f32, gen);
  const Tensor i = random_index({n}, V, gen);
  const Tensor o = random_offsets(B, n, gen);
  const Tensor p = random_tensor({n}, DType::f32, gen);
  op::Attrs backward_attrs = mode(EmbeddingBagMode::sum);
  backward_attrs.set("num_weights", V);
  cases.push_back({"embedding_bag_backward",
                   {"torch.autograd.grad(F.embedding_bag(i, (w0 := torch.zeros(7, 5, dtype=g.dtype, requires_grad=True)), "
                    "o, mode='sum', per_sample_weights=p), w0, g)[0]",
                    {{"g", g}, {"i", i}, {"o", o}, {"p", p}},
                    [backward_attrs](const auto& v) {
                      return op::call1(op::find("embedding_bag_backward"), {v[0], v[1], v[2], v[3]}, backward_attrs);
                    }, {}},
                   "", backward_attrs});
  cases.push_back({"embedding_bag_per_sample_weights_backward",
                   // (PyTorch 1.13 asserts when only per_sample_weights require gradients.)
                   {"torch.autograd.grad(F.embedding_bag(i, w.clone().requires_grad_(), o, mode='sum', "
                    "per_sample_weights=(p0 := torch.zeros(40, dtype=g.dtype, requires_grad=True))), p0, g)[0]",
                    {{"g", g}, {"w", w}, {"i", i}, {"o", o}},
                    [](const auto& v) {
                      return op::call1(op::find("embedding_bag_per_sample_weights_backward"), {v[0], v[1], v[2], v[3]});
                    }, {}}});
}

}  // namespace

std::vector<OpCase> index_cases() {
  Generator gen(41);
  const Tensor w = random_tensor({50, 16}, DType::f32, gen);
  const Tensor x = random_tensor({4, 6, 5}, DType::f32, gen);
  std::vector<OpCase> cases{
      {"embedding", {"F.embedding(i, w)", {{"w", w}, {"i", random_index({8, 9}, 50, gen)}},
                     [](const auto& v) { return embedding(v[0], v[1]); }, {"w"}}},
      {"embedding", {"F.embedding(i, w)", {{"w", strided_copy(w)}, {"i", random_index({300}, 50, gen)}},
                     [](const auto& v) { return embedding(v[0], v[1]); }, {"w"}}},
  };
  for (int64_t dim : {0, 1, 2, -1}) {
    cases.push_back({"index_select", {fmt::format("x.index_select({}, i)", dim),
                                      {{"x", x}, {"i", random_index({7}, x.size(dim), gen)}},
                                      [dim](const auto& v) { return index_select(v[0], dim, v[1]); }, {"x"}},
                     "", {{"dim", dim}}});
    Shape gs = x.shape();
    gs[dim < 0 ? dim + 3 : dim] = 3;
    cases.push_back({"gather", {fmt::format("x.gather({}, i)", dim), {{"x", x}, {"i", random_index(gs, x.size(dim), gen)}},
                                [dim](const auto& v) { return gather(v[0], dim, v[1]); }, {"x"}},
                     "", {{"dim", dim}}});
  }
  // The adjoints, with repeated indices.
  cases.push_back({"index_select_backward",
                   {"torch.zeros(4, 6, 5, dtype=s.dtype).index_add(1, i, s)",
                    {{"s", random_tensor({4, 9, 5}, DType::f32, gen)}, {"i", random_index({9}, 6, gen)}},
                    [](const auto& v) { return index_select_backward(v[0], 1, v[1], {4, 6, 5}); }, {"s"}},
                   "", {{"dim", 1}, {"shape", Ints{4, 6, 5}}}});
  cases.push_back({"gather_backward",
                   {"torch.zeros(4, 6, 5, dtype=s.dtype).scatter_add(1, i, s)",
                    {{"s", random_tensor({4, 8, 5}, DType::f32, gen)}, {"i", random_index({4, 8, 5}, 6, gen)}},
                    [](const auto& v) { return gather_backward(v[0], 1, v[1], {4, 6, 5}); }, {"s"}},
                   "", {{"dim", 1}, {"shape", Ints{4, 6, 5}}}});
  embedding_bag_cases(cases, gen);
  return cases;
}

}  // namespace braid::testing
