// 3x3 convolutions (stride 1, no dilation, one group) by Winograd's minimal
// filtering F(2x2, 3x3) (Lavin & Gray, 2016): each 2x2 block of outputs of
// one channel pair costs 16 products instead of 36, the products of all
// channel pairs at one of the 16 positions of a tile being one GEMM:
//
//   U[xi] [o, c]  = (G w[o, c] G^T)[xi]             weights, 4x4 from 3x3
//   V[xi] [c, p]  = (B^T d[c, p] B)[xi]             d: the 4x4 input patch of tile p
//   M[xi] [o, p]  = U[xi] x V[xi]                   16 GEMMs, p over images x tiles
//   y[o, tile p]  = A^T M[., o, p] A (+ bias)       2x2 outputs
//
// Backward data is the forward over dy with the filters turned 180 degrees and
// their in/out channels swapped (padding 2 - p); turning a filter permutes
// its transform (G J = P G, P swapping rows 0 and 3), so that forward's U is
// the plain one's, read transposed at permuted positions. Backward weights is the
// adjoint of the forward in w: dU[xi] [o, c] = Z[xi] x V[xi]^T with
// Z[xi] [o, p] = (A dy[o, p] A^T)[xi] (dy's 2x2 tile, zero past the output),
// then dw = G^T dU G. The GEMMs are 2.25x fewer multiply-adds than a direct
// or im2col convolution (less where the output's sides are odd: a 7x7 output
// computes 8x8); the transforms add a pass over the input and output in each
// direction, written over 8 tiles at a time in vector lanes (a plane is
// split into its even and odd columns first, so the 8 tiles' patches are
// contiguous loads). Images are taken in blocks of ~256 tiles, so a block's
// transformed tiles stay in cache between the transforms and the GEMMs.
// Rounding: the transforms only add and halve, so results agree with im2col
// to a few ulps of the sums (tests/ops/conv_test.cc).
#include <algorithm>
#include <cstring>
#include <vector>

#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/conv.h"
#include "braid/tensor/cpu/gemm.h"
#include "braid/tensor/tensor.h"

