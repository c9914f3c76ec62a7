// Capture of the reduce, shape, index, softmax, loss and dropout ops: views
// (and the copy a non-viewable reshape makes), multi-output ops (max,
// cross_entropy's saved log-probs, dropout's mask) and their backward ops,
// executed again, give the eager numbers; a replayed dropout draws the next
// mask from its generator, as the next eager step would.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/graph/capture.h"
#include "braid/graph/executor.h"
#include "braid/graph/serialize.h"
#include "braid/ops/ops.h"

namespace braid::graph {
namespace {

struct Inputs {
  Tensor w, idx, targets;
};

// A small loss over the families' ops; its gradient reaches w through all of them.
Tensor loss_of(const Inputs& in, Generator& gen) {
  const Tensor e = dropout(embedding(in.w, in.idx), {.p = 0.25, .generator = &gen});  // [4, 3, 6]
  const Tensor s = sum(e, {1});                                                        // [4, 6]
  const Tensor t = transpose(s, 0, 1);                                                 // [6, 4], a view
  const Tensor c = concat({t, slice(t, 0, 1, 5, 2), unsqueeze(mean(t, {0}), 0)}, 0);   // [9, 4]
  const Tensor logits = reshape(transpose(c, 0, 1), {4, 9});                           // a copy, then a view
  const Tensor picked = gather(logits, 1, reshape(in.targets, {4, 1}));
  return cross_entropy(logits, in.targets) + mean(max(logits, 1).values) +
         nll_loss(log_softmax(logits, 1), in.targets) + bce_with_logits(logits, softmax(logits, 0)) +
         sum(index_select(picked, 0, Tensor::from_vector<int64_t>({3, 0, 0, 2}, {4}))) * 0.1;
}

TEST(CaptureOps, ReplaysGiveTheEagerNumbersAndDropoutDrawsAgain) {
  Generator init(3);
  Inputs in{Tensor::empty({10, 6}), Tensor::from_vector<int64_t>({1, 4, 4, 9, 0, 2, 7, 7, 7, 3, 5, 1}, {4, 3}),
            Tensor::from_vector<int64_t>({3, 0, 8, 2}, {4})};
  for (int64_t i = 0; i < in.w.numel(); ++i) in.w.data<float>()[i] = init.uniform() * 2 - 1;
  in.w.set_requires_grad();

  Generator gen(11, 2);
  const Generator::State start = gen.state();
  Capture cap;
  cap.input("w", in.w);
  cap.input("idx", in.idx);
  cap.input("targets", in.targets);
  Tensor loss;
  cap.record([&] {
    loss = loss_of(in, gen);
    autograd::backward(loss);
  });
  cap.output("loss", loss);
  cap.output("grad.w", in.w.grad());
  const Graph g = cap.finish();
  const Tensor eager_grad = in.w.grad().clone();

  // The next eager step's numbers, from the generator's next words.
  const Generator::State next = gen.state();
  in.w.set_grad(Tensor());
  const Tensor eager_next = loss_of(in, gen);
  autograd::backward(eager_next);
  const Tensor eager_next_grad = in.w.grad().clone();

  const Graph reread = from_json(nlohmann::json::parse(to_json(g).dump()));
  EXPECT_EQ(reread.to_text(), g.to_text());
  for (const Graph* graph : {&g, &reread}) {
    gen.set_state(start);
    Executor exec(*graph);
    const Tensor w = in.w.detach();
    std::vector<Tensor> out = exec.run({w, in.idx, in.targets});
    EXPECT_EQ(out[0].item(), loss.item());
    EXPECT_EQ(out[1].to_vector<float>(), eager_grad.to_vector<float>());
    EXPECT_EQ(gen.state().offset, next.offset);
    out = exec.run({w, in.idx, in.targets});
    EXPECT_EQ(out[0].item(), eager_next.item());
    EXPECT_EQ(out[1].to_vector<float>(), eager_next_grad.to_vector<float>());
  }
}

}  // namespace
}  // namespace braid::graph
