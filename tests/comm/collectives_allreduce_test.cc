// Every all-reduce algorithm x world sizes 1-9 x sizes 0, 1, 7, 4099 x every
// dtype and op, against the naive reference; 1 Mi elements for f32 sum (and
// avg, to cover the final division on a large buffer). Every rank must also
// end with bitwise-identical results.
#include <gtest/gtest.h>

#include <mutex>

#include "braid/base/digest.h"
#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

// Fills, all-reduces and checks one case on one rank; returns the result's crc.
// expected: the reference per element when precomputed (large cases), else empty.
template <class T>
uint32_t run_case(Communicator& comm, Algorithm alg, Op op, size_t count, std::vector<std::byte>& storage,
                  const std::vector<double>& expected = {}) {
  const int p = comm.size(), r = comm.rank();
  storage.resize(count * sizeof(T));
  T* data = reinterpret_cast<T*>(storage.data());
  for (size_t i = 0; i < count; ++i) data[i] = from_double<T>(input_value(op, r, i));
  comm.allreduce(BufferRef(data, count, dtype_of<T>()), {.op = op, .algorithm = alg, .timeout = 60s})
      .wait(Deadline::after(90s));
  for (size_t i = 0; i < count; ++i) {
    const double ref = expected.empty() ? reference<T>(op, p, i) : expected[i];
    const double got = to_double(data[i]);
    if (std::abs(got - ref) > tolerance<T>(op, ref)) {
      ADD_FAILURE() << name(alg) << " p=" << p << " rank " << r << " n=" << count << " " << name(dtype_of<T>())
                    << " " << name(op) << ": element " << i << " is " << got << ", expected " << ref;
      break;
    }
  }
  return crc32(storage);
}

class AllreduceMatrix : public ::testing::TestWithParam<int> {};

TEST_P(AllreduceMatrix, EveryAlgorithmDtypeOpAndSize) {
  const int p = GetParam();
  std::vector<std::vector<uint32_t>> crcs(p);
  // Small chunks so the pipelined paths (several chunks per segment) run even at 4099 elements.
  run_world(p, [&](int r, Communicator& comm) {
    std::vector<std::byte> storage;
    for (Algorithm alg : kAllreduceAlgorithms)
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}})
        for (DType dt : kCollectiveDTypes)
          for (Op op : kOps)
            crcs[r].push_back(visit_dtype(dt, [&](auto t) -> uint32_t {
              using T = decltype(t);
              if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, bool>) return 0;
              else return run_case<T>(comm, alg, op, count, storage);
            }));
  }, [&](int r) { return CommOptions{.chunk_bytes = 1024, .host = r < (p + 1) / 2 ? "a" : "b"}; });
  for (int r = 1; r < p; ++r) EXPECT_EQ(crcs[r], crcs[0]) << "rank " << r << " differs from rank 0";
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllreduceMatrix, ::testing::Range(1, 10));

class AllreduceLarge : public ::testing::TestWithParam<int> {};

TEST_P(AllreduceLarge, OneMebiElementsF32) {
  const int p = GetParam();
  constexpr size_t n = 1 << 20;
  std::vector<std::vector<uint32_t>> crcs(p);
  std::vector<double> expected[2];
  for (int k = 0; k < 2; ++k)
    for (size_t i = 0; i < n; ++i) expected[k].push_back(reference<float>(k ? Op::avg : Op::sum, p, i));
  run_world(p, [&](int, Communicator& comm) {
    std::vector<std::byte> storage;
    for (Algorithm alg : kAllreduceAlgorithms)
      for (int k = 0; k < 2; ++k)
        crcs[comm.rank()].push_back(run_case<float>(comm, alg, k ? Op::avg : Op::sum, n, storage, expected[k]));
  }, [&](int r) { return CommOptions{.host = r % 2 ? "a" : "b"}; });
  for (int r = 1; r < p; ++r) EXPECT_EQ(crcs[r], crcs[0]) << "rank " << r << " differs from rank 0";
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllreduceLarge, ::testing::Values(1, 2, 3, 4, 5, 8, 9));

}  // namespace
}  // namespace braid::comm::testing