namespace braid::cpu::winograd {
namespace {

constexpr int64_t kXi = 16;   // transform positions of a 4x4 tile
constexpr int64_t kLane = 8;  // tiles transformed together
typedef float V8 __attribute__((vector_size(kLane * sizeof(float))));

V8 load8(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The first `count` lanes of v to p: one store when count is 8, else at
// most three of fixed sizes (a loop over count compiled to `rep movs`, whose
// start-up made the input transform 5x slower at 7x7 and 4x4 outputs, where
// every row of tiles is shorter than 8).
void store8(float* p, V8 v, int64_t count) {
  if (count == kLane) {
    std::memcpy(p, &v, sizeof v);
    return;
  }
  float lanes[kLane];
  std::memcpy(lanes, &v, sizeof v);
  int64_t l = 0;
  if (count & 4) std::memcpy(p, lanes, 4 * sizeof(float)), l = 4;
  if (count & 2) std::memcpy(p + l, lanes + l, 2 * sizeof(float)), l += 2;
  if (count & 1) p[l] = lanes[l];
}

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Floats from one transform position's matrix to the next: n and 128 bytes
// more, so the 16 positions of a tile, written and read together, fall in
// different cache sets even when n is a multiple of 4 KiB (which made the
// input transform 4x slower than the output's at 512 channels: 16 streams
// into one set of an 8-way cache).
int64_t spaced(int64_t n) { return round_up(n, 16) + 32; }

struct Tiles {
  int64_t th, tw, per_image;  // tile rows and columns
  int64_t images_per_block;   // ~256 tiles a block
  int64_t half;               // columns of a plane's even (odd) half: every lane's patch inside
};

// How a call spreads over the pool's `threads`: with at least 2 blocks a
// thread, each thread takes whole blocks (no barrier between a block's
// transforms and products; the blocks are made smaller, down to 64 tiles, for
// 4 a thread); with fewer, each block's phases split over the pool. (At 2
// threads, 64 channels at 28x28, split phases ran 1.2x faster than one
// thread, whole blocks 1.8x.)
Tiles tiles_of(const Conv2dGeometry& g, int threads, bool* by_blocks) {
  Tiles t;
  t.th = (g.oh() + 1) / 2, t.tw = (g.ow() + 1) / 2, t.per_image = t.th * t.tw;
  t.images_per_block = std::clamp<int64_t>(256 / t.per_image, 1, g.n);
  t.half = round_up(t.tw, kLane) + 1;
  *by_blocks = threads > 1 && (g.n + t.images_per_block - 1) / t.images_per_block >= 2 * threads;
  if (*by_blocks) {
    const int64_t fewest = (64 + t.per_image - 1) / t.per_image;  // images for 64 tiles
    t.images_per_block = std::min(t.images_per_block, std::max(fewest, g.n / (4 * threads)));
  }
  return t;
}

int64_t blocks_of(const Tiles& t, int64_t n) { return (n + t.images_per_block - 1) / t.images_per_block; }

// fn(part, first block, end block) for `parts` contiguous runs of blocks, over the pool.
template <class Fn>
void for_each_part(int64_t parts, int64_t blocks, Fn&& fn) {
  parallel_for(0, parts, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t part = lo; part < hi; ++part) fn(part, blocks * part / parts, blocks * (part + 1) / parts);
  });
}

float* buffer(Tensor& t, int64_t n) {
  t = Tensor::empty({n + kLane}, DType::f32);  // + a vector: loads of a row's last lanes may read past it
  return t.data<float>();
}

// The swap of positions 0 and 3 on each axis of a tile: U of a filter turned
// 180 degrees is U at these positions.
constexpr int64_t kTurned[kXi] = {15, 13, 14, 12, 7, 5, 6, 4, 11, 9, 10, 8, 3, 1, 2, 0};

// U [16, o, c] from w [o, c, 3, 3]: G w G^T with G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
// 8 filters at a time.
void transform_weights(const Conv2dGeometry& g, const float* w, float* u) {
  const int64_t oc_count = g.o * g.c, plane = spaced(oc_count);
  parallel_for(0, (oc_count + kLane - 1) / kLane, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      const int64_t oc0 = blk * kLane, count = std::min(kLane, oc_count - oc0);
      float k[9][kLane] = {};
      for (int64_t l = 0; l < count; ++l)
        for (int e = 0; e < 9; ++e) k[e][l] = w[(oc0 + l) * 9 + e];
      V8 t[4][3];  // G k
      for (int j = 0; j < 3; ++j) {
        const V8 k0 = load8(k[j]), k1 = load8(k[3 + j]), k2 = load8(k[6 + j]);
        t[0][j] = k0;
        t[1][j] = 0.5f * (k0 + k1 + k2);
        t[2][j] = 0.5f * (k0 - k1 + k2);
        t[3][j] = k2;
      }
      for (int i = 0; i < 4; ++i) {  // (G k) G^T
        float* row = u + (i * 4) * plane + oc0;
        store8(row, t[i][0], count);
        store8(row + plane, 0.5f * (t[i][0] + t[i][1] + t[i][2]), count);
        store8(row + 2 * plane, 0.5f * (t[i][0] - t[i][1] + t[i][2]), count);
        store8(row + 3 * plane, t[i][2], count);
      }
    }
  });
}

