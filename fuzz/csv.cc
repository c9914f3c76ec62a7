// Fuzzes the CSV dataset reader (data/csv.h) through a file, as a user's
// data.path is read: plain or gzip (inputs starting 1f 8b are gunzipped, so
// the gzip decoder is fuzzed too), header detection, fields and labels.
//
// Checked besides the contract (fuzz.h): every example reads back within the
// sizes the reader reports.
#include "braid/data/csv.h"
#include "fuzz/fuzz.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static braid::fuzz::ScratchFile file(".csv");
  const std::string& path = file.write(data, size);
  const size_t pick = size % 8;  // the size picks the options, so the text stays any text
  const braid::data::CsvOptions o{.label_column = (pick & 3) == 0 ? 0 : -1 - static_cast<int64_t>(pick & 1), .regression = (pick & 4) != 0};
  braid::fuzz::refused_or_ok([&] {
    const braid::data::CsvDataset d(path, o);
    std::vector<std::byte> x(static_cast<size_t>(d.features()) * sizeof(float)), y(8);
    for (int64_t i = 0; i < d.size(); ++i) d.read(i, x.data(), y.data());
  });
  return 0;
}
