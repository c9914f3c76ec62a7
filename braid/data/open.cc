#include "braid/data/open.h"

#include <cmath>

#include "braid/data/csv.h"
#include "braid/data/fashion_mnist.h"
#include "braid/data/libsvm.h"
#include "braid/data/text.h"

namespace braid::data {

Subset::Subset(std::shared_ptr<const Dataset> base, int64_t begin, int64_t end)
    : base_(std::move(base)), begin_(begin), end_(end) {
  if (begin < 0 || begin > end || end > base_->size()) {
    fail<IndexError>("Subset [{}, {}) of a dataset of {} examples", begin, end, base_->size());
  }
}

std::shared_ptr<const Dataset> open_dataset(const OpenOptions& o) {
  if (o.name == "fashion_mnist") {
    return std::make_shared<FashionMnist>(FashionMnistOptions{.dir = o.path, .train = o.train, .normalize = o.normalize});
  }
  std::shared_ptr<const Dataset> whole;
  if (o.name == "csv") {
    whole = std::make_shared<CsvDataset>(o.path);
  } else if (o.name == "libsvm") {
    whole = std::make_shared<LibsvmDataset>(o.path, LibsvmOptions{.class_targets = true});
  } else if (o.name == "synthetic") {
    whole = std::make_shared<SyntheticImages>(o.synthetic);
  } else if (o.name == "text") {
    whole = std::make_shared<CharTextDataset>(o.path, TextOptions{.context = o.context, .stride = o.stride > 0 ? o.stride : o.context});
  } else {
    fail<ValueError>("unknown dataset '{}' (fashion_mnist, csv, libsvm, text, synthetic)", o.name);
  }
  const int64_t n = whole->size();
  const auto cut = static_cast<int64_t>(std::llround(kTrainFraction * static_cast<double>(n)));
  return o.train ? std::make_shared<Subset>(whole, 0, cut) : std::make_shared<Subset>(whole, cut, n);
}

}  // namespace braid::data