// plane [h, w] shifted by (pad_h, pad_w) into zero-padded halves [rows, half]:
// even[r][k] = x[r - pad_h][2k - pad_w], odd[r][k] = x[r - pad_h][2k + 1 - pad_w].
void split_columns(const float* plane, int64_t h, int64_t w, int64_t pad_h, int64_t pad_w, int64_t rows,
                   int64_t half, float* even, float* odd) {
  std::fill(even, even + rows * half, 0.0f);
  std::fill(odd, odd + rows * half, 0.0f);
  // Half-columns k whose source column 2k + parity - pad_w lies in [0, w).
  auto range = [&](int64_t parity, int64_t* lo, int64_t* hi) {
    *lo = std::max<int64_t>(0, (pad_w - parity + 1) / 2);
    const int64_t last = w - 1 + pad_w - parity;  // 2k <= last
    *hi = last < 0 ? *lo : std::max(*lo, std::min<int64_t>(half, last / 2 + 1));
  };
  int64_t elo, ehi, olo, ohi;
  range(0, &elo, &ehi);
  range(1, &olo, &ohi);
  for (int64_t r = std::max<int64_t>(0, pad_h); r < rows && r - pad_h < h; ++r) {
    const float* src = plane + (r - pad_h) * w - pad_w;
    float* e = even + r * half;
    float* o = odd + r * half;
    for (int64_t k = elo; k < ehi; ++k) e[k] = src[2 * k];
    for (int64_t k = olo; k < ohi; ++k) o[k] = src[2 * k + 1];
  }
}

// V [16, c, bp] for the block's images from x [n, c, h, w]: B^T d B,
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
void transform_input(const Conv2dGeometry& g, const Tiles& t, const float* x, int64_t n0, int64_t images,
                     float* v) {
  const int64_t c = g.c, bp = images * t.per_image, rows = 2 * t.th + 2, plane = spaced(c * bp);
  parallel_for(0, images * c, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> halves(static_cast<size_t>(2 * rows * t.half));
    float* even = halves.data();
    float* odd = even + rows * t.half;
    for (int64_t ic = lo; ic < hi; ++ic) {
      const int64_t ii = ic / c, ci = ic % c;
      split_columns(x + ((n0 + ii) * c + ci) * g.h * g.w, g.h, g.w, g.pad_h, g.pad_w, rows, t.half, even, odd);
      float* out = v + ci * bp + ii * t.per_image;
      for (int64_t ty = 0; ty < t.th; ++ty) {
        for (int64_t tx0 = 0; tx0 < t.tw; tx0 += kLane) {
          const int64_t count = std::min(kLane, t.tw - tx0);
          V8 s[4][4];  // B^T d, d[i][j] = the 8 patches' element (i, j)
          V8 d[4][4];
          for (int i = 0; i < 4; ++i) {
            const int64_t at = (2 * ty + i) * t.half + tx0;
            d[i][0] = load8(even + at);
            d[i][1] = load8(odd + at);
            d[i][2] = load8(even + at + 1);
            d[i][3] = load8(odd + at + 1);
          }
          for (int j = 0; j < 4; ++j) {
            s[0][j] = d[0][j] - d[2][j];
            s[1][j] = d[1][j] + d[2][j];
            s[2][j] = d[2][j] - d[1][j];
            s[3][j] = d[1][j] - d[3][j];
          }
          float* o = out + ty * t.tw + tx0;
          for (int i = 0; i < 4; ++i) {  // (B^T d) B
            store8(o + (i * 4 + 0) * plane, s[i][0] - s[i][2], count);
            store8(o + (i * 4 + 1) * plane, s[i][1] + s[i][2], count);
            store8(o + (i * 4 + 2) * plane, s[i][2] - s[i][1], count);
            store8(o + (i * 4 + 3) * plane, s[i][1] - s[i][3], count);
          }
        }
      }
    }
  });
}

