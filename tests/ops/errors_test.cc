// Bad input raises a typed braid::Error whose message names the op and the
// shapes involved; nothing aborts.
#include <gtest/gtest.h>

#include "braid/ops/ops.h"

namespace braid {
namespace {

// Runs fn, expecting exception type E with every one of `parts` in its message.
template <class E, class Fn>
void expect_error(Fn&& fn, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one mentioning " << *parts.begin();
  } catch (const E& e) {
    const std::string what = e.what();
    for (const char* p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

const Tensor a23 = Tensor::zeros({2, 3});
const Tensor a4 = Tensor::zeros({4});

TEST(Errors, ShapeMismatch) {
  expect_error<ValueError>([] { add(a23, a4); }, {"add", "[2, 3]", "[4]"});
  expect_error<ValueError>([] { mul(a23, Tensor::zeros({3, 2})); }, {"mul", "[2, 3]", "[3, 2]"});
  expect_error<ValueError>([] { where(gt(a4, 0.0), a23, a23); }, {"where", "[4]", "[2, 3]"});
  expect_error<ValueError>([] { concat({a23, Tensor::zeros({3, 3})}, 1); }, {"concat", "[2, 3]", "[3, 3]"});
  expect_error<ValueError>([] { reshape(a23, {4, 2}); }, {"reshape", "[2, 3]", "[4, 2]"});
  expect_error<ValueError>([] { expand(a23, {2, 4}); }, {"expand", "[2, 3]", "[2, 4]"});
  expect_error<ValueError>([] { mse_loss(a23, a4); }, {"mse_loss", "[2, 3]", "[4]"});
  expect_error<ValueError>([] { cross_entropy(a23, Tensor::zeros({3}, DType::i64)); }, {"cross_entropy", "[2, 3]", "[3]"});
  expect_error<ValueError>([] { layer_norm(a23, {2}); }, {"layer_norm", "[2]", "[2, 3]"});
  expect_error<ValueError>([] { batch_norm(a23, Tensor(), Tensor(), a4); }, {"batch_norm", "weight", "[4]", "[2, 3]"});
  expect_error<ValueError>([] { masked_fill(a4, gt(a23, 0.0), 1); }, {"masked_fill", "[2, 3]", "[4]"});
  expect_error<ValueError>([] { split(a23, std::vector<int64_t>{1, 1}, 1); }, {"split", "[2, 3]"});
}

TEST(Errors, DtypeMismatchAndUnsupported) {
  expect_error<ValueError>([] { add(a23, Tensor::zeros({2, 3}, DType::f64)); }, {"add", "f32", "f64", "[2, 3]"});
  expect_error<ValueError>([] { exp(Tensor::zeros({2}, DType::i64)); }, {"exp", "i64", "[2]"});
  expect_error<ValueError>([] { softmax(Tensor::zeros({2}, DType::i32), 0); }, {"softmax", "i32", "[2]"});
  expect_error<ValueError>([] { relu(Tensor::zeros({2}, DType::f16)); }, {"relu", "f16", "[2]"});
  expect_error<ValueError>([] { cross_entropy(a23, Tensor::zeros({2}, DType::i32)); }, {"cross_entropy", "i32", "[2]"});
  expect_error<ValueError>([] { embedding(a23, Tensor::zeros({2}, DType::f32)); }, {"embedding", "f32", "[2]"});
  expect_error<ValueError>([] { where(a4, a4, a4); }, {"where", "f32", "[4]"});
}

TEST(Errors, IndexOutOfRange) {
  expect_error<IndexError>([] { embedding(a23, Tensor::from_vector<int64_t>({0, 2}, {2})); },
                           {"embedding", "index 2", "[2, 3]"});
  expect_error<IndexError>([] { gather(a23, 1, Tensor::from_vector<int64_t>({0, 3}, {2, 1})); },
                           {"gather", "index 3", "[2, 3]"});
  expect_error<IndexError>([] { index_select(a23, 0, Tensor::from_vector<int64_t>({-1}, {1})); },
                           {"index_select", "index -1", "[2, 3]"});
  expect_error<IndexError>([] { cross_entropy(a23, Tensor::from_vector<int64_t>({1, 3}, {2})); },
                           {"cross_entropy", "target 3", "[2, 3]"});
  expect_error<IndexError>([] { nll_loss(a23, Tensor::from_vector<int64_t>({-2, 0}, {2})); },
                           {"nll_loss", "target -2", "[2, 3]"});
}

TEST(Errors, BadDim) {
  expect_error<IndexError>([] { sum(a23, {2}); }, {"sum", "dimension 2", "2 dimensions"});
  expect_error<IndexError>([] { softmax(a23, -3); }, {"softmax", "dimension -3"});
  expect_error<IndexError>([] { transpose(a23, 0, 5); }, {"transpose", "dimension 5"});
  expect_error<IndexError>([] { max(a23, 2); }, {"max", "dimension 2"});
  expect_error<IndexError>([] { unsqueeze(a23, 4); }, {"unsqueeze", "dimension 4"});
  expect_error<IndexError>([] { concat({a23, a23}, 2); }, {"concat", "dimension 2"});
  expect_error<ValueError>([] { permute(a23, {0, 0}); }, {"permute", "[2, 3]"});
  expect_error<ValueError>([] { sum(a23, {1, -1}); }, {"sum", "repeated", "[2, 3]"});
}

}  // namespace
}  // namespace braid
