// Fuzzes braid linear's libsvm reader (linear/sparse.h, read_libsvm): the
// dataset reader's rows turned into a CSR matrix with +1/-1 labels, then the
// sparsity statistics the solvers print (which transpose the matrix).
//
// Checked besides the contract (fuzz.h): the matrix is well formed.
#include "braid/linear/sparse.h"
#include "fuzz/fuzz.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace lm = braid::linear_model;
  static braid::fuzz::ScratchFile file(".svm");
  const std::string& path = file.write(data, size);
  const size_t pick = size % 8;  // the size picks the options, so the text stays any text
  braid::fuzz::refused_or_ok([&] {
    const lm::Examples e = lm::read_libsvm(path, (pick & 1) ? 8 : 0, (pick & 2) != 0);
    const lm::SparseMatrix& x = e.x;
    if (x.start.size() != e.y.size() + 1 || x.start.back() != x.nonzeros()) __builtin_trap();
    for (int32_t c : x.index)
      if (c < 0 || c >= x.cols) __builtin_trap();
    // The transpose allocates a row per column: bounded by the width, so only narrow files here.
    if (x.cols <= 4096) (void)lm::sparsity_stats(x, 1 << 12);
  });
  return 0;
}
