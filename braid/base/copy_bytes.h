// memcpy without a trap of this platform's libc: when the destination lies
// 1-63 bytes after the source modulo 4 KiB, glibc 2.36's forward copy (its
// `rep movsb` path from 4 KiB up, on AMD Zen) crawls at 2-3 GB/s instead of
// 30-45 (bench/memcpy_gap.c): each load looks as if it depended on a store
// just issued to the same place modulo 4 KiB. A buffer from malloc's mmap path
// sits 16 bytes into its page, so copying between it and page-aligned shared
// memory meets this every time. Such copies run backwards, 32 bytes at a
// time: then every store goes to a higher address than every later load, and
// none of those loads can alias it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace braid {

namespace copy_detail {
// 32 bytes, any alignment, may alias anything.
typedef long long Vec __attribute__((vector_size(32), aligned(1), may_alias));
inline Vec load(const std::byte* p) { return *reinterpret_cast<const Vec*>(p); }
inline void store(std::byte* p, Vec v) { *reinterpret_cast<Vec*>(p) = v; }
}  // namespace copy_detail

inline void copy_bytes(void* dst, const void* src, size_t n) {
  using namespace copy_detail;
  const auto gap = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  if (n <= 256 || gap == 0 || gap >= 64) {
    std::memcpy(dst, src, n);
    return;
  }
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  size_t at = n;
  for (; at >= 128; at -= 128) {
    const Vec a = load(s + at - 32), b = load(s + at - 64), c = load(s + at - 96), e = load(s + at - 128);
    store(d + at - 32, a);
    store(d + at - 64, b);
    store(d + at - 96, c);
    store(d + at - 128, e);
  }
  std::memcpy(d, s, at);  // the head, under 128 bytes
}

}  // namespace braid
