#include "braid/linear/datasets.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "braid/base/error.h"
#include "braid/base/hash.h"
#include "braid/base/rng.h"

namespace braid::linear_model {

namespace {

// One entry's hashed word counts -> a unit-length row of log(1 + count).
void append_entry(const std::string& text, int64_t buckets, SparseMatrix& x) {
  std::map<int32_t, int> counts;
  std::string word;
  auto flush = [&] {
    if (word.size() >= 2) ++counts[static_cast<int32_t>(mix64(fnv1a(word)) % static_cast<uint64_t>(buckets))];
    word.clear();
  };
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else flush();
  }
  flush();
  std::vector<int32_t> idx;
  std::vector<float> val;
  double norm = 0;
  for (auto [j, c] : counts) {
    idx.push_back(j);
    val.push_back(static_cast<float>(std::log1p(c)));
    norm += double{val.back()} * val.back();
  }
  for (float& v : val) v = static_cast<float>(v / std::sqrt(norm));
  x.append(idx, val);
  x.cols = std::max(x.cols, buckets);
}

// Keeps columns whose document frequency in `train` is at most max_df.
void drop_frequent(Examples& train, Examples& test, double max_df) {
  if (max_df >= 1) return;
  std::vector<int64_t> df(static_cast<size_t>(train.x.cols), 0);
  for (int32_t j : train.x.index) ++df[j];
  const double limit = max_df * static_cast<double>(train.size());
  for (Examples* e : {&train, &test}) {
    SparseMatrix kept;
    kept.cols = e->x.cols;
    for (int64_t r = 0; r < e->size(); ++r) {
      for (int64_t k = e->x.start[r]; k < e->x.start[r + 1]; ++k) {
        if (static_cast<double>(df[e->x.index[k]]) > limit) continue;
        kept.index.push_back(e->x.index[k]);
        kept.value.push_back(e->x.value[k]);
      }
      kept.start.push_back(static_cast<int64_t>(kept.index.size()));
    }
    e->x = std::move(kept);
  }
}

std::map<std::string, std::string> parse_keys(const std::string& spec, size_t colon) {
  std::map<std::string, std::string> kv;
  if (colon == std::string::npos) return kv;
  std::stringstream ss(spec.substr(colon + 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) fail<ConfigError>("'{}' in '{}': expected KEY=VALUE", item, spec);
    kv[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return kv;
}

double number(const std::map<std::string, std::string>& kv, const std::string& key, double fallback) {
  const auto it = kv.find(key);
  if (it == kv.end()) return fallback;
  try {
    size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  fail<ConfigError>("{}={}: not a number", key, it->second);
}

}  // namespace

std::pair<Examples, Examples> fortunes_task(const FortunesOptions& o) {
  namespace fs = std::filesystem;
  if (o.buckets < 1 || o.buckets > (int64_t{1} << 31)) fail<ConfigError>("fortunes buckets must be in [1, 2^31]");
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(o.dir, ec)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && !entry.is_symlink() && ext != ".dat" && ext != ".u8") files.push_back(entry.path());
  }
  if (ec) fail<IoError>("cannot list {}: {}", o.dir, ec.message());
  if (files.empty()) fail<IoError>("{} has no fortune files (is Debian's `fortunes` package installed?)", o.dir);
  std::sort(files.begin(), files.end());
  Examples train, test;
  int64_t entries = 0;
  for (const auto& path : files) {
    const std::string category = path.filename().string();
    const double label =
        std::find(o.positive.begin(), o.positive.end(), category) != o.positive.end() ? 1.0 : -1.0;
    std::ifstream in(path);
    std::string line, text;
    auto finish = [&] {
      if (text.find_first_not_of(" \t\n") != std::string::npos) {
        Examples& into = entries++ % 5 == 4 ? test : train;
        append_entry(text, o.buckets, into.x);
        into.y.push_back(label);
      }
      text.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%") finish();
      else text += line + "\n";
    }
    finish();
  }
  train.x.cols = test.x.cols = o.buckets;
  drop_frequent(train, test, o.max_df);
  return {std::move(train), std::move(test)};
}

std::pair<Examples, Examples> synthetic_task(const SyntheticOptions& o) {
  if (o.rows < 1 || o.cols < 1 || o.cols > (int64_t{1} << 31) || o.nonzeros_per_row < 1 || o.skew < 1)
    fail<ConfigError>("synthetic: rows, cols, nonzeros_per_row >= 1, cols <= 2^31 and skew >= 1");
  Generator g(o.seed);
  std::vector<double> truth(static_cast<size_t>(o.cols));
  for (double& v : truth) v = g.normal();
  // A fixed relabelling so popular features are scattered over the vector.
  std::vector<int32_t> relabel(static_cast<size_t>(o.cols));
  for (int64_t j = 0; j < o.cols; ++j) relabel[j] = static_cast<int32_t>(j);
  for (int64_t j = o.cols - 1; j > 0; --j) std::swap(relabel[j], relabel[g.below(j + 1)]);
  auto make = [&](int64_t rows) {
    Examples e;
    e.x.cols = o.cols;
    std::vector<int32_t> idx;
    std::vector<float> val;
    for (int64_t r = 0; r < rows; ++r) {
      idx.clear();
      for (int64_t k = 0; k < o.nonzeros_per_row; ++k) {
        const auto j = static_cast<int64_t>(static_cast<double>(o.cols) * std::pow(g.uniform_f64(), o.skew));
        idx.push_back(relabel[std::min(j, o.cols - 1)]);
      }
      std::sort(idx.begin(), idx.end());
      idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
      val.assign(idx.size(), static_cast<float>(1 / std::sqrt(static_cast<double>(idx.size()))));
      double z = 0;
      for (size_t k = 0; k < idx.size(); ++k) z += val[k] * truth[idx[k]];
      e.x.append(idx, val);
      e.x.cols = o.cols;
      e.y.push_back((z >= 0) != (g.uniform_f64() < o.flip) ? 1.0 : -1.0);
    }
    return e;
  };
  Examples train = make(o.rows);
  Examples test = make(std::max<int64_t>(1, o.rows / 5));
  return {std::move(train), std::move(test)};
}

std::pair<Examples, Examples> load_task(const std::string& spec, const std::string& test, bool binary) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (kind == "fortunes" || kind == "synthetic") {
    const auto kv = parse_keys(spec, colon);
    for (const auto& [k, v] : kv) {
      static const std::vector<std::string> fortunes_keys{"dir", "positive", "buckets", "max_df"};
      static const std::vector<std::string> synthetic_keys{"rows", "cols", "nonzeros_per_row", "skew", "flip", "seed"};
      const auto& known = kind == "fortunes" ? fortunes_keys : synthetic_keys;
      if (std::find(known.begin(), known.end(), k) == known.end()) fail<ConfigError>("{}: unknown key '{}'", kind, k);
    }
    if (!test.empty()) fail<ConfigError>("{} makes its own test set; drop --test", kind);
    if (kind == "fortunes") {
      FortunesOptions o;
      if (kv.count("dir")) o.dir = kv.at("dir");
      if (kv.count("positive")) {  // "a+b+c": ',' separates keys
        o.positive.clear();
        std::stringstream ss(kv.at("positive"));
        for (std::string c; std::getline(ss, c, '+');) o.positive.push_back(c);
      }
      o.buckets = static_cast<int64_t>(number(kv, "buckets", static_cast<double>(o.buckets)));
      o.max_df = number(kv, "max_df", o.max_df);
      return fortunes_task(o);
    }
    SyntheticOptions o;
    o.rows = static_cast<int64_t>(number(kv, "rows", static_cast<double>(o.rows)));
    o.cols = static_cast<int64_t>(number(kv, "cols", static_cast<double>(o.cols)));
    o.nonzeros_per_row = static_cast<int64_t>(number(kv, "nonzeros_per_row", static_cast<double>(o.nonzeros_per_row)));
    o.skew = number(kv, "skew", o.skew);
    o.flip = number(kv, "flip", o.flip);
    o.seed = static_cast<uint64_t>(number(kv, "seed", static_cast<double>(o.seed)));
    return synthetic_task(o);
  }
  Examples train = read_libsvm(spec, 0, binary);
  Examples held_out;
  if (!test.empty()) {
    // Read at its own width: features only the test file has get weight 0
    // once the training matrix is widened to match.
    held_out = read_libsvm(test, 0, binary);
    train.x.cols = std::max(train.x.cols, held_out.x.cols);
  }
  return {std::move(train), std::move(held_out)};
}

}  // namespace braid::linear_model
