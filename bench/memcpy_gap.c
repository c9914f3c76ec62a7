// memcpy speed against the distance between destination and source modulo
// 4 KiB. On the development machine (glibc 2.36, AMD EPYC) copies of 4 KiB to a
// few hundred KiB crawl when the destination lies 1-63 bytes after the source
// (each load waits on a store to the same place modulo 4 KiB); braid's
// copy_bytes (base/copy_bytes.h) copies those backwards, 32 bytes at a time.
// Prints GB/s for memcpy, forward 2 KiB pieces (a fix on some builds only) and
// copy_bytes's way.
//
//   cc -O2 -march=native bench/memcpy_gap.c -o /tmp/memcpy_gap && /tmp/memcpy_gap [bytes]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void forward_pieces(char* d, const char* s, size_t n) {
  for (size_t at = 0; at < n; at += 2048) memcpy(d + at, s + at, n - at < 2048 ? n - at : 2048);
}

typedef long long Vec __attribute__((vector_size(32), aligned(1), may_alias));

static void backward_pieces(char* d, const char* s, size_t n) {
  size_t at = n;
  for (; at >= 128; at -= 128) {
    const Vec a = *(const Vec*)(s + at - 32), b = *(const Vec*)(s + at - 64);
    const Vec c = *(const Vec*)(s + at - 96), e = *(const Vec*)(s + at - 128);
    *(Vec*)(d + at - 32) = a;
    *(Vec*)(d + at - 64) = b;
    *(Vec*)(d + at - 96) = c;
    *(Vec*)(d + at - 128) = e;
  }
  memcpy(d, s, at);
}

static double rate(void (*copy)(char*, const char*, size_t), char* d, const char* s, size_t n, int reps) {
  const double t0 = now();
  for (int i = 0; i < reps; ++i) copy(d, s, n);
  return n * (double)reps / (now() - t0) / 1e9;
}

static void plain(char* d, const char* s, size_t n) { memcpy(d, s, n); }

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 131072;
  char* src = aligned_alloc(4096, n + 8192);
  char* dst = aligned_alloc(4096, n + 8192);
  memset(src, 1, n + 8192);
  memset(dst, 2, n + 8192);
  const int gaps[] = {0, 8, 16, 32, 48, 64, 256, 2048, -16};
  const int reps = (int)(2e9 / n) + 1;
  printf("%zu bytes; gap = (dst - src) mod 4096; GB/s\n%8s %10s %14s %14s\n", n, "gap", "memcpy",
         "2KiB forward", "backward");
  for (size_t k = 0; k < sizeof gaps / sizeof gaps[0]; ++k) {
    const char* s = src + 4096 + (gaps[k] < 0 ? -gaps[k] : 0);
    char* d = dst + 4096 + (gaps[k] > 0 ? gaps[k] : 0);
    printf("%8d %10.1f %14.1f %14.1f\n", gaps[k], rate(plain, d, s, n, reps), rate(forward_pieces, d, s, n, reps),
           rate(backward_pieces, d, s, n, reps));
  }
  return 0;
}
