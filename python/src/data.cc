// braid.data: datasets (braid/data, token shards of braid/text), the batch
// loader as a Python iterable, and safetensors files (braid.save/braid.load,
// the format of braid's checkpoints).
#include <map>

#include "bindings.h"
#include "braid/base/safetensors.h"
#include "braid/data/csv.h"
#include "braid/data/fashion_mnist.h"
#include "braid/data/libsvm.h"
#include "braid/data/loader.h"
#include "braid/data/open.h"
#include "braid/data/text.h"
#include "braid/text/token_dataset.h"
#include <nanobind/stl/map.h>

// TokenDataset holds its shards by unique_ptr in a vector, which
// std::is_copy_constructible reports as copyable; nanobind must not try.
template <>
struct nanobind::detail::is_copy_constructible<braid::text::TokenDataset> : std::false_type {};

namespace braid::python {

namespace {

using data::Dataset;

// Safetensors dtype names (base/safetensors.h).
const char* st_name(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::b8: return "BOOL";
  }
  return "F32";
}

DType from_st_name(const std::string& n, const std::string& key) {
  for (DType d : kAllDTypes)
    if (n == st_name(d)) return d;
  fail<ValueError>("load: tensor '{}' has safetensors dtype {}, which braid has no dtype for", key, n);
}

void save(nb::dict tensors, const std::string& path, std::optional<std::map<std::string, std::string>> metadata) {
  std::map<std::string, Tensor> hosts;  // contiguous host copies, alive while writing
  for (auto [k, v] : tensors) {
    const std::string key = nb::cast<std::string>(k);
    const Tensor t = nb::cast<Tensor>(v);
    hosts[key] = t.to(Device::cpu).contiguous();
  }
  nb::gil_scoped_release release;
  std::map<std::string, safetensors::TensorRef> refs;
  for (const auto& [k, t] : hosts) {
    refs[k] = {.dtype = st_name(t.dtype()), .shape = t.shape(),
               .data = {static_cast<const std::byte*>(t.numel() > 0 ? t.raw_data() : nullptr), t.nbytes()}};
  }
  safetensors::write(path, refs, metadata.value_or(safetensors::Metadata{}));
}

nb::dict load(const std::string& path) {
  safetensors::File f;
  {
    nb::gil_scoped_release release;
    f = safetensors::read(path);
  }
  nb::dict out;
  for (auto& [k, d] : f.tensors) {
    Tensor t = Tensor::empty(d.shape, from_st_name(d.dtype, k));
    if (!d.data.empty()) std::memcpy(t.raw_data(), d.data.data(), d.data.size());
    out[k.c_str()] = t;
  }
  return out;
}

nb::dict spec_dict(const Dataset& d) {
  const data::ExampleSpec s = d.spec();
  nb::dict out;
  out["input_shape"] = to_tuple(s.input_shape);
  out["input_dtype"] = s.input_dtype;
  out["target_shape"] = to_tuple(s.target_shape);
  out["target_dtype"] = s.target_dtype;
  return out;
}

// A loader with its epoch, as a Python iterable: each iteration runs the
// next epoch (or set_epoch's).
class PyLoader {
 public:
  PyLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last,
           int workers, int rank, int world, double timeout_s)
      : dataset_(dataset) {
    const int64_t n = dataset->size();
    std::shared_ptr<const data::Sampler> sampler;
    if (world > 1) {
      sampler = std::make_shared<data::DistributedSampler>(
          n, data::DistributedSamplerOptions{.rank = rank, .world = world, .seed = seed, .shuffle = shuffle});
    } else if (shuffle) {
      sampler = std::make_shared<data::ShuffledSampler>(n, seed);
    } else {
      sampler = std::make_shared<data::SequentialSampler>(n);
    }
    loader_ = std::make_unique<data::Loader>(
        dataset, sampler,
        data::LoaderOptions{.batch_size = batch_size, .drop_last = drop_last, .workers = workers, .seed = seed,
                            .timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(timeout_s))});
  }
  void set_epoch(int64_t e) { next_epoch_ = e; }
  PyLoader& iter() {
    loader_->start_epoch(next_epoch_++);
    return *this;
  }
  nb::tuple next() {
    std::optional<data::Batch> b;
    {
      nb::gil_scoped_release release;
      b = loader_->next();
    }
    if (!b) throw nb::stop_iteration();
    return nb::make_tuple(b->input, b->target);
  }
  int64_t len() const { return loader_->batches_per_epoch(); }
  data::Loader& loader() { return *loader_; }
  std::shared_ptr<const Dataset> dataset() const { return dataset_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::unique_ptr<data::Loader> loader_;
  int64_t next_epoch_ = 0;
};

}  // namespace

data::Loader& loader_of(nb::handle h) { return nb::cast<PyLoader&>(h).loader(); }

