// The launch shapes of the device reductions (braid/cuda/reduce_loop.h) that
// the op table's small cases do not reach: two-stage sums and maxes of long
// tensors, a block per column for few long columns, a thread per column for
// many, long softmax columns, long loss means; NaN and tie rules of max at
// scale; and the CPU's error messages. Each against the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "braid/base/rng.h"
#include "braid/ops/ops.h"
#include "braid/tensor/backend.h"
#include "device_test.h"
#include "torch_oracle.h"

namespace braid::testing {
namespace {

// f(x on the device) against f(x on the CPU), in f64; the CPU computes a
// 16-bit x in f32.
template <class F>
::testing::AssertionResult same_on_device(const Tensor& x, F f, double rtol = 1e-4, double atol = 1e-5) {
  const bool half = x.dtype() == DType::bf16 || x.dtype() == DType::f16;
  const Tensor host = f(half ? x.to(DType::f32) : x), device = f(x.to(kGpu)).to(Device::cpu);
  if (!half && device.dtype() != host.dtype()) return ::testing::AssertionFailure() << "dtypes differ";
  if (!is_floating(host.dtype())) return all_close(device, host, 0, 0);
  return all_close(device.to(DType::f64), host.to(DType::f64), rtol, atol);
}

TEST(DeviceReduce, SumsOfEveryLaunchShapeMatchTheCpu) {
  BRAID_REQUIRE_GPU();
  Generator gen(3);
  const Tensor long_x = random_tensor({(1 << 16) + 7}, DType::f32, gen);  // two stages
  EXPECT_TRUE(same_on_device(long_x, [](const Tensor& t) { return sum(t); }, 1e-4, 1e-3));
  EXPECT_TRUE(same_on_device(long_x.to(DType::f64), [](const Tensor& t) { return mean(t); }, 1e-10, 1e-12));
  const Tensor columns = random_tensor({3000, 5}, DType::f32, gen);  // a block per column
  EXPECT_TRUE(same_on_device(columns, [](const Tensor& t) { return sum(t, {0}); }, 1e-4, 1e-4));
  const Tensor wide = random_tensor({40, 2000}, DType::f32, gen);  // a thread per column
  EXPECT_TRUE(same_on_device(wide, [](const Tensor& t) { return mean(t, {0}, true); }));
  EXPECT_TRUE(same_on_device(strided_copy(random_tensor({6, 70, 90}, DType::f32, gen)),
                             [](const Tensor& t) { return sum(t, {0, 2}); }, 1e-4, 1e-4));
  for (DType d : {DType::i32, DType::i64}) {
    EXPECT_TRUE(same_on_device(random_tensor({(1 << 16) + 3}, d, gen, -100, 100), [](const Tensor& t) { return sum(t); }));
    EXPECT_TRUE(same_on_device(random_tensor({50, 9}, d, gen, -100, 100), [](const Tensor& t) { return sum(t, {1}); }));
  }
  // An empty mean is NaN on both.
  EXPECT_TRUE(same_on_device(Tensor::zeros({0, 3}), [](const Tensor& t) { return mean(t, {0}); }));
}

TEST(DeviceReduce, MaxKeepsTheFirstMaximumAndTheFirstNaNAtScale) {
  BRAID_REQUIRE_GPU();
  Generator gen(5);
  const auto values = [](int64_t dim) { return [dim](const Tensor& t) { return max(t, dim).values; }; };
  const auto indices = [](int64_t dim) { return [dim](const Tensor& t) { return max(t, dim).indices; }; };
  // Ties: values from a small set, so every long row has many maxima.
  const Tensor ties = random_tensor({6, 5000}, DType::i32, gen, 0, 4).to(DType::f32);
  EXPECT_TRUE(same_on_device(ties, values(1), 0, 0));
  EXPECT_TRUE(same_on_device(ties, indices(1)));
  EXPECT_TRUE(same_on_device(reshape(ties, {-1}), indices(0)));  // two stages
  EXPECT_TRUE(same_on_device(ties, indices(0)));
  EXPECT_TRUE(same_on_device(ties.to(DType::i64), [](const Tensor& t) { return argmax(t, 1); }));
  Tensor nan = random_tensor({(1 << 16) + 9}, DType::f32, gen);
  std::vector<float> v = nan.to_vector<float>();
  v[40000] = v[50000] = std::numeric_limits<float>::quiet_NaN();
  nan = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  EXPECT_EQ(argmax(nan.to(kGpu), 0).item(), 40000);
  EXPECT_TRUE(std::isnan(max(nan.to(kGpu)).item()));
}

TEST(DeviceReduce, SoftmaxAndLossesOverLongRowsAndColumnsMatchTheCpu) {
  BRAID_REQUIRE_GPU();
  Generator gen(7);
  const Tensor tall = random_tensor({3000, 3}, DType::f32, gen, -5, 5);  // few long columns: a block each
  const Tensor wide = random_tensor({4, 5000}, DType::f32, gen, -5, 5);  // long rows: a block each
  for (bool log : {false, true}) {
    const auto f = [log](int64_t dim) {
      return [log, dim](const Tensor& t) { return log ? log_softmax(t, dim) : softmax(t, dim); };
    };
    EXPECT_TRUE(same_on_device(tall, f(0), 1e-4, 1e-6));
    EXPECT_TRUE(same_on_device(wide, f(1), 1e-4, 1e-6));
    EXPECT_TRUE(same_on_device(wide.to(DType::bf16), f(-1), 2e-2, 1e-4));
  }
  const Tensor logits = random_tensor({5000, 7}, DType::f32, gen, -4, 4);  // the mean over rows in two stages
  const Tensor targets = random_index({5000}, 7, gen);
  EXPECT_TRUE(same_on_device(logits, [&](const Tensor& t) { return cross_entropy(t, targets.to(t.device())); }));
  const Tensor y = random_tensor({5000, 7}, DType::f32, gen, 0, 1);
  EXPECT_TRUE(same_on_device(logits, [&](const Tensor& t) { return bce_with_logits(t, y.to(t.device())); }));
}

// The device kernels refuse what the CPU kernels refuse, with their messages.
TEST(DeviceReduce, ErrorsReadAsOnTheCpu) {
  BRAID_REQUIRE_GPU();
  const auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const Tensor logits = Tensor::zeros({2, 3});
  const Tensor bad = Tensor::from_vector<int64_t>({0, 3}, {2});
  const std::string cpu = message([&] { cross_entropy(logits, bad); });
  EXPECT_NE(cpu.find("out of range"), std::string::npos) << cpu;
  // The device checks targets on the device and raises at the next sync
  // (braid/cuda/deferred_checks.h): here the loss's read.
  EXPECT_EQ(message([&] { cross_entropy(logits.to(kGpu), bad.to(kGpu)).item(); }), cpu);
  const Tensor empty = Tensor::zeros({0, 3});
  EXPECT_EQ(message([&] { max(empty.to(kGpu), 0); }), message([&] { max(empty, 0); }));
}

// A bad target costs no wait where it is found: the call returns, later
// device work queues behind it, and the next sync raises the CPU's error once,
// for the first bad target since the previous sync.
TEST(DeviceReduce, BadTargetsRaiseAtTheNextSync) {
  BRAID_REQUIRE_GPU();
  const Tensor logits = Tensor::zeros({3, 4}).to(kGpu);
  const Tensor good = Tensor::from_vector<int64_t>({0, 3, 1}, {3}).to(kGpu);
  const Tensor bad = Tensor::from_vector<int64_t>({0, 1, 4}, {3}).to(kGpu);
  Tensor loss;
  ASSERT_NO_THROW(loss = cross_entropy(logits, bad));
  const Tensor other = cross_entropy(logits, good);  // queued behind the failed check
  try {
    (void)other.item();
    ADD_FAILURE() << "no error at the sync";
  } catch (const IndexError& e) {
    EXPECT_STREQ(e.what(), "cross_entropy: target 4 at position 2 out of range for 4 classes (input [3, 4])");
  }
  EXPECT_NEAR(cross_entropy(logits, good).item(), std::log(4.0), 1e-6);  // raised once, then cleared
  const Tensor logp = log_softmax(logits, 1);
  (void)nll_loss(logp, Tensor::from_vector<int64_t>({-1, 0, 0}, {3}).to(kGpu));
  EXPECT_THROW(backend(kGpu).synchronize(0), IndexError);
}

}  // namespace
}  // namespace braid::testing
