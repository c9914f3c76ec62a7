// The op table: one suite over the registry (op_table_test.cc). Every op in
// braid::op::all() needs at least one case here; each case is checked for
// values and gradients against PyTorch, finite-difference gradients in f64,
// strided inputs, meta-device inference, and every dtype its kernel declares
// (the others must be refused).
//
// A family's cases live in cases_<family>.cc and are listed in all_cases().
#pragma once

#include <string>
#include <vector>

#include "braid/ops/registry.h"
#include "gradcheck_util.h"
#include "torch_oracle.h"

namespace braid::testing {

struct OpCase {
  std::string op{};  // the registry name this case exercises
  // Inputs, the braid call (usually the eager function) and the PyTorch
  // expression; grad names the inputs to differentiate. An empty expr means
  // PyTorch has no such op: `why` says so, and the other checks still run.
  OpCheck check{};
  std::string why{};
  // The dtype sweep calls the op itself on check.inputs, in order, with these
  // attributes; sweep = false when the inputs are not the op's own (a
  // composite, or an op whose eager function builds its inputs).
  op::Attrs attrs{};
  bool sweep = true;
  bool gradcheck = true;  // false for ops whose gradient is not smooth at random points
  bool strided = true;    // false for ops that take contiguous tensors only (optimizer updates)
};

std::vector<OpCase> elementwise_cases();
std::vector<OpCase> tensor_cases();
std::vector<OpCase> update_cases();
std::vector<OpCase> reduce_cases();
std::vector<OpCase> shape_cases();
std::vector<OpCase> index_cases();
std::vector<OpCase> softmax_cases();
std::vector<OpCase> loss_cases();
std::vector<OpCase> dropout_cases();
std::vector<OpCase> activation_cases();
std::vector<OpCase> norm_cases();
std::vector<OpCase> matmul_cases();
std::vector<OpCase> linear_cases();
std::vector<OpCase> conv_cases();
std::vector<OpCase> pool_cases();
std::vector<OpCase> attention_cases();
std::vector<OpCase> transformer_cases();
std::vector<OpCase> grouped_gemm_cases();

inline std::vector<OpCase> all_cases() {
  std::vector<OpCase> all;
  for (auto family : {elementwise_cases, tensor_cases, update_cases, reduce_cases, shape_cases, index_cases,
                      softmax_cases, loss_cases, dropout_cases, activation_cases, norm_cases, matmul_cases,
                      linear_cases, conv_cases, pool_cases, transformer_cases, attention_cases,
                      grouped_gemm_cases}) {
    for (OpCase& c : family()) all.push_back(std::move(c));
  }
  return all;
}

}  // namespace braid::testing
