// Op-table cases for the grouped GEMM (op_table.h): per-group products written
// in torch as a concatenation of one matmul per group, with an empty group.
#include <string>

#include "braid/ops/grouped_gemm.h"
#include "op_table.h"

namespace braid::testing {

namespace {

// "torch.cat([x[0:2] @ w[0].T, ...])": `product` with $ the group's rows and # its index.
std::string per_group(const std::vector<int64_t>& counts, const std::string& product) {
  std::string s = "torch.cat([";
  int64_t at = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    std::string p = product;
    for (size_t i; (i = p.find('#')) != std::string::npos;) p.replace(i, 1, std::to_string(g));
    for (size_t i; (i = p.find('$')) != std::string::npos;) {
      p.replace(i, 1, std::to_string(at) + ":" + std::to_string(at + counts[g]));
    }
    s += (g ? ", " : "") + p;
    at += counts[g];
  }
  return s + "])";
}

}  // namespace

std::vector<OpCase> grouped_gemm_cases() {
  Generator gen(53);
  const std::vector<int64_t> counts{2, 0, 3, 1};
  const Tensor x = random_tensor({6, 4}, DType::f32, gen);
  const Tensor wt = random_tensor({4, 5, 4}, DType::f32, gen);  // [G, M, K]
  const Tensor wn = random_tensor({4, 4, 5}, DType::f32, gen);  // [G, K, M]
  const Tensor b = random_tensor({6, 3}, DType::f32, gen);
  const op::Attrs t1{{"counts", counts}, {"transpose_w", int64_t{1}}};
  const op::Attrs t0{{"counts", counts}, {"transpose_w", int64_t{0}}};
  const op::Attrs c{{"counts", counts}};
  // Empty groups give zero blocks in the weight gradient: stack per group.
  std::string weight = "torch.stack([";
  int64_t at = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    const std::string r = std::to_string(at) + ":" + std::to_string(at + counts[g]);
    weight += (g ? ", " : "") + std::string("x[") + r + "].T @ b[" + r + "]";
    at += counts[g];
  }
  weight += "])";
  return {
      {"grouped_gemm",
       {per_group(counts, "x[$] @ w[#].T"), {{"x", x}, {"w", wt}},
        [counts](const auto& v) { return grouped_gemm(v[0], v[1], counts, true); }, {"x", "w"}},
       "", t1},
      {"grouped_gemm",
       {per_group(counts, "x[$] @ w[#]"), {{"x", x}, {"w", wn}},
        [counts](const auto& v) { return grouped_gemm(v[0], v[1], counts, false); }, {"x", "w"}},
       "", t0},
      {"grouped_gemm_weight",
       {weight, {{"x", x}, {"b", b}}, [counts](const auto& v) { return grouped_gemm_weight(v[0], v[1], counts); },
        {"x", "b"}},
       "", c},
  };
}

}  // namespace braid::testing
