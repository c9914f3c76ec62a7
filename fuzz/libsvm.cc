// Fuzzes the libsvm dataset reader (data/libsvm.h) through a file: labels,
// index:value pairs, comments, blank lines, plain or gzip.
//
// Checked besides the contract (fuzz.h): the CSR rows are consistent (indices
// increasing and within the reported width) and, for narrow files, every
// example reads back as a dense row.
#include "braid/data/libsvm.h"
#include "fuzz/fuzz.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static braid::fuzz::ScratchFile file(".svm");
  const std::string& path = file.write(data, size);
  const size_t pick = size % 8;  // the size picks the options, so the text stays any text
  const braid::data::LibsvmOptions o{.features = (pick & 1) ? 16 : 0, .class_targets = (pick & 2) != 0};
  braid::fuzz::refused_or_ok([&] {
    const braid::data::LibsvmDataset d(path, o);
    for (int64_t i = 0; i < d.size(); ++i) {
      const auto row = d.row(i);
      for (size_t k = 0; k < row.indices.size(); ++k) {
        if (row.indices[k] < 0 || row.indices[k] >= d.features() || (k > 0 && row.indices[k] <= row.indices[k - 1]))
          __builtin_trap();
      }
    }
    // A dense row is the width's floats; the width is the file's (up to 2^31), so only narrow ones here.
    if (d.features() > 4096) return;
    std::vector<std::byte> x(static_cast<size_t>(d.features()) * sizeof(float)), y(8);
    for (int64_t i = 0; i < d.size(); ++i) d.read(i, x.data(), y.data());
  });
  return 0;
}
