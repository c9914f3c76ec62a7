// Op-table cases for the optimizer updates: one step against its closed form
// in PyTorch (tests/optim checks the optimizers over many steps against
// torch.optim itself).
#include "braid/ops/update.h"
#include "op_table.h"

namespace braid::testing {

std::vector<OpCase> update_cases() {
  Generator gen(13);
  const Tensor p = random_tensor({5, 3}, DType::f32, gen), g = random_tensor({5, 3}, DType::f32, gen);
  const Tensor b = random_tensor({5, 3}, DType::f32, gen), v = random_tensor({5, 3}, DType::f32, gen, 0.1, 1);
  const Tensor sgd_scalars = Tensor::from_vector<double>({0.1, 3}, {2});
  const Tensor adam_scalars = Tensor::from_vector<double>({0.01, 3}, {2});
  // A second parameter of another shape for the multi-tensor update.
  const Tensor p2 = random_tensor({4}, DType::f32, gen), g2 = random_tensor({4}, DType::f32, gen);
  const Tensor m2 = random_tensor({4}, DType::f32, gen), v2 = random_tensor({4}, DType::f32, gen, 0.1, 1);
  return {
      {"sgd_update_",
       {"p - 0.1 * (0.9 * b + 0.75 * (g + 0.01 * p))", {{"p", p}, {"g", g}, {"b", b}, {"s", sgd_scalars}},
        [](const auto& in) {
          Tensor q = in[0].clone();
          sgd_update_(q, in[1], in[2].clone(), in[3], {.weight_decay = 0.01, .momentum = 0.9, .dampening = 0.25});
          return q;
        },
        {}},
       "", {{"weight_decay", 0.01}, {"momentum", 0.9}, {"dampening", 0.25}, {"nesterov", int64_t{0}}, {"first", int64_t{0}}},
       true, true, /*strided=*/false},
      // Adam at t = 3: m' = b1 m + (1-b1) g, v' = b2 v + (1-b2) g^2,
      // p' = p - lr / (1 - b1^t) * m' / (sqrt(v') / sqrt(1 - b2^t) + eps).
      {"adam_update_",
       {"p - 0.01 / (1 - 0.9**3) * (0.9 * m + 0.1 * g) / (torch.sqrt(0.999 * v + 0.001 * g * g) / math.sqrt(1 - 0.999**3) + 1e-8)",
        {{"p", p}, {"g", g}, {"m", b}, {"v", v}, {"s", adam_scalars}},
        [](const auto& in) {
          Tensor q = in[0].clone();
          adam_update_(q, in[1], in[2].clone(), in[3].clone(), in[4], {});
          return q;
        },
        {}, 1e-4, 1e-6},
       "", {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0}, {"decoupled", int64_t{0}}},
       true, true, /*strided=*/false},
      // The same step over two parameters in one op (AdamW's decay here): the
      // first parameter's result; tests/cuda/device_adam_test.cc checks every
      // one bit for bit against adam_update_.
      {"adam_update_multi_",
       {"(p * (1 - 0.01 * 0.1)) - 0.01 / (1 - 0.9**3) * (0.9 * m + 0.1 * g) / (torch.sqrt(0.999 * v + 0.001 * g * g)"
        " / math.sqrt(1 - 0.999**3) + 1e-8)",
        {{"s", adam_scalars}, {"p", p}, {"g", g}, {"m", b}, {"v", v}, {"p2", p2}, {"g2", g2}, {"m2", m2}, {"v2", v2}},
        [](const auto& in) {
          const Tensor q = in[1].clone(), q2 = in[5].clone();
          const std::vector<Tensor> params{q, q2}, grads{in[2], in[6]}, m{in[3].clone(), in[7].clone()},
              v{in[4].clone(), in[8].clone()};
          adam_update_multi_(params, grads, m, v, in[0], {.weight_decay = 0.1, .decoupled = true});
          return q;
        },
        {}, 1e-4, 1e-6},
       "", {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.1}, {"decoupled", int64_t{1}}},
       true, true, /*strided=*/false},
      // Gradient clipping's scale over several tensors (the first returned).
      {"scale_multi_",
       {"p * 0.25", {{"p", p}, {"p2", p2}},
        [](const auto& in) {
          const Tensor q = in[0].clone();
          scale_multi_(std::vector<Tensor>{q, in[1].clone()}, 0.25);
          return q;
        },
        {}},
       "", {{"factor", 0.25}}, true, true, /*strided=*/false},
      // Gradient clipping's squared norm over several tensors.
      {"sum_squares_multi",
       {"(p.double() ** 2).sum() + (p2.double() ** 2).sum()", {{"p", p}, {"p2", p2}},
        [](const auto& in) { return sum_squares_multi(std::vector<Tensor>{in[0], in[1]}); }, {}, 1e-6, 1e-7},
       "", {}, true, true, /*strided=*/false},
  };
}

}  // namespace braid::testing
