// Sparse problems to train on besides libsvm files:
//   fortunes   a hashed bag of words of the entries of Debian's `fortunes`
//              files, labelled +1 when the entry's file is one of `positive`
//              (computing: computers, linux, perl) and -1 otherwise; every
//              fifth entry is held out for testing.
//   synthetic  rows with a fixed number of nonzeros whose features follow a
//              power law (popular features shared by many rows, as in text),
//              labelled by a hidden linear model with flipped labels.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "braid/linear/sparse.h"

namespace braid::linear_model {

struct FortunesOptions {
  std::string dir = "/usr/share/games/fortunes";
  std::vector<std::string> positive{"computers", "linux", "perl"};
  int64_t buckets = int64_t{1} << 18;  // hashed feature space
  // Drop words found in more than this fraction of the training entries
  // (stop words: they join every entry in one conflict-graph component).
  double max_df = 1.0;
};

// {train, test}. Rows hold log(1 + count) of each hashed word, scaled to unit length.
std::pair<Examples, Examples> fortunes_task(const FortunesOptions& o = {});

struct SyntheticOptions {
  int64_t rows = 100000;
  int64_t cols = int64_t{1} << 20;
  int64_t nonzeros_per_row = 20;
  // Feature j is drawn as floor(cols * u^skew), then relabelled by a fixed
  // permutation: skew 1 is uniform, larger makes a few features popular.
  double skew = 2.0;
  double flip = 0.05;  // fraction of labels flipped
  uint64_t seed = 1;
};

// {train, test}: `rows` training rows and rows / 5 test rows from the same model.
std::pair<Examples, Examples> synthetic_task(const SyntheticOptions& o = {});

// Parses "fortunes", "fortunes:KEY=V,..." or "synthetic:KEY=V,..." (keys:
// the fields above), else reads `spec` as a libsvm file with `test` (may be
// empty) as its test file.
std::pair<Examples, Examples> load_task(const std::string& spec, const std::string& test, bool binary);

}  // namespace braid::linear_model
