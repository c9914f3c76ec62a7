#include "tests/comm/p2p_check.h"

#include <array>
#include <vector>

#include "braid/base/error.h"

namespace braid::comm::testing {

namespace {

std::byte pattern(int src, int dst, uint64_t tag, size_t i) {
  return static_cast<std::byte>((src * 131 + dst * 31 + tag * 7 + i * 13 + (i >> 8)) & 0xff);
}

std::vector<std::byte> make(int src, int dst, uint64_t tag, size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern(src, dst, tag, i);
  return v;
}

void verify(const std::vector<std::byte>& got, int src, int dst, uint64_t tag) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != pattern(src, dst, tag, i)) {
      fail<Error>("rank {}: message from rank {} tag {} ({} bytes) differs at byte {}", dst, src,
                  tag, got.size(), i);
    }
  }
}

}  // namespace

// Tags that differ only above bit 31, as a communicator's do (its id and the
// collective's sequence number sit high): a transport with narrower tags
// (MPI's end at MPI_TAG_UB, 2^31 - 1 in Open MPI) must still keep them apart.
constexpr std::array<uint64_t, 4> kHighTags{7, (1ull << 31) | 7, (1ull << 40) | 7, (1ull << 63) | (1ull << 39) | 7};

void run_p2p_checks(Transport& t, Deadline d) {
  const int me = t.rank();
  const std::vector<size_t> sizes{0, 1, 7, 4099, 1 << 20};
  struct Rx {
    int src;
    uint64_t tag;
    std::vector<std::byte> buf;
  };
  std::vector<std::vector<std::byte>> out;
  std::vector<Rx> in;
  std::vector<Work> works;
  out.reserve(1024);
  in.reserve(1024);
  for (int p = 0; p < t.size(); ++p) {
    if (p == me) continue;
    for (size_t k = 0; k < sizes.size(); ++k) {
      out.push_back(make(me, p, k, sizes[k]));
      works.push_back(t.send(p, k, out.back()));
    }
    for (uint64_t tag = 1000; tag < 1064; ++tag) {
      out.push_back(make(me, p, tag, 8 + tag % 5));
      works.push_back(t.send(p, tag, out.back()));
    }
    // Same tag, in order: message j carries tag 5000 + j in its pattern.
    for (uint64_t j = 0; j < 8; ++j) {
      out.push_back(make(me, p, 5000 + j, 100 + j));
      works.push_back(t.send(p, 5000, out.back()));
    }
    for (size_t i = 0; i < kHighTags.size(); ++i) {
      out.push_back(make(me, p, kHighTags[i], 16 + i));
      works.push_back(t.send(p, kHighTags[i], out.back()));
    }
  }
  for (int p = 0; p < t.size(); ++p) {
    if (p == me) continue;
    for (size_t k = sizes.size(); k-- > 0;) in.push_back({p, k, std::vector<std::byte>(sizes[k])});
    for (uint64_t tag = 1064; tag-- > 1000;) in.push_back({p, tag, std::vector<std::byte>(8 + tag % 5)});
    for (uint64_t j = 0; j < 8; ++j) in.push_back({p, 5000 + j, std::vector<std::byte>(100 + j)});
    for (size_t i = kHighTags.size(); i-- > 0;) in.push_back({p, kHighTags[i], std::vector<std::byte>(16 + i)});
  }
  for (auto& rx : in) works.push_back(t.recv(rx.src, rx.tag >= 5000 && rx.tag < 5008 ? 5000 : rx.tag, rx.buf));
  wait_all(works, d);
  for (auto& rx : in) verify(rx.buf, rx.src, me, rx.tag);
}

}  // namespace braid::comm::testing