// y [n, o, oh, ow] of the block's images from M [16, o, bp]: A^T m A (+ b),
// A^T = [1 1 1 0; 0 1 -1 -1].
void transform_output(const Conv2dGeometry& g, const Tiles& t, const float* m, const float* b, int64_t n0,
                      int64_t images, float* y) {
  const int64_t o = g.o, bp = images * t.per_image, oh = g.oh(), ow = g.ow(), plane = spaced(o * bp);
  parallel_for(0, images * o, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t io = lo; io < hi; ++io) {
      const int64_t ii = io / o, oi = io % o;
      const float bias = b != nullptr ? b[oi] : 0.0f;
      const float* in = m + oi * bp + ii * t.per_image;
      float* out = y + ((n0 + ii) * o + oi) * oh * ow;
      for (int64_t ty = 0; ty < t.th; ++ty) {
        for (int64_t tx0 = 0; tx0 < t.tw; tx0 += kLane) {
          const int64_t count = std::min(kLane, t.tw - tx0);
          const float* q = in + ty * t.tw + tx0;  // lanes past `count` read neighbours, never stored
          V8 s[2][4];  // A^T m
          for (int j = 0; j < 4; ++j) {
            const V8 m0 = load8(q + j * plane), m1 = load8(q + (4 + j) * plane), m2 = load8(q + (8 + j) * plane),
                     m3 = load8(q + (12 + j) * plane);
            s[0][j] = m0 + m1 + m2;
            s[1][j] = m1 - m2 - m3;
          }
          for (int i = 0; i < 2 && 2 * ty + i < oh; ++i) {  // (A^T m) A
            const V8 left = s[i][0] + s[i][1] + s[i][2] + bias, right = s[i][1] - s[i][2] - s[i][3] + bias;
            float* row = out + (2 * ty + i) * ow + 2 * tx0;
            const int64_t cols = std::min(2 * count, ow - 2 * tx0);
            for (int64_t l = 0; l < count; ++l) {
              row[2 * l] = left[l];
              if (2 * l + 1 < cols) row[2 * l + 1] = right[l];
            }
          }
        }
      }
    }
  });
}

// Z [16, o, bp] of the block's images from dy [n, o, oh, ow]: A e A^T for
// each 2x2 tile e of dy (zero past the output), A = [1 0; 1 1; 1 -1; 0 -1].
void transform_output_grad(const Conv2dGeometry& g, const Tiles& t, const float* dy, int64_t n0, int64_t images,
                           float* z) {
  const int64_t o = g.o, bp = images * t.per_image, oh = g.oh(), ow = g.ow(), rows = 2 * t.th, plane = spaced(o * bp);
  parallel_for(0, images * o, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> halves(static_cast<size_t>(2 * rows * t.half));
    float* even = halves.data();
    float* odd = even + rows * t.half;
    for (int64_t io = lo; io < hi; ++io) {
      const int64_t ii = io / o, oi = io % o;
      split_columns(dy + ((n0 + ii) * o + oi) * oh * ow, oh, ow, 0, 0, rows, t.half, even, odd);
      float* out = z + oi * bp + ii * t.per_image;
      for (int64_t ty = 0; ty < t.th; ++ty) {
        for (int64_t tx0 = 0; tx0 < t.tw; tx0 += kLane) {
          const int64_t count = std::min(kLane, t.tw - tx0);
          const int64_t at = 2 * ty * t.half + tx0;
          const V8 e00 = load8(even + at), e01 = load8(odd + at), e10 = load8(even + at + t.half),
                   e11 = load8(odd + at + t.half);
          const V8 a[4][2] = {{e00, e01}, {e00 + e10, e01 + e11}, {e00 - e10, e01 - e11}, {-e10, -e11}};  // A e
          float* q = out + ty * t.tw + tx0;
          for (int i = 0; i < 4; ++i) {  // (A e) A^T
            store8(q + (i * 4 + 0) * plane, a[i][0], count);
            store8(q + (i * 4 + 1) * plane, a[i][0] + a[i][1], count);
            store8(q + (i * 4 + 2) * plane, a[i][0] - a[i][1], count);
            store8(q + (i * 4 + 3) * plane, -a[i][1], count);
          }
        }
      }
    }
  });
}

