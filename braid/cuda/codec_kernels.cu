#include "braid/cuda/codec_kernels.h"

#include "braid/cuda/dropout_kernels.h"  // philox

namespace braid::cuda {

namespace {

// Plain values at a byte offset of a message (which need not be aligned).
template <class T>
BRAID_HD inline T get(const std::byte* p) {
  T v;
  memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
BRAID_HD inline void put(std::byte* p, T v) {
  memcpy(p, &v, sizeof(T));
}

BRAID_HD inline int64_t chunks_of(int64_t n, int64_t chunk) { return n / chunk + (n % chunk != 0); }

// Byte b of codes packed at `width` bits each, LSB first (wire.h's pack_bits):
// the codes whose bits [c * width, (c + 1) * width) meet [8b, 8b + 8).
template <class Code>
BRAID_HD inline uint8_t packed_byte(int64_t b, int64_t n, int width, Code code) {
  const int64_t lo = 8 * b, first = lo / width;
  int64_t last = (lo + 7) / width;
  if (last > n - 1) last = n - 1;
  uint32_t v = 0;
  for (int64_t c = first; c <= last; ++c) {
    const int64_t shift = c * width - lo;  // in (-width, 8)
    const uint64_t bits = code(c);
    v |= static_cast<uint32_t>(shift >= 0 ? bits << shift : bits >> -shift);
  }
  return static_cast<uint8_t>(v);
}

// Code i of a packed message (wire.h's unpack_bits).
BRAID_HD inline uint32_t unpacked(const std::byte* in, int64_t i, int width) {
  const auto* p = reinterpret_cast<const uint8_t*>(in);
  const int64_t bit = i * width;
  uint64_t v = 0;
  const int64_t last = (bit + width - 1) / 8;
  for (int64_t b = last; b >= bit / 8; --b) v = (v << 8) | p[b];
  return static_cast<uint32_t>((v >> (bit % 8)) & ((uint64_t{1} << width) - 1));
}

struct Add {
  float* x;
  const float* y;
  BRAID_HD void operator()(int64_t i) const { x[i] += y[i]; }
};
struct Scale {
  float* x;
  float f;
  BRAID_HD void operator()(int64_t i) const { x[i] *= f; }
};
struct Zero {
  float* x;
  BRAID_HD void operator()(int64_t i) const { x[i] = 0.0f; }
};

template <class H>
struct CastDivide {
  const float* grad;
  H* out;
  float world;
  BRAID_HD void operator()(int64_t i) const {
    H h;
    store<H>(&h, grad[i]);
    store<H>(out + i, load<H>(&h) / world);
  }
};
template <class H>
struct Widen {
  const H* in;
  float* out;
  BRAID_HD void operator()(int64_t i) const { out[i] = load<H>(in + i); }
};

// ---- QSGD: header (u64 n, u32 s, u32 chunk), f32 norm per chunk, codes ----

constexpr int64_t kQsgdHeader = 16;

// A thread per chunk: its norm, summed in double as the host does; the first
// also writes the header.
struct QsgdNorms {
  const float* g;
  int64_t n, chunk;
  uint32_t s;
  std::byte* message;
  BRAID_HD void operator()(int64_t c) const {
    if (c == 0) {
      put<uint64_t>(message, static_cast<uint64_t>(n));
      put<uint32_t>(message + 8, s);
      put<uint32_t>(message + 12, static_cast<uint32_t>(chunk));
    }
    const int64_t begin = c * chunk, end = begin + chunk < n ? begin + chunk : n;
    if (begin >= n) return;  // n = 0: the header alone
    double sq = 0;
    for (int64_t i = begin; i < end; ++i) sq += static_cast<double>(g[i]) * g[i];
    put<float>(message + kQsgdHeader + 4 * c, static_cast<float>(sqrt(sq)));
  }
};

// A thread per Philox block of 4 values: (level << 1) | sign, the level
// rounded up with probability l - floor(l) by the value's word (qsgd.cc).
struct QsgdCodes {
  const float* g;
  int64_t n, chunk;
  uint32_t s;
  uint64_t key, stream;
  const std::byte* message;
  uint32_t* codes;
  BRAID_HD void operator()(int64_t blk) const {
    const Words words = philox(key, stream, static_cast<uint64_t>(blk));
    const double top = static_cast<double>(s);
    for (int lane = 0; lane < 4; ++lane) {
      const int64_t i = 4 * blk + lane;
      if (i >= n) return;
      const float norm = get<float>(message + kQsgdHeader + 4 * (i / chunk));
      const double scale = norm > 0 ? static_cast<double>(s) / norm : 0.0;
      const double raw = fabs(static_cast<double>(g[i])) * scale;
      const double l = raw < top ? raw : top;
      const auto floor = static_cast<int32_t>(l);
      const double u = static_cast<double>(static_cast<int32_t>(words.w[lane] >> 8)) * 0x1.0p-24;
      const int32_t level = floor + (u < l - floor ? 1 : 0);
      codes[i] = (static_cast<uint32_t>(level) << 1) | (g[i] < 0 ? 1u : 0u);
    }
  }
};

struct PackCodes {
  const uint32_t* codes;
  int64_t n;
  int width;
  std::byte* out;
  BRAID_HD void operator()(int64_t b) const {
    const uint32_t* c = codes;
    out[b] = static_cast<std::byte>(packed_byte(b, n, width, [c](int64_t i) { return c[i]; }));
  }
};

struct QsgdDecode {
  const std::byte* norms;
  const std::byte* bits;
  int64_t chunk;
  uint32_t s;
  int width;
  float* out;
  BRAID_HD void operator()(int64_t i) const {
    const uint32_t code = unpacked(bits, i, width);
    const float norm = get<float>(norms + 4 * (i / chunk));
    const float v = norm * static_cast<float>(code >> 1) / static_cast<float>(s);
    out[i] += (code & 1u) ? -v : v;
  }
};

BRAID_HD inline int bit_width(uint32_t s) {
  int w = 0;
  while (s) ++w, s >>= 1;
  return w;
}

// ---- 1-bit: header (u64 n, u64 chunk), (up, down) per chunk, sign bits ----

constexpr int64_t kOnebitHeader = 16;

// A thread per chunk: the means of its non-negative and negative values.
struct OnebitScales {
  const float* x;
  int64_t n, chunk;
  std::byte* message;
  BRAID_HD void operator()(int64_t c) const {
    if (c == 0) {
      put<uint64_t>(message, static_cast<uint64_t>(n));
      put<uint64_t>(message + 8, static_cast<uint64_t>(chunk));
    }
    const int64_t begin = c * chunk, end = begin + chunk < n ? begin + chunk : n;
    if (begin >= n) return;  // n = 0: the header alone
    double sum = 0, sum_pos = 0;
    int64_t npos = 0;
    for (int64_t i = begin; i < end; ++i) {
      const double d = x[i];
      sum += d;
      sum_pos += d >= 0 ? d : 0.0;
      npos += x[i] >= 0 ? 1 : 0;
    }
    const int64_t nneg = end - begin - npos;
    const float up = npos ? static_cast<float>(sum_pos / static_cast<double>(npos)) : 0.0f;
    const float down = nneg ? static_cast<float>((sum - sum_pos) / static_cast<double>(nneg)) : 0.0f;
    put<float>(message + kOnebitHeader + 8 * c, up);
    put<float>(message + kOnebitHeader + 8 * c + 4, down);
  }
};

struct PackSigns {
  const float* x;
  int64_t n;
  std::byte* out;
  BRAID_HD void operator()(int64_t b) const {
    const float* v = x;
    out[b] = static_cast<std::byte>(packed_byte(b, n, 1, [v](int64_t i) { return v[i] >= 0 ? 1u : 0u; }));
  }
};

// x becomes what was not sent (the memory).
struct OnebitResidual {
  float* x;
  int64_t chunk;
  const std::byte* scales;
  BRAID_HD void operator()(int64_t i) const {
    const int64_t c = i / chunk;
    x[i] -= x[i] >= 0 ? get<float>(scales + 8 * c) : get<float>(scales + 8 * c + 4);
  }
};

struct OnebitDecode {
  const std::byte* scales;
  const std::byte* bits;
  int64_t chunk;
  float* out;
  BRAID_HD void operator()(int64_t i) const {
    const int64_t c = i / chunk;
    const bool up = (static_cast<uint8_t>(bits[i / 8]) >> (i % 8)) & 1u;
    out[i] += up ? get<float>(scales + 8 * c) : get<float>(scales + 8 * c + 4);
  }
};

// ---- top-k: header (u64 n, u64 count), u32 indices, f32 values ----

constexpr int64_t kTopkHeader = 16;
constexpr int kBins = 1 << 11;  // the widest of the 11, 11 and 10-bit digits

// The selection's state between kernels.
struct Select {
  uint32_t prefix;  // the k-th largest |x|'s bit pattern, the digits fixed so far
  uint32_t pad;
  uint64_t rank;    // its rank among the values that share them; then the ties to take
  uint64_t count;   // values sent
};
struct BlockCounts {
  uint64_t gt, eq, offset, take;
};

BRAID_HD inline uint32_t magnitude_bits(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  return b & 0x7FFF'FFFFu;
}

struct SelectInit {
  Select* sel;
  uint64_t k;
  BRAID_HD void operator()(int64_t) const { *sel = Select{0, 0, k, 0}; }
};
struct ZeroHist {
  uint32_t* hist;
  BRAID_HD void operator()(int64_t i) const { hist[i] = 0; }
};
// Counts the digit at `low` of the values whose higher bits match the prefix.
struct Histogram {
  const float* x;
  const Select* sel;
  uint32_t* hist;
  int low, digit;
  BRAID_HD void operator()(int64_t i) const {
    const uint32_t b = magnitude_bits(x[i]);
    const int high = low + digit;
    if (high < 32 && (b >> high) != (sel->prefix >> high)) return;
    uint32_t* bin = hist + ((b >> low) & ((1u << digit) - 1));
#if defined(__CUDA_ARCH__)
    atomicAdd(bin, 1u);
#else
    ++*bin;  // host loops run one index at a time
#endif
  }
};
// One thread: the bin holding the wanted rank, from the top (topk.cc).
struct PickBin {
  Select* sel;
  const uint32_t* hist;
  int low, digit;
  BRAID_HD void operator()(int64_t) const {
    uint64_t rank = sel->rank;
    int64_t bin = int64_t{1} << digit;
    while (bin-- > 0 && rank > hist[bin]) rank -= hist[bin];
    sel->rank = rank;
    sel->prefix |= static_cast<uint32_t>(bin) << low;
  }
};

BRAID_HD inline float threshold(const Select* sel) {
  float t;
  memcpy(&t, &sel->prefix, 4);
  return t;
}

struct CountBlocks {
  const float* x;
  int64_t n;
  const Select* sel;
  BlockCounts* blocks;
  BRAID_HD void operator()(int64_t blk) const {
    const float t = threshold(sel);
    const int64_t begin = blk * kTopkBlock, end = begin + kTopkBlock < n ? begin + kTopkBlock : n;
    uint64_t gt = 0, eq = 0;
    for (int64_t i = begin; i < end; ++i) {
      const float m = fabsf(x[i]);
      gt += m > t ? 1 : 0;
      eq += m == t && t > 0 ? 1 : 0;
    }
    blocks[blk].gt = gt;
    blocks[blk].eq = eq;
  }
};
// One thread: each block's first output slot and its share of the ties (the
// first ones in index order), the count, and the header.
struct AssignBlocks {
  Select* sel;
  BlockCounts* blocks;
  int64_t nblocks, n;
  std::byte* message;
  BRAID_HD void operator()(int64_t) const {
    uint64_t ties = sel->rank, at = 0;
    for (int64_t b = 0; b < nblocks; ++b) {
      const uint64_t take = blocks[b].eq < ties ? blocks[b].eq : ties;
      ties -= take;
      blocks[b].offset = at;
      blocks[b].take = take;
      at += blocks[b].gt + take;
    }
    sel->count = at;
    put<uint64_t>(message, static_cast<uint64_t>(n));
    put<uint64_t>(message + 8, at);
  }
};
struct WriteBlocks {
  float* x;
  int64_t n;
  bool keep_error;
  const Select* sel;
  const BlockCounts* blocks;
  std::byte* message;
  BRAID_HD void operator()(int64_t blk) const {
    const float t = threshold(sel);
    const uint64_t count = sel->count;
    uint64_t j = blocks[blk].offset, ties = blocks[blk].take;
    const int64_t begin = blk * kTopkBlock, end = begin + kTopkBlock < n ? begin + kTopkBlock : n;
    for (int64_t i = begin; i < end; ++i) {
      const float m = fabsf(x[i]);
      bool take = m > t;
      if (!take && m == t && t > 0 && ties > 0) take = true, --ties;
      if (!take) continue;
      put<uint32_t>(message + kTopkHeader + 4 * j, static_cast<uint32_t>(i));
      put<float>(message + kTopkHeader + 4 * count + 4 * j, x[i]);
      if (keep_error) x[i] = 0.0f;
      ++j;
    }
  }
};
// A thread per slot: slots past the message's count (at most k) add nothing;
// an index out of range is skipped.
struct TopkDecode {
  const std::byte* message;
  int64_t n, k;
  float* out;
  BRAID_HD void operator()(int64_t j) const {
    uint64_t count = get<uint64_t>(message + 8);
    if (count > static_cast<uint64_t>(k)) count = static_cast<uint64_t>(k);
    if (static_cast<uint64_t>(j) >= count) return;
    const uint32_t i = get<uint32_t>(message + kTopkHeader + 4 * j);
    if (static_cast<int64_t>(i) >= n) return;
    out[i] += get<float>(message + kTopkHeader + 4 * count + 4 * j);
  }
};

}  // namespace

void codec_add(float* x, const float* y, int64_t n) { for_each(n, Add{x, y}, "codec_add"); }
void codec_scale(float* x, int64_t n, float factor) { for_each(n, Scale{x, factor}, "codec_scale"); }
void codec_zero(float* x, int64_t n) { for_each(n, Zero{x}, "codec_zero"); }

void codec_cast_divide(DType half, const float* grad, void* out, int64_t n, float world) {
  if (half == DType::f16) {
    for_each(n, CastDivide<f16>{grad, static_cast<f16*>(out), world}, "codec_cast_divide");
  } else {
    for_each(n, CastDivide<bf16>{grad, static_cast<bf16*>(out), world}, "codec_cast_divide");
  }
}

void codec_widen(DType half, const void* in, float* out, int64_t n) {
  if (half == DType::f16) {
    for_each(n, Widen<f16>{static_cast<const f16*>(in), out}, "codec_widen");
  } else {
    for_each(n, Widen<bf16>{static_cast<const bf16*>(in), out}, "codec_widen");
  }
}

void qsgd_encode(const float* grad, int64_t n, uint32_t s, int64_t chunk, uint64_t key, uint64_t stream,
                 uint32_t* codes, std::byte* message) {
  const int64_t chunks = chunks_of(n, chunk);
  const int width = 1 + bit_width(s);
  if (n == 0) {  // the header alone
    for_each(1, QsgdNorms{grad, 0, chunk, s, message}, "qsgd_norms");
    return;
  }
  for_each(chunks, QsgdNorms{grad, n, chunk, s, message}, "qsgd_norms");
  for_each((n + 3) / 4, QsgdCodes{grad, n, chunk, s, key, stream, message, codes}, "qsgd_codes");
  std::byte* bits = message + kQsgdHeader + 4 * chunks;
  for_each((n * width + 7) / 8, PackCodes{codes, n, width, bits}, "qsgd_pack");
}

void qsgd_decode_add(const std::byte* message, int64_t n, uint32_t s, int64_t chunk, float* out) {
  const int64_t chunks = chunks_of(n, chunk);
  const std::byte* norms = message + kQsgdHeader;
  for_each(n, QsgdDecode{norms, norms + 4 * chunks, chunk, s, 1 + bit_width(s), out}, "qsgd_decode");
}

void onebit_encode(float* x, int64_t n, int64_t chunk, bool keep_error, std::byte* message) {
  const int64_t chunks = chunks_of(n, chunk);
  for_each(n == 0 ? 1 : chunks, OnebitScales{x, n, chunk, message}, "onebit_scales");
  const std::byte* scales = message + kOnebitHeader;
  for_each((n + 7) / 8, PackSigns{x, n, message + kOnebitHeader + 8 * chunks}, "onebit_pack");
  if (keep_error) for_each(n, OnebitResidual{x, chunk, scales}, "onebit_residual");
}

void onebit_decode_add(const std::byte* message, int64_t n, int64_t chunk, float* out) {
  const int64_t chunks = chunks_of(n, chunk);
  for_each(n, OnebitDecode{message + kOnebitHeader, message + kOnebitHeader + 8 * chunks, chunk, out},
           "onebit_decode");
}

size_t topk_scratch_bytes(int64_t n) {
  return sizeof(Select) + kBins * sizeof(uint32_t) +
         static_cast<size_t>(chunks_of(n, kTopkBlock)) * sizeof(BlockCounts);
}

void topk_encode(float* x, int64_t n, int64_t k, bool keep_error, void* scratch, std::byte* message) {
  auto* sel = static_cast<Select*>(scratch);
  auto* hist = reinterpret_cast<uint32_t*>(sel + 1);
  auto* blocks = reinterpret_cast<BlockCounts*>(hist + kBins);
  for_each(1, SelectInit{sel, static_cast<uint64_t>(k)}, "topk_select");
  int low = 32;
  for (int digit : {11, 11, 10}) {
    low -= digit;
    for_each(int64_t{1} << digit, ZeroHist{hist}, "topk_zero");
    for_each(n, Histogram{x, sel, hist, low, digit}, "topk_histogram");
    for_each(1, PickBin{sel, hist, low, digit}, "topk_select");
  }
  const int64_t nblocks = chunks_of(n, kTopkBlock);
  for_each(nblocks, CountBlocks{x, n, sel, blocks}, "topk_count");
  for_each(1, AssignBlocks{sel, blocks, nblocks, n, message}, "topk_assign");
  for_each(nblocks, WriteBlocks{x, n, keep_error, sel, blocks, message}, "topk_write");
}

void topk_decode_add(const std::byte* message, int64_t n, int64_t k, float* out) {
  for_each(k, TopkDecode{message, n, k, out}, "topk_decode");
}

}  // namespace braid::cuda
