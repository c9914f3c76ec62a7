#include "braid/parallel/tensor_parallel/rewrite.h"

#include "braid/nn/activation.h"
#include "braid/nn/attention.h"
#include "braid/nn/linear.h"
#include "braid/parallel/tensor_parallel/collectives.h"
#include "braid/parallel/tensor_parallel/cross_entropy.h"
#include "braid/parallel/tensor_parallel/layers.h"

namespace braid::parallel::tensor_parallel {

namespace {

bool elementwise(const nn::Module& m) {
  return dynamic_cast<const nn::ReLU*>(&m) || dynamic_cast<const nn::GELU*>(&m) ||
         dynamic_cast<const nn::Tanh*>(&m);
}

const nn::Linear* as_linear(const nn::Sequential& m, size_t i) { return dynamic_cast<const nn::Linear*>(&m[i]); }

// The next Linear after layer i with only elementwise layers between, or -1.
int partner(const nn::Sequential& m, size_t i) {
  for (size_t j = i + 1; j < m.size(); ++j) {
    if (as_linear(m, j)) return static_cast<int>(j);
    if (!elementwise(m[j])) return -1;
  }
  return -1;
}

}  // namespace

std::vector<LayerRole> tensor_parallel_roles(const nn::Sequential& model) {
  std::vector<LayerRole> roles(model.size(), LayerRole::replicated);
  int last_linear = -1;
  for (size_t i = 0; i < model.size(); ++i) {
    if (as_linear(model, i)) last_linear = static_cast<int>(i);
  }
  for (size_t i = 0; i < model.size(); ++i) {
    if (dynamic_cast<const nn::TiedHead*>(&model[i]) && i + 1 == model.size()) {
      roles[i] = LayerRole::head;  // split over the vocabulary with the table it reads
    } else if (dynamic_cast<const nn::TokenPositionEmbedding*>(&model[i])) {
      roles[i] = LayerRole::embedding;
    } else if (dynamic_cast<const nn::TransformerBlock*>(&model[i])) {
      roles[i] = LayerRole::block;
    } else if (as_linear(model, i)) {
      const int j = static_cast<int>(i) == last_linear ? -1 : partner(model, i);
      if (j >= 0) {
        roles[i] = LayerRole::column;
        for (size_t k = i + 1; k < static_cast<size_t>(j); ++k) roles[k] = LayerRole::inner;
        roles[static_cast<size_t>(j)] = LayerRole::row;
        i = static_cast<size_t>(j);
      } else if (static_cast<int>(i) == last_linear && i + 1 == model.size()) {
        roles[i] = LayerRole::head;
      }
    }
  }
  return roles;
}

namespace {

// Sequence parallelism covers a language model from its embedding to its head.
void check_sequence_parallel(const nn::Sequential& model, const std::vector<LayerRole>& roles) {
  if (roles.empty() || roles.front() != LayerRole::embedding || roles.back() != LayerRole::head) {
    fail<ConfigError>("parallel.sequence_parallel splits the sequences of a language model (a token embedding first, "
                      "a head last: model.name = gpt); this model's first layer is {} and its last {}",
                      roles.empty() ? "none" : model.name_of(0),
                      roles.empty() ? "none" : model.name_of(model.size() - 1));
  }
  for (size_t i = 0; i < model.size(); ++i) {
    const bool ok = roles[i] == LayerRole::embedding || roles[i] == LayerRole::block || roles[i] == LayerRole::head ||
                    (roles[i] == LayerRole::replicated &&
                     (model[i].num_parameters() == 0 || SequenceParallelNorm::wraps(model[i])));
    if (!ok) {
      fail<ConfigError>("parallel.sequence_parallel: layer {} is neither a transformer block, a norm nor free of "
                        "parameters, so it cannot run on sequence segments (set parallel.sequence_parallel = false)",
                        model.name_of(i));
    }
  }
}

}  // namespace

Sharded shard_tensor_parallel(nn::Sequential& model, const comm::Communicator& tp, nn::LossFn loss, TpOptions o) {
  Sharded out{.loss = loss, .full_output = [](const Tensor& y) { return y; }, .specs = {}, .replicated = {}};
  const std::vector<LayerRole> roles = tensor_parallel_roles(model);
  if (o.sequence_parallel) check_sequence_parallel(model, roles);
  if (o.overlap && !o.overlap_options.thread) o.overlap_options.thread = std::make_shared<CommThread>();
  std::shared_ptr<ParallelTokenPositionEmbedding> table;  // the sharded embedding a tied head reads
  const nn::Embedding* table_source = nullptr;             // its table before sharding
  for (size_t i = 0; i < model.size(); ++i) {
    const std::string prefix = model.name_of(i) + ".";
    switch (roles[i]) {
      case LayerRole::embedding: {
        auto p = std::make_shared<ParallelTokenPositionEmbedding>(
            dynamic_cast<const nn::TokenPositionEmbedding&>(model[i]), tp, o);
        p->add_specs(prefix, out.specs);
        table_source = dynamic_cast<const nn::TokenPositionEmbedding&>(model[i]).tok().get();
        model.replace(i, p);
        table = p;
        break;
      }
      case LayerRole::block: {
        auto p = std::make_shared<ParallelTransformerBlock>(dynamic_cast<const nn::TransformerBlock&>(model[i]), tp, o);
        p->add_specs(prefix, out.specs);
        model.replace(i, p);
        break;
      }
      case LayerRole::column: {
        auto col = std::make_shared<ColumnParallelLinear>(*as_linear(model, i), tp, /*gather_output=*/false, 1, o);
        col->add_specs(prefix, out.specs);
        model.replace(i, col);
        break;
      }
      case LayerRole::row: {
        auto row = std::make_shared<RowParallelLinear>(*as_linear(model, i), tp, o);
        row->add_specs(prefix, out.specs);
        model.replace(i, row);
        break;
      }
      case LayerRole::head: {
        if (const auto* tied = dynamic_cast<const nn::TiedHead*>(&model[i])) {
          if (!table || tied->tied().get() != table_source) {
            fail<ConfigError>("tensor parallel: the tied head at layer {} reads a table that is not this model's "
                              "embedding", model.name_of(i));
          }
          auto head = std::make_shared<ParallelTiedHead>(table, tp, o);
          const int64_t begin = table->begin(), classes = table->vocab();
          const std::vector<int64_t> widths = head->widths();
          out.loss = [tp, begin, classes](const Tensor& logits, const Tensor& targets) {
            return vocab_parallel_cross_entropy(logits, targets, begin, classes, tp);
          };
          out.full_output = [tp, widths](const Tensor& y) { return gather_last_dim(y, tp, widths); };
          model.replace(i, head);
          break;
        }
        // The head: split over the classes; the loss works on the slices.
        const nn::Linear& l = *as_linear(model, i);
        auto head = std::make_shared<ColumnParallelLinear>(l, tp, /*gather_output=*/false, 1, o);
        head->add_specs(prefix, out.specs);
        const int64_t begin = head->offset(), classes = l.weight().size(0);
        const std::vector<int64_t> widths = head->widths();
        out.loss = [tp, begin, classes](const Tensor& logits, const Tensor& targets) {
          return vocab_parallel_cross_entropy(logits, targets, begin, classes, tp);
        };
        out.full_output = [tp, widths](const Tensor& y) { return gather_last_dim(y, tp, widths); };
        model.replace(i, head);
        break;
      }
      case LayerRole::inner:
        break;
      case LayerRole::replicated:
        if (model[i].num_parameters() > 0) out.replicated.push_back(model.name_of(i));
        if (o.sequence_parallel && SequenceParallelNorm::wraps(model[i])) {  // the final norm, on segments
          model.replace(i, std::make_shared<SequenceParallelNorm>(model.layer(i), tp));
        }
        break;
    }
  }
  return out;
}

}  // namespace braid::parallel::tensor_parallel