// dw [o, c, 3, 3] from dU [16, o, c]: G^T du G, 8 filters at a time.
void transform_weight_grad(const Conv2dGeometry& g, const float* du, float* dw) {
  const int64_t oc_count = g.o * g.c, plane = spaced(oc_count);
  parallel_for(0, (oc_count + kLane - 1) / kLane, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      const int64_t oc0 = blk * kLane, count = std::min(kLane, oc_count - oc0);
      V8 u[4][4];
      for (int xi = 0; xi < kXi; ++xi) u[xi / 4][xi % 4] = load8(du + xi * plane + oc0);
      V8 t[3][4];  // G^T u, G^T = [1 .5 .5 0; 0 .5 -.5 0; 0 .5 .5 1]
      for (int j = 0; j < 4; ++j) {
        t[0][j] = u[0][j] + 0.5f * (u[1][j] + u[2][j]);
        t[1][j] = 0.5f * (u[1][j] - u[2][j]);
        t[2][j] = 0.5f * (u[1][j] + u[2][j]) + u[3][j];
      }
      float k[9][kLane];
      for (int i = 0; i < 3; ++i) {  // (G^T u) G
        const V8 k0 = t[i][0] + 0.5f * (t[i][1] + t[i][2]), k1 = 0.5f * (t[i][1] - t[i][2]),
                 k2 = 0.5f * (t[i][1] + t[i][2]) + t[i][3];
        std::memcpy(k[i * 3 + 0], &k0, sizeof k0);
        std::memcpy(k[i * 3 + 1], &k1, sizeof k1);
        std::memcpy(k[i * 3 + 2], &k2, sizeof k2);
      }
      for (int64_t l = 0; l < count; ++l)
        for (int e = 0; e < 9; ++e) dw[(oc0 + l) * 9 + e] = k[e][l];
    }
  });
}

// 16 independent products, one per transform position, over the pool.
template <class Product>
void for_each_position(Product&& product) {
  parallel_for(0, kXi, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t xi = lo; xi < hi; ++xi) product(xi);
  });
}

// y = conv(x) with U of the filters: `turned` false: U [16, o, c] (the
// forward's); true: U [16, c, o] of the filters before turning and swapping
// (backward data's), read transposed at kTurned positions.
void forward_with(const Conv2dGeometry& g, const float* x, const float* u, bool turned, const float* b, float* y) {
  const int threads = num_threads();
  bool by_blocks = false;
  const Tiles t = tiles_of(g, threads, &by_blocks);
  const int64_t bp_max = t.images_per_block * t.per_image, blocks = blocks_of(t, g.n);
  auto run = [&](int64_t first, int64_t end) {
    Tensor vt, mt;
    float* v = buffer(vt, kXi * spaced(g.c * bp_max));
    float* m = buffer(mt, kXi * spaced(g.o * bp_max));
    for (int64_t blk = first; blk < end; ++blk) {
      const int64_t n0 = blk * t.images_per_block;
      const int64_t images = std::min(t.images_per_block, g.n - n0), bp = images * t.per_image;
      transform_input(g, t, x, n0, images, v);
      for_each_position([&](int64_t xi) {
        const float* a = u + (turned ? kTurned[xi] : xi) * spaced(g.o * g.c);
        gemm(turned, false, g.o, bp, g.c, 1.0f, a, turned ? g.o : g.c, v + xi * spaced(g.c * bp), bp, 0.0f,
             m + xi * spaced(g.o * bp), bp, GemmBackend::onednn);
      });
      transform_output(g, t, m, b, n0, images, y);
    }
  };
  if (by_blocks) {
    for_each_part(threads, blocks, [&](int64_t, int64_t first, int64_t end) { run(first, end); });
  } else {
    run(0, blocks);
  }
}

