// Op-table cases for dropout (op_table.h).
#include "braid/ops/dropout.h"
#include "op_table.h"

namespace braid::testing {

std::vector<OpCase> dropout_cases() {
  Generator gen(71);
  // Each call draws from a fresh generator with one seed, so the mask is the
  // same on every call (finite differences, strided inputs). The sweep calls
  // the op with p = 0, which keeps every element, so the dtypes compare.
  return {{"dropout", {"", {{"x", random_tensor({6, 7}, DType::f32, gen)}}, [](const auto& v) {
                         Generator g(5, 1);
                         return dropout(v[0], {.p = 0.3, .generator = &g});
                       }, {"x"}},
           "PyTorch draws its masks from its own generator; dropout_test.cc checks the keep rate, the scale and the "
           "mask's stream",
           {{"p", 0.0}, {"generator", 0}}}};
}

}  // namespace braid::testing