void bind_data(nb::module_& m) {
  nb::module_ d = m.def_submodule("data", "Datasets, token shards and the batch loader (braid/data, braid/text).");
  nb::class_<Dataset>(d, "Dataset", "A fixed-size, random-access collection of (input, target) examples.")
      .def("__len__", &Dataset::size)
      .def_prop_ro("spec", &spec_dict, "Shapes and dtypes of one example's input and target.")
      .def("__getitem__", [](const Dataset& ds, int64_t i) {
        if (i < 0) i += ds.size();
        data::Example e = ds.get(i);
        return nb::make_tuple(e.input, e.target);
      }, "index"_a);

  nb::class_<data::FashionMnist, Dataset>(d, "FashionMnist", "Fashion-MNIST's idx files: [1, 28, 28] f32, 10 classes.")
      .def("__init__", [](data::FashionMnist* f, const std::string& dir, bool train, bool normalize) {
        new (f) data::FashionMnist({.dir = dir, .train = train, .normalize = normalize});
      }, "dir"_a = std::string(data::kFashionMnistDir), "train"_a = true, "normalize"_a = true, release_gil());
  nb::class_<data::CsvDataset, Dataset>(d, "CsvDataset", "Rows of numbers; the label column is the target.")
      .def("__init__", [](data::CsvDataset* c, const std::string& path, int64_t label_column, bool regression,
                          char delimiter) {
        new (c) data::CsvDataset(path, {.label_column = label_column, .regression = regression, .delimiter = delimiter});
      }, "path"_a, "label_column"_a = -1, "regression"_a = false, "delimiter"_a = ',', release_gil());
  nb::class_<data::LibsvmDataset, Dataset>(d, "LibsvmDataset", "Sparse rows 'label index:value ...', read dense.")
      .def("__init__", [](data::LibsvmDataset* l, const std::string& path, int64_t features, bool class_targets) {
        new (l) data::LibsvmDataset(path, {.features = features, .class_targets = class_targets});
      }, "path"_a, "features"_a = 0, "class_targets"_a = false, release_gil())
      .def_prop_ro("features", &data::LibsvmDataset::features);
  nb::class_<data::CharTextDataset, Dataset>(d, "CharTextDataset",
                                             "Windows of a text file's bytes: input [context] and next-byte targets.")
      .def("__init__", [](data::CharTextDataset* t, const std::string& path, int64_t context, int64_t stride) {
        new (t) data::CharTextDataset(path, {.context = context, .stride = stride > 0 ? stride : context});
      }, "path"_a, "context"_a = 64, "stride"_a = 0, release_gil())
      .def_prop_ro("vocab_size", &data::CharTextDataset::vocab_size);
  nb::class_<text::TokenDataset, Dataset>(d, "TokenDataset",
                                          "Windows of token shards (braid tokenize encode), by glob: input [context] "
                                          "int64 ids and next-token targets.")
      .def("__init__", [](text::TokenDataset* t, const std::string& pattern, uint64_t context, uint64_t stride,
                          uint32_t limit) {
        new (t) text::TokenDataset(pattern, {.context = context, .stride = stride, .limit = limit});
      }, "pattern"_a, "context"_a = 256, "stride"_a = 0, "limit"_a = 0, release_gil())
      .def_prop_ro("vocab_size", &text::TokenDataset::vocab_size);
  nb::class_<data::Subset, Dataset>(d, "Subset", "Examples [begin, end) of another dataset.")
      .def(nb::init<std::shared_ptr<const Dataset>, int64_t, int64_t>(), "dataset"_a, "begin"_a, "end"_a);
  d.def("open_dataset", [](const std::string& name, const std::string& path, bool train, bool normalize,
                           int64_t context, int64_t stride) {
          return data::open_dataset(
              {.name = name, .path = path, .train = train, .normalize = normalize, .context = context, .stride = stride});
        }, "name"_a, "path"_a, "train"_a = true, "normalize"_a = true, "context"_a = 64, "stride"_a = 0,
        release_gil(), "A dataset by the data.* names (fashion_mnist, csv, libsvm, text) and its split.");

  nb::class_<PyLoader>(d, "Loader",
                       "Batches of a dataset filled by background threads: `for x, y in loader` runs one epoch "
                       "(the next each time). With world > 1, this rank's shard (DistributedSampler). A batch is a "
                       "view of a reused buffer that is refilled only once nothing holds it.")
      .def(nb::init<std::shared_ptr<const Dataset>, int64_t, bool, uint64_t, bool, int, int, int, double>(),
           "dataset"_a, "batch_size"_a = 64, "shuffle"_a = false, "seed"_a = 0, "drop_last"_a = false, "workers"_a = 1,
           "rank"_a = 0, "world"_a = 1, "timeout"_a = 120.0)
      .def("set_epoch", &PyLoader::set_epoch, "epoch"_a, "The epoch the next iteration runs (its shuffle).")
      .def("__iter__", &PyLoader::iter, nb::rv_policy::reference_internal)
      .def("__next__", &PyLoader::next)
      .def("__len__", &PyLoader::len, "Batches per epoch.")
      .def_prop_ro("dataset", &PyLoader::dataset);

  m.def("save", &save, "tensors"_a, "path"_a, "metadata"_a = nb::none(),
        "Writes {name: Tensor} as a safetensors file, atomically, with braid's CRC in its metadata.");
  m.def("load", &load, "path"_a,
        "Reads a safetensors file (braid's checkpoints included; a CRC mismatch is an IoError) as {name: Tensor}.");
  m.def("load_metadata", [](const std::string& path) { return safetensors::read_metadata(path); }, "path"_a,
        release_gil());
}

}  // namespace braid::python