// dU [16, o, c] summed over the blocks [first, end) (written, not added to).
void weight_products(const Conv2dGeometry& g, const Tiles& t, const float* dy, const float* x, int64_t first,
                     int64_t end, float* du) {
  const int64_t bp_max = t.images_per_block * t.per_image;
  Tensor vt, zt;
  float* v = buffer(vt, kXi * spaced(g.c * bp_max));
  float* z = buffer(zt, kXi * spaced(g.o * bp_max));
  for (int64_t blk = first; blk < end; ++blk) {
    const int64_t n0 = blk * t.images_per_block;
    const int64_t images = std::min(t.images_per_block, g.n - n0), bp = images * t.per_image;
    transform_input(g, t, x, n0, images, v);
    transform_output_grad(g, t, dy, n0, images, z);
    const float beta = blk == first ? 0.0f : 1.0f;
    for_each_position([&](int64_t xi) {
      gemm(false, true, g.o, g.c, bp, 1.0f, z + xi * spaced(g.o * bp), bp, v + xi * spaced(g.c * bp), bp, beta,
           du + xi * spaced(g.o * g.c), g.c, GemmBackend::onednn);
    });
  }
}

}  // namespace

bool applies(const Conv2dGeometry& g) {
  return g.kh == 3 && g.kw == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dil_h == 1 && g.dil_w == 1 &&
         g.groups == 1 && g.pad_h >= 0 && g.pad_h <= 2 && g.pad_w >= 0 && g.pad_w <= 2 && g.oh() > 0 && g.ow() > 0;
}

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y) {
  Tensor ut;
  float* u = buffer(ut, kXi * spaced(g.o * g.c));
  transform_weights(g, w, u);
  forward_with(g, x, u, /*turned=*/false, b, y);
}

void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx) {
  // dx = the forward over dy [n, o, oh, ow] with the filters w[o, c] turned
  // and transposed to [c, o], padded 2 - p: its output is [n, c, h, w].
  Tensor ut;
  float* u = buffer(ut, kXi * spaced(g.o * g.c));
  transform_weights(g, w, u);
  Conv2dGeometry t = g;
  t.c = g.o, t.h = g.oh(), t.w = g.ow(), t.o = g.c, t.pad_h = 2 - g.pad_h, t.pad_w = 2 - g.pad_w;
  forward_with(t, dy, u, /*turned=*/true, nullptr, dx);
}

void backward_weights(const Conv2dGeometry& g, const float* dy, const float* x, float* dw, float* db) {
  const int threads = num_threads();
  bool by_blocks = false;
  const Tiles t = tiles_of(g, threads, &by_blocks);
  const int64_t blocks = blocks_of(t, g.n), size = kXi * spaced(g.o * g.c);
  Tensor ut;
  float* du = buffer(ut, size);
  if (by_blocks) {
    // Each thread sums its blocks into its own dU, then the parts are added.
    Tensor partt;
    float* parts = buffer(partt, (threads - 1) * size);
    for_each_part(threads, blocks, [&](int64_t part, int64_t first, int64_t end) {
      weight_products(g, t, dy, x, first, end, part == 0 ? du : parts + (part - 1) * size);
    });
    parallel_for(0, size, 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t part = 1; part < threads; ++part) {
        const float* p = parts + (part - 1) * size;
        for (int64_t i = lo; i < hi; ++i) du[i] += p[i];
      }
    });
  } else {
    weight_products(g, t, dy, x, 0, blocks, du);
  }
  transform_weight_grad(g, du, dw);
  if (db != nullptr) {
    const int64_t plane = g.oh() * g.ow();
    parallel_for(0, g.o, 16, [&](int64_t lo, int64_t hi) {
      for (int64_t oi = lo; oi < hi; ++oi) {
        double s = 0;
        for (int64_t ni = 0; ni < g.n; ++ni) {
          const float* q = dy + (ni * g.o + oi) * plane;
          for (int64_t k = 0; k < plane; ++k) s += q[k];
        }
        db[oi] = static_cast<float>(s);
      }
    });
  }
}

}  // namespace braid::cpu::winograd
