// matmul and linear beyond the op table (cases_matmul.cc): naive loops on
// layouts the table lacks, the two GEMM libraries, and error messages.
#include <cstring>

#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/ops/linear.h"
#include "braid/ops/matmul.h"
#include "braid/tensor/cpu/autotune.h"
#include "braid/tensor/cpu/gemm.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::strided_copy;

// Naive [b?, m, k] x [b?, k, n] in double, batch broadcast; independent of BLAS.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const int64_t ba = a.ndim() == 3 ? a.size(0) : 1, bb = b.ndim() == 3 ? b.size(0) : 1;
  const int64_t batch = std::max(ba, bb), m = a.size(-2), k = a.size(-1), n = b.size(-1);
  auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> out(batch * m * n, 0.0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += av[(ba == 1 ? 0 : t) * m * k + i * k + p] * bv[(bb == 1 ? 0 : t) * k * n + p * n + j];
        out[t * m * n + i * n + j] = s;
      }
  Shape shape = (a.ndim() == 3 || b.ndim() == 3) ? Shape{batch, m, n} : Shape{m, n};
  return Tensor::from_vector(out, shape).to(a.dtype());
}

// [r, c] tensor whose values equal `t` but stored transposed (a .t() view).
Tensor transposed_view(const Tensor& t) {
  Tensor s = Tensor::empty({t.size(1), t.size(0)}, t.dtype());
  Tensor view = s.as_strided(t.shape(), {1, t.size(0)}, 0);
  view.copy_from(t);
  return view;
}

// What the op table (cases_matmul.cc) does not cover: a layer-sized product,
// empty dimensions, and transposed views BLAS reads without a copy.
TEST(Matmul, MatchesNaiveLoopsOnLargeEmptyAndTransposedOperands) {
  Generator gen(1);
  const std::vector<std::pair<Shape, Shape>> cases = {{{64, 784}, {784, 10}}, {{2, 0, 3}, {3, 4}}, {{4, 0}, {0, 5}}};
  for (const auto& [sa, sb] : cases) {
    Tensor a = random_tensor(sa, DType::f32, gen), b = random_tensor(sb, DType::f32, gen);
    EXPECT_TRUE(all_close(matmul(a, b), naive_matmul(a, b), 1e-4, 1e-5))
        << to_string(sa) << " x " << to_string(sb);
  }
  Tensor a = random_tensor({6, 5}, DType::f32, gen), b = random_tensor({5, 4}, DType::f32, gen);
  EXPECT_TRUE(all_close(matmul(transposed_view(a), transposed_view(b)), naive_matmul(a, b), 1e-4, 1e-5));
  // And their gradients: dA = G B^T, dB = A^T G through the same views.
  Tensor av = transposed_view(a).set_requires_grad(), bv = transposed_view(b).set_requires_grad();
  Tensor g = random_tensor({6, 4}, DType::f32, gen);
  backward(matmul(av, bv), g);
  const Tensor at = a.as_strided({5, 6}, {1, 5}, 0), bt = b.as_strided({4, 5}, {1, 4}, 0);  // A^T, B^T
  EXPECT_TRUE(all_close(av.grad(), naive_matmul(g, bt), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(bv.grad(), naive_matmul(at, g), 1e-4, 1e-5));
}

TEST(Matmul, BothGemmLibrariesAgree) {
  Generator gen(2);
  Tensor a = random_tensor({33, 70}, DType::f32, gen), b = random_tensor({70, 45}, DType::f32, gen);
  cpu::set_default_gemm_backend(cpu::GemmBackend::openblas);
  Tensor x = matmul(a, b);
  cpu::set_default_gemm_backend(cpu::GemmBackend::onednn);
  Tensor y = matmul(a, b);
  cpu::set_default_gemm_backend(cpu::GemmBackend::automatic);
  EXPECT_TRUE(all_close(x, y, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(x, naive_matmul(a, b), 1e-4, 1e-5));
  // The autotuner settles on one library after a few calls of a shape.
  for (int i = 0; i < 4 * cpu::kTuningTrials + 1; ++i) {  // <= 4 candidates x the trials
    EXPECT_TRUE(all_close(matmul(a, b), x, 1e-5, 1e-5));
  }
  EXPECT_NE(cpu::gemm_choice(false, false, 33, 45, 70), cpu::GemmBackend::automatic);
}

TEST(Matmul, DeterministicKernelsRunOpenBlasEveryCallUntimed) {
  Generator gen(3);
  Tensor a = random_tensor({37, 61}, DType::f32, gen), b = random_tensor({61, 29}, DType::f32, gen);
  cpu::set_default_gemm_backend(cpu::GemmBackend::openblas);
  const Tensor expected = matmul(a, b);
  cpu::set_default_gemm_backend(cpu::GemmBackend::automatic);
  cpu::set_deterministic_kernels(true);
  // A shape the tuner has not seen: while tuning it would rotate through oneDNN
  // and one thread; here every call is the first candidate, bit for bit.
  for (int i = 0; i < 4 * cpu::kTuningTrials + 1; ++i) {
    const Tensor got = matmul(a, b);
    ASSERT_EQ(std::memcmp(got.data<float>(), expected.data<float>(), expected.nbytes()), 0) << "call " << i;
  }
  EXPECT_EQ(cpu::gemm_choice(false, false, 37, 29, 61), cpu::GemmBackend::openblas);
  cpu::set_deterministic_kernels(false);
  EXPECT_EQ(cpu::gemm_choice(false, false, 37, 29, 61), cpu::GemmBackend::automatic);  // never timed
}

TEST(Matmul, BadInputRaisesValueErrorNamingOpAndShapes) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  try {
    matmul(a, b);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("matmul"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos);
  }
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}, DType::i32), Tensor::zeros({3, 2}, DType::i32)), ValueError);
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 2}, DType::f64)), ValueError);
  EXPECT_THROW(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 2})), ValueError);
  EXPECT_THROW(matmul(Tensor::zeros({3}), Tensor::zeros({3, 2})), ValueError);
  EXPECT_THROW(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 2})), ValueError);
  EXPECT_THROW(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}), Tensor::zeros({3})), ValueError);
}

}  // namespace
}  // namespace braid
