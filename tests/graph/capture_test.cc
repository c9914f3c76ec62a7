// Capture and execution: a captured forward + backward pass, executed again on
// the same inputs, gives exactly the eager numbers; capture on the meta device
// gives the same graph without computing; what cannot be captured is refused.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/graph/capture.h"
#include "braid/graph/executor.h"
#include "braid/graph/serialize.h"
#include "braid/nn/activation.h"
#include "braid/nn/linear.h"
#include "braid/nn/sequential.h"
#include "braid/ops/ops.h"
#include "braid/ops/tensor_ops.h"

namespace braid::graph {
namespace {

std::shared_ptr<nn::Sequential> small_mlp(Generator& gen) {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(12, 16, gen), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 5, gen)});
}

struct Step {
  Graph graph;
  Tensor loss;
  std::vector<Tensor> grads;
};

// Captures loss = cross_entropy(model(x), y) and its backward pass.
Step capture_loss_and_grads(nn::Module& model, const Tensor& x, const Tensor& y) {
  Capture cap;
  cap.input("x", x);
  cap.input("y", y);
  for (const auto& [name, p] : model.named_parameters()) {
    p.set_grad(Tensor());
    cap.input(name, p);
  }
  Step s;
  cap.record([&] {
    s.loss = cross_entropy(model(x), y);
    backward(s.loss);
  });
  cap.output("loss", s.loss);
  for (const auto& [name, p] : model.named_parameters()) {
    s.grads.push_back(p.grad());
    cap.output("grad." + name, p.grad());
  }
  s.graph = cap.finish();
  return s;
}

TEST(Capture, ExecutingAForwardAndBackwardPassGivesTheEagerNumbers) {
  Generator gen(5);
  auto model = small_mlp(gen);
  const Tensor x = Tensor::from_vector<float>(std::vector<float>(8 * 12, 0.25f), {8, 12});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 37 % 23) - 11) / 7.0f;
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2}, {8});
  // Let the kernels' autotuner settle first (it alternates implementations
  // while it measures, and this test compares to the bit).
  for (int i = 0; i < 24; ++i) {
    model->named_parameters()[0].second.set_grad(Tensor());
    backward(cross_entropy((*model)(x), y));
  }
  Step s = capture_loss_and_grads(*model, x, y);
  EXPECT_GT(s.graph.nodes().size(), 8u);

  std::vector<Tensor> bound;
  for (int id : s.graph.inputs()) {
    const std::string& name = s.graph.value(id).name;
    if (name == "x") bound.push_back(x);
    else if (name == "y") bound.push_back(y);
    else for (const auto& [n, p] : model->named_parameters()) if (n == name) bound.push_back(p);
  }
  // The graph as captured, and the graph written to JSON and read back.
  const Graph reread = from_json(nlohmann::json::parse(to_json(s.graph).dump()));
  EXPECT_EQ(reread.to_text(), s.graph.to_text());
  for (const Graph* g : std::vector<const Graph*>{&s.graph, &reread}) {
    Executor exec(*g);
    const std::vector<Tensor> out = exec.run(bound);
    ASSERT_EQ(out.size(), 1 + s.grads.size());
    EXPECT_EQ(out[0].item(), s.loss.item());
    for (size_t i = 0; i < s.grads.size(); ++i) EXPECT_EQ(out[1 + i].to_vector<float>(), s.grads[i].to_vector<float>());
  }
}

TEST(Capture, OnTheMetaDeviceTheGraphIsTheSameWithoutComputing) {
  Generator gen(5);
  auto model = small_mlp(gen);
  const Tensor x = Tensor::zeros({8, 12});
  const Tensor y = Tensor::zeros({8}, DType::i64);
  const std::string real = capture_loss_and_grads(*model, x, y).graph.to_text();

  auto meta_model = small_mlp(gen);
  for (const auto& [name, p] : meta_model->named_parameters()) {
    p.set_data(Tensor::empty(p.shape(), p.dtype(), Device::meta));
  }
  Step s = capture_loss_and_grads(*meta_model, Tensor::empty({8, 12}, DType::f32, Device::meta),
                                  Tensor::empty({8}, DType::i64, Device::meta));
  EXPECT_TRUE(s.loss.is_meta());
  // Constants (the backward seed, scalars) are real tensors either way; the
  // text form shows shapes only, so both graphs print the same.
  EXPECT_EQ(s.graph.to_text(), real);
}

TEST(Capture, AnUndeclaredParameterIsRefusedByName) {
  Tensor w = Tensor::ones({3, 3});
  w.set_requires_grad();
  Capture cap;
  EXPECT_THROW(cap.record([&] { (void)mul(w, 2.0); }), ValueError);
}

TEST(Capture, AViewReadAfterAnInPlaceWriteIsRefused) {
  Tensor a = Tensor::ones({2, 3});
  Capture cap;
  cap.input("a", a);
  cap.record([&] {
    const Tensor t = transpose(a, 0, 1);
    accumulate_(a, Tensor::ones({2, 3}));
    EXPECT_THROW((void)add(t, 1.0), ValueError);
  });
}

TEST(Capture, InPlaceWritesToInputsBecomeUpdates) {
  Tensor a = Tensor::zeros({4});
  const Tensor b = Tensor::ones({4});
  Capture cap;
  cap.input("a", a);
  cap.input("b", b);
  cap.record([&] { accumulate_(a, b); });
  Graph g = cap.finish();
  ASSERT_EQ(g.updates().size(), 1u);
  Executor exec(g);
  exec.run({a, b});
  exec.run({a, b});
  // Once while recording, twice more here.
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 3, 3, 3}));
}

TEST(Graph, ValidateNamesTheBrokenNode) {
  Graph g;
  const int a = g.add_input("a", {{2}, DType::f32});
  g.add_node(op::find("neg"), {}, {a});
  g.mutable_nodes()[0].inputs[0] = 99;
  EXPECT_THROW(g.validate(), ValueError);
}

}  // namespace
}  // namespace braid::graph
