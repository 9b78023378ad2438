/* sdc's hand-written CPU convolutions over channels-last (NHWC) float32 tensors.
 *
 * The runtime compiles this file once per host (sdc/runtime/c_conv.py, through the cache of
 * launch/c.py's build_library) and calls it for the convolutions oneDNN runs far from the machine's
 * peak: grouped ones (ShuffleNet's 1x1 convolutions of 4 groups) and depthwise ones (MobileNet's),
 * ungrouped ones of few input channels (an image's first, as one group whose tiles gather their windows:
 * gather_windows), and small ones whose windows tile the image (a vision transformer's patch embedding); besides them, max and average pooling and the channel shuffle of channels-last tensors.
 * Each thread allocates only a zeroed row and pointer lists it frees; a function returns 0, or 1 when
 * those could not be allocated (the caller then runs oneDNN).
 *
 * Tensors (dense, in these dim orders):
 *   x    [N][H][W][G*CI]             the input as it lies in channels-last memory
 *   y    [N][OH][OW][G*CO]           the result, same order
 *   res  [N][OH][OW][G*CO] or NULL   added to the result (a residual add merged into the convolution)
 *   bias [G*CO] or NULL
 * grouped:   w [G][chunk][KH][KW][CI][CW]  COP = CO rounded up to whole vectors, zeros past CO, cut into
 *            chunks of CW = sdc_conv_chunk_columns() columns (the last one narrower): a tile reads one
 *            chunk, which lies in one run of memory (the weight of a convolution of few pixels streams)
 * depthwise: w [KH][KW][C]           (CI = CO = 1, G = C)
 * The exception: a convolution whose windows tile the image (`sdc_conv_patches_f32`) reads an NCHW
 * image and writes an NCHW result, its sizes and weight as that function says.
 *
 * `q` holds the sizes: N H W G CI CO COP KH KW SH SW PT PL DH DW OH OW (the input's, the groups and
 * channels per group, the kernel, strides, the top and left pads, dilations, the result's), then the
 * threads to split the result's pixels over (OpenMP's, where the library was built with it). A tap
 * that falls on the padding reads a row of zeros. `act` is the unary op applied last:
 * [kind, lo, hi, alpha, beta] with kind 0 none, 1 relu, 2 clip to [lo, hi], 3 hard_swish,
 * 4 hard_sigmoid (clip(alpha * v + beta, 0, 1)). NaN stays NaN through each, as in torch.
 *
 * Sums run over the taps then the input channels, in float, one fused multiply-add each where the
 * target has them (-march=native).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_thread_num(void) { return 0; }
static int omp_get_num_threads(void) { return 1; }
#endif

/* `acc += x * w` as one fused multiply-add: ISO C modes (-std=c11) leave contraction off */
#pragma GCC optimize("fp-contract=fast")

#if defined(__AVX512F__)
#define LANES 16
#define MAX_VECTORS 4 /* 6 x 4 accumulators of the 32 vector registers */
#else
#define LANES 8
#define MAX_VECTORS 2 /* 6 x 2 of the 16 */
#endif
#define ROWS 6 /* output pixels per tile of a grouped convolution */
#define DW_PIXELS 8 /* output pixels per tile of a depthwise convolution */
#define GATHER_MAX_CHANNELS 8 /* a grouped convolution of fewer input channels a group gathers its windows */

typedef float vf __attribute__((vector_size(LANES * 4)));
typedef int32_t vi __attribute__((vector_size(LANES * 4)));

static inline vf ld(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void st(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline vf splat(float s) {
  vf v = {0};
  for (int i = 0; i < LANES; ++i) v[i] = s;
  return v;
}
static inline vf pick(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); } /* m ? a : b */

enum { ACT_NONE = 0, ACT_RELU = 1, ACT_CLIP = 2, ACT_HARD_SWISH = 3, ACT_HARD_SIGMOID = 4 };

typedef struct { int kind; float lo, hi, alpha, beta; } act_t;

static inline act_t read_act(const float *a) {
  act_t out = {(int)a[0], a[1], a[2], a[3], a[4]};
  return out;
}

static inline vf clamp(vf v, float lo, float hi) {
  v = pick(v < splat(lo), splat(lo), v);
  return pick(v > splat(hi), splat(hi), v);
}

static inline vf activate(vf v, const act_t *a) {
  switch (a->kind) {
  case ACT_RELU: return pick(v < splat(0.0f), splat(0.0f), v);
  case ACT_CLIP: return clamp(v, a->lo, a->hi);
  case ACT_HARD_SWISH: return v * clamp(v + 3.0f, 0.0f, 6.0f) / 6.0f;
  case ACT_HARD_SIGMOID: return clamp(v * a->alpha + a->beta, 0.0f, 1.0f);
  default: return v;
  }
}

/* The first `n` < LANES lanes of a vector at p (the rest read as zero), and stored at p. */
static inline vf ld_n(const float *p, int64_t n) {
#if defined(__AVX512F__)
  return (vf)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
#elif defined(__AVX2__)
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return (vf)_mm256_maskload_ps(p, mask);
#else
  vf v = splat(0.0f);
  for (int64_t i = 0; i < n; ++i) v[i] = p[i];
  return v;
#endif
}

static inline void st_n(float *p, vf v, int64_t n) {
#if defined(__AVX512F__)
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)v);
#elif defined(__AVX2__)
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps(p, mask, (__m256)v);
#else
  for (int64_t i = 0; i < n; ++i) p[i] = v[i];
#endif
}

/* One result vector of `n` channels (all LANES where n >= LANES): + bias, + res, the unary op, stored. */
static inline void finish(vf v, float *y, const float *bias, const float *res, int64_t n, const act_t *a) {
  if (n >= LANES) {
    if (bias) v += ld(bias);
    if (res) v += ld(res);
    st(y, activate(v, a));
    return;
  }
  if (bias) v += ld_n(bias, n);
  if (res) v += ld_n(res, n);
  st_n(y, activate(v, a), n);
}

/* ---------------------------------------------------------------- grouped convolution */

/* A tile of ROWS output pixels x V vectors of output channels of one group: for each tap t and input
 * channel c, acc[r][v] += x_t,r[c] * w_t[c][v]. `xs[t * ROWS + r]` is row r's input pixel at tap t
 * (the group's first channel, or the zero row), `ws[t]` the tap's weights at the tile's first
 * column; `ys[r]` row r's result (the group's column), NULL past the image's edge. */
#define DEFINE_TILE(V)                                                                                  \
  static void tile_##V(const float *const *xs, const float *const *ws, int64_t taps, int64_t ci,     \
                       int64_t cop, float *const *ys, const float *const *rs, const float *bias,      \
                       int64_t cols, const act_t *a) {                                                 \
    vf acc[ROWS][V];                                                                                   \
    _Pragma("GCC unroll 8") for (int r = 0; r < ROWS; ++r)                                             \
      _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) acc[r][v] = splat(0.0f);                    \
    for (int64_t t = 0; t < taps; ++t) {                                                               \
      const float *x0 = xs[t * ROWS + 0], *x1 = xs[t * ROWS + 1], *x2 = xs[t * ROWS + 2];              \
      const float *x3 = xs[t * ROWS + 3], *x4 = xs[t * ROWS + 4], *x5 = xs[t * ROWS + 5];              \
      const float *w = ws[t];                                                                          \
      for (int64_t c = 0; c < ci; ++c, w += cop) {                                                     \
        vf wv[V];                                                                                      \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) wv[v] = ld(w + v * LANES);                \
        const vf b0 = splat(x0[c]), b1 = splat(x1[c]), b2 = splat(x2[c]);                              \
        const vf b3 = splat(x3[c]), b4 = splat(x4[c]), b5 = splat(x5[c]);                              \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) {                                          \
          acc[0][v] += b0 * wv[v]; acc[1][v] += b1 * wv[v]; acc[2][v] += b2 * wv[v];                   \
          acc[3][v] += b3 * wv[v]; acc[4][v] += b4 * wv[v]; acc[5][v] += b5 * wv[v];                   \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
    _Pragma("GCC unroll 8") for (int r = 0; r < ROWS; ++r) {                                           \
      if (!ys[r]) continue;                                                                            \
      _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) {                                            \
        const int64_t col = (int64_t)v * LANES;                                                        \
        if (col >= cols) break;                                                                        \
        finish(acc[r][v], ys[r] + col, bias ? bias + col : NULL, rs[r] ? rs[r] + col : NULL,           \
               cols - col, a);                                                                         \
      }                                                                                                \
    }                                                                                                  \
  }

DEFINE_TILE(1)
DEFINE_TILE(2)
#if MAX_VECTORS >= 4
DEFINE_TILE(3)
DEFINE_TILE(4)
#endif

typedef void (*tile_fn)(const float *const *, const float *const *, int64_t, int64_t, int64_t, float *const *,
                        const float *const *, const float *, int64_t, const act_t *);

#if LANES == 16 && defined(__AVX512VL__)
/* A tile whose last columns (at most 8) take a half vector: 256-bit multiply-adds cost half of
 * 512-bit ones, so ShuffleNet's 34 columns a group are 2.5 vectors of work, not 3. */
#define HALF_TAIL 1
typedef float vh __attribute__((vector_size(32)));

static inline vh ldh(const float *p) { vh v; memcpy(&v, p, sizeof v); return v; }
static inline vh splath(float s) {
  vh v = {0};
  for (int i = 0; i < 8; ++i) v[i] = s;
  return v;
}

/* The last `n` <= 8 columns of a row: + bias, + res, the unary op, stored (masked where n < 8). */
static inline void finish_half(vh v, float *y, const float *bias, const float *res, int64_t n, const act_t *a) {
  const __mmask8 m = (__mmask8)((1u << n) - 1);
  if (bias) v += (vh)_mm256_maskz_loadu_ps(m, bias);
  if (res) v += (vh)_mm256_maskz_loadu_ps(m, res);
  float t[LANES] = {0};
  memcpy(t, &v, sizeof v);
  const vf out = activate(ld(t), a);
  _mm256_mask_storeu_ps(y, m, _mm512_castps512_ps256((__m512)out));
}

#define DEFINE_HALF_TILE(V)                                                                             \
  static void tile_##V##h(const float *const *xs, const float *const *ws, int64_t taps, int64_t ci,  \
                          int64_t cop, float *const *ys, const float *const *rs, const float *bias,    \
                          int64_t cols, const act_t *a) {                                              \
    vf acc[ROWS][V + 1];                                                                               \
    vh half[ROWS];                                                                                     \
    _Pragma("GCC unroll 8") for (int r = 0; r < ROWS; ++r) {                                           \
      _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) acc[r][v] = splat(0.0f);                    \
      half[r] = splath(0.0f);                                                                          \
    }                                                                                                  \
    for (int64_t t = 0; t < taps; ++t) {                                                               \
      const float *x0 = xs[t * ROWS + 0], *x1 = xs[t * ROWS + 1], *x2 = xs[t * ROWS + 2];              \
      const float *x3 = xs[t * ROWS + 3], *x4 = xs[t * ROWS + 4], *x5 = xs[t * ROWS + 5];              \
      const float *w = ws[t];                                                                          \
      for (int64_t c = 0; c < ci; ++c, w += cop) {                                                     \
        vf wv[V + 1];                                                                                  \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) wv[v] = ld(w + v * LANES);                \
        const vh wh = ldh(w + V * LANES);                                                              \
        const float b[ROWS] = {x0[c], x1[c], x2[c], x3[c], x4[c], x5[c]};                              \
        _Pragma("GCC unroll 8") for (int r = 0; r < ROWS; ++r) {                                       \
          const vf bv = splat(b[r]);                                                                   \
          _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) acc[r][v] += bv * wv[v];                \
          half[r] += (vh)_mm512_castps512_ps256((__m512)bv) * wh; /* (one broadcast, from memory) */  \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
    _Pragma("GCC unroll 8") for (int r = 0; r < ROWS; ++r) {                                           \
      if (!ys[r]) continue;                                                                            \
      _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v)                                              \
        finish(acc[r][v], ys[r] + v * LANES, bias ? bias + v * LANES : NULL,                           \
               rs[r] ? rs[r] + v * LANES : NULL, LANES, a);                                            \
      const int64_t col = (int64_t)V * LANES;                                                          \
      finish_half(half[r], ys[r] + col, bias ? bias + col : NULL, rs[r] ? rs[r] + col : NULL,          \
                  cols - col, a);                                                                      \
    }                                                                                                  \
  }

DEFINE_HALF_TILE(0)
DEFINE_HALF_TILE(1)
DEFINE_HALF_TILE(2)
DEFINE_HALF_TILE(3)
#endif

/* The input pointers of the tile of ROWS consecutive result pixels from `p0` (of the flattened
 * (n, oh, ow), so a tile may span rows and images): base[t * ROWS + r] is pixel r's input pixel at
 * tap t, or NULL where it falls on the padding or past the last pixel; taps[t] the tap (kh * KW + kw);
 * pixel[r] the result pixel, -1 past the last. Taps that every pixel reads as padding are left out.
 * Returns the number of taps. */
static int64_t tile_inputs(const float *x, const int64_t *q, int64_t cin, int64_t p0, const float **base,
                           int64_t *taps, int64_t *pixel) {
  const int64_t N = q[0], H = q[1], W = q[2], KH = q[7], KW = q[8];
  const int64_t SH = q[9], SW = q[10], PT = q[11], PL = q[12], DH = q[13], DW = q[14], OH = q[15], OW = q[16];
  const int64_t total = N * OH * OW;
  if (KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 && OH == H && OW == W) {
    /* 1x1, stride 1, no pads: output pixel p reads input pixel p */
    for (int r = 0; r < ROWS; ++r) {
      pixel[r] = p0 + r < total ? p0 + r : -1;
      base[r] = pixel[r] >= 0 ? x + pixel[r] * cin : NULL;
    }
    taps[0] = 0;
    return 1;
  }
  /* the rows' (n, oh, ow): divisions for the first pixel only, then stepped (a tile's setup was up to
   * five times its multiply-adds on a 16 -> 16 channel convolution) */
  int64_t n[ROWS], oh[ROWS], ow[ROWS];
  int64_t cn = p0 / (OH * OW), coh = p0 / OW % OH, cow = p0 % OW;
  for (int r = 0; r < ROWS; ++r) {
    pixel[r] = p0 + r < total ? p0 + r : -1;
    n[r] = pixel[r] < 0 ? -1 : cn;
    oh[r] = coh;
    ow[r] = cow;
    if (++cow == OW) {
      cow = 0;
      if (++coh == OH) {
        coh = 0;
        ++cn;
      }
    }
  }
  int64_t used = 0;
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) {
      int any = 0;
      for (int r = 0; r < ROWS; ++r) {
        const int64_t ih = oh[r] * SH - PT + kh * DH, iw = ow[r] * SW - PL + kw * DW;
        const int inside = n[r] >= 0 && ih >= 0 && ih < H && iw >= 0 && iw < W;
        base[used * ROWS + r] = inside ? x + ((n[r] * H + ih) * W + iw) * cin : NULL;
        any |= inside;
      }
      if (any) taps[used++] = kh * KW + kw;
    }
  return used;
}

/* `n` floats from s to d (few: one window row of a small-channel convolution), or zeros where s is NULL */
static inline void copy_few(float *d, const float *s, int64_t n) {
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES) st(d + i, s ? ld(s + i) : splat(0.0f));
  if (i < n) st_n(d + i, s ? ld_n(s + i, n - i) : splat(0.0f), n - i);
}

/* The windows of the ROWS output pixels from p0 of group g, each as one row of KH * KW * CI values
 * ([kh][kw][ci], the weight's order) in `patch`: zeros on the padding and for rows past the result's
 * end. A window row of an ungrouped convolution without dilation lies in one run of the input. */
static void gather_windows(const float *x, const int64_t *q, int64_t cin, int64_t g, int64_t p0, float *patch) {
  const int64_t N = q[0], H = q[1], W = q[2], CI = q[4], KH = q[7], KW = q[8];
  const int64_t SH = q[9], SW = q[10], PT = q[11], PL = q[12], DH = q[13], DW = q[14], OH = q[15], OW = q[16];
  const int64_t K = KH * KW * CI, total = N * OH * OW;
  int64_t n = p0 / (OH * OW), oh = p0 / OW % OH, ow = p0 % OW;
  for (int r = 0; r < ROWS; ++r) {
    float *row = patch + r * K;
    if (p0 + r >= total) {
      copy_few(row, NULL, K);
      continue;
    }
    const int64_t iw0 = ow * SW - PL;
    const int whole = cin == CI && DW == 1 && iw0 >= 0 && iw0 + KW <= W;
    for (int64_t kh = 0; kh < KH; ++kh, row += KW * CI) {
      const int64_t ih = oh * SH - PT + kh * DH;
      const float *line = ih >= 0 && ih < H ? x + (n * H + ih) * W * cin + g * CI : NULL;
      if (!line || whole) {
        copy_few(row, line ? line + iw0 * cin : NULL, KW * CI);
        continue;
      }
      for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t iw = iw0 + kw * DW;
        copy_few(row + kw * CI, iw >= 0 && iw < W ? line + iw * cin : NULL, CI);
      }
    }
    if (++ow == OW) {
      ow = 0;
      if (++oh == OH) {
        oh = 0;
        ++n;
      }
    }
  }
}

/* Items [item0, item1) of a grouped convolution's result: item i is tile i / (G * chunks) (the ROWS
 * pixels from there of the flattened (n, oh, ow), so no tile is cut short at a row's end: a 13-pixel
 * row took three tiles of 6), then its group and its chunk of MAX_VECTORS vectors of columns. Threads
 * split the items, so a result of few pixels (a squeeze-excite block's 1x1 convolutions: one tile)
 * still splits its columns, which stream the weight, over them. */
static int64_t grouped_items(const int64_t *q) {
  const int64_t chunks = (q[5] + MAX_VECTORS * LANES - 1) / (MAX_VECTORS * LANES);
  return (q[0] * q[15] * q[16] + ROWS - 1) / ROWS * q[3] * chunks;
}

static int grouped_tiles(const float *x, const float *w, const float *bias, const float *res, float *y,
                         const int64_t *q, const act_t *a, int64_t item0, int64_t item1) {
  const int64_t G = q[3], CI = q[4], CO = q[5], COP = q[6], KH = q[7], KW = q[8];
  const int64_t cin = G * CI, cout = G * CO;
  const int64_t chunks = (CO + MAX_VECTORS * LANES - 1) / (MAX_VECTORS * LANES);
#if MAX_VECTORS >= 4
  static const tile_fn tiles[] = {NULL, tile_1, tile_2, tile_3, tile_4};
#else
  static const tile_fn tiles[] = {NULL, tile_1, tile_2};
#endif
  float *zeros = calloc((size_t)(CI > 0 ? CI : 1), sizeof(float));
  const float **base = malloc(sizeof(float *) * (size_t)(KH * KW * ROWS + 1));
  const float **xs = malloc(sizeof(float *) * (size_t)(KH * KW * ROWS + 1));
  const float **ws = malloc(sizeof(float *) * (size_t)(KH * KW + 1));
  int64_t *taps = malloc(sizeof(int64_t) * (size_t)(KH * KW + 1));
  /* few input channels a tap (an image's first convolution: 3): a tile's windows are copied into
   * rows of KH * KW * CI values, one sum over them, not KH * KW short sums (GATHER_MAX_CHANNELS) */
  const int64_t K = KH * KW * CI, total = q[0] * q[15] * q[16];
  const int gathers = CI < GATHER_MAX_CHANNELS && KH * KW > 1;
  float *patch = gathers ? malloc(sizeof(float) * (size_t)(ROWS * K)) : NULL;
  if (!zeros || !base || !xs || !ws || !taps || (gathers && !patch)) {
    free(zeros); free(base); free(xs); free(ws); free(taps); free(patch);
    return 1;
  }

  int64_t pixel[ROWS], used = 0, tile_at = -1, group_at = -1;
  /* item = (tile * G + g) * chunks + k, stepped without a division per item */
  int64_t tile = item0 / (G * chunks), g = item0 / chunks % G, k = item0 % chunks;
  for (int64_t item = item0; item < item1; ++item) {
    const int64_t c0 = k * (MAX_VECTORS * LANES);
    if (tile != tile_at && gathers) { /* (its windows are gathered per group, below) */
      for (int r = 0; r < ROWS; ++r) pixel[r] = tile * ROWS + r < total ? tile * ROWS + r : -1;
      tile_at = tile;
      group_at = -1;
    } else if (tile != tile_at) {
      used = tile_inputs(x, q, cin, tile * ROWS, base, taps, pixel);
      tile_at = tile;
      group_at = -1;
    }
    if (g != group_at) {
      for (int64_t t = 0; t < used; ++t)
        for (int r = 0; r < ROWS; ++r) xs[t * ROWS + r] = base[t * ROWS + r] ? base[t * ROWS + r] + g * CI : zeros;
      group_at = g;
      if (patch) gather_windows(x, q, cin, g, tile * ROWS, patch);
    }
    const int64_t cw = COP - c0 < MAX_VECTORS * LANES ? COP - c0 : MAX_VECTORS * LANES;
    const float *chunk = w + g * K * COP + c0 * K;
    const float *const *xs_run = xs;
    const float *rows_of_patch[ROWS];
    int64_t taps_run = used, ci_run = CI;
    if (patch) {
      for (int r = 0; r < ROWS; ++r) rows_of_patch[r] = patch + r * K;
      xs_run = rows_of_patch;
      ws[0] = chunk; /* the taps' weights follow one another: [KH][KW][CI][cw] */
      taps_run = 1;
      ci_run = K;
    } else {
      for (int64_t t = 0; t < used; ++t) ws[t] = chunk + taps[t] * CI * cw;
    }
    const int64_t cols = CO - c0 < MAX_VECTORS * LANES ? CO - c0 : MAX_VECTORS * LANES;
    float *ys[ROWS];
    const float *rs[ROWS];
    for (int r = 0; r < ROWS; ++r) {
      const int64_t off = pixel[r] * cout + g * CO + c0;
      ys[r] = pixel[r] >= 0 ? y + off : NULL;
      rs[r] = pixel[r] >= 0 && res ? res + off : NULL;
    }
    tile_fn tile_run = tiles[(cols + LANES - 1) / LANES];
#ifdef HALF_TAIL
    static const tile_fn half_tiles[] = {tile_0h, tile_1h, tile_2h, tile_3h};
    if (cols % LANES && cols % LANES <= 8) tile_run = half_tiles[cols / LANES];
#endif
    tile_run(xs_run, ws, taps_run, ci_run, cw, ys, rs, bias ? bias + g * CO + c0 : NULL, cols, a);
    if (++k == chunks) {
      k = 0;
      if (++g == G) {
        g = 0;
        ++tile;
      }
    }
  }
  free(zeros); free(base); free(xs); free(ws); free(taps); free(patch);
  return 0;
}

/* The result's `items` tiles split evenly over `threads_of` threads (one: no parallel region). */
#define OVER_TILES(tiles_fn, items_of, threads_of)                                                      \
  const act_t a = read_act(act);                                                                       \
  const int64_t items = (items_of);                                                                    \
  const int threads = (threads_of) > 1 ? (int)(threads_of) : 1;                                       \
  if (threads == 1) return tiles_fn(x, w, bias, res, y, q, &a, 0, items);                             \
  int failed = 0;                                                                                      \
  _Pragma("omp parallel num_threads(threads) reduction(|: failed)")                                    \
  {                                                                                                    \
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();                                \
    failed |= tiles_fn(x, w, bias, res, y, q, &a, items * t / nt, items * (t + 1) / nt);               \
  }                                                                                                    \
  return failed;

/* The columns of a grouped weight's chunks (the layout above), for the caller that packs it. */
int sdc_conv_chunk_columns(void) { return MAX_VECTORS * LANES; }

int sdc_conv_grouped_f32(const float *x, const float *w, const float *bias, const float *res, float *y,
                         const int64_t *q, const float *act) {
  OVER_TILES(grouped_tiles, grouped_items(q), q[17])
}

/* ---------------------------------------------------------------- depthwise convolution */

/* DW_PIXELS output pixels of one row x V vectors of channels from c, in runs of DW_PIXELS / V pixels
 * (8 accumulators at a time, enough to keep both FMA units busy): per tap, one load of the weights
 * serves the run. `xs[t * DW_PIXELS + p]` is pixel p's input at tap t (its first channel, or the
 * zero row), `ws[t]` the tap's weights. */
#define DEFINE_DW_TILE(V)                                                                               \
  static void dw_tile_##V(const float *const *xs, const float *const *ws, int64_t taps, int64_t c,    \
                          float *const *ys, const float *const *rs, const float *bias, int64_t cols,   \
                          const act_t *a) {                                                            \
    enum { RUN = DW_PIXELS / V };                                                                      \
    for (int p0 = 0; p0 < DW_PIXELS; p0 += RUN) {                                                      \
      vf acc[RUN][V];                                                                                  \
      _Pragma("GCC unroll 8") for (int p = 0; p < RUN; ++p)                                            \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) acc[p][v] = splat(0.0f);                  \
      for (int64_t t = 0; t < taps; ++t) {                                                             \
        vf wv[V];                                                                                      \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) wv[v] = ld(ws[t] + c + v * LANES);        \
        _Pragma("GCC unroll 8") for (int p = 0; p < RUN; ++p) {                                        \
          const float *xp = xs[t * DW_PIXELS + p0 + p] + c;                                            \
          _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) acc[p][v] += ld(xp + v * LANES) * wv[v];\
        }                                                                                              \
      }                                                                                                \
      _Pragma("GCC unroll 8") for (int p = 0; p < RUN; ++p) {                                          \
        if (!ys[p0 + p]) continue;                                                                     \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; ++v) {                                          \
          const int64_t col = c + (int64_t)v * LANES;                                                  \
          finish(acc[p][v], ys[p0 + p] + col, bias ? bias + col : NULL,                                \
                 rs[p0 + p] ? rs[p0 + p] + col : NULL, cols - col, a);                                 \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
  }

DEFINE_DW_TILE(1)
DEFINE_DW_TILE(2)
DEFINE_DW_TILE(4)

/* Tiles [item0, item1) of a depthwise convolution's result: tile i is DW_PIXELS pixels from ow0 = i %
 * per_row * DW_PIXELS of row i / per_row of the flattened (n, oh). Per row, not across rows as a
 * grouped convolution's: its work per pixel is small, and a tile within a row shares its input rows,
 * so its pointers cost a few additions (across rows they made a 16-channel 3x3 convolution 4x slower). */
static int depthwise_tiles(const float *x, const float *w, const float *bias, const float *res, float *y,
                           const int64_t *q, const act_t *a, int64_t item0, int64_t item1) {
  const int64_t H = q[1], W = q[2], C = q[3], KH = q[7], KW = q[8];
  const int64_t SH = q[9], SW = q[10], PT = q[11], PL = q[12], DH = q[13], DW = q[14], OH = q[15], OW = q[16];
  const int64_t full = C / LANES * LANES; /* channels in whole vectors; the rest in one masked vector */
  float *zeros = calloc((size_t)(C > 0 ? C : 1), sizeof(float));
  const float **xs = malloc(sizeof(float *) * (size_t)(KH * KW * DW_PIXELS + 1));
  const float **ws = malloc(sizeof(float *) * (size_t)(KH * KW + 1));
  if (!zeros || !xs || !ws) {
    free(zeros); free(xs); free(ws);
    return 1;
  }
  const int64_t per_row = (OW + DW_PIXELS - 1) / DW_PIXELS;
  for (int64_t item = item0; item < item1; ++item) {
    const int64_t row = item / per_row, n = row / OH, oh = row % OH, ow0 = item % per_row * DW_PIXELS;
    float *ys[DW_PIXELS];
    const float *rs[DW_PIXELS];
    for (int p = 0; p < DW_PIXELS; ++p) {
      const int64_t off = (row * OW + ow0 + p) * C;
      ys[p] = ow0 + p < OW ? y + off : NULL;
      rs[p] = ow0 + p < OW && res ? res + off : NULL;
    }
    int64_t taps = 0;
    for (int64_t kh = 0; kh < KH; ++kh) {
      const int64_t ih = oh * SH - PT + kh * DH;
      if (ih < 0 || ih >= H) continue;
      for (int64_t kw = 0; kw < KW; ++kw) {
        for (int p = 0; p < DW_PIXELS; ++p) {
          const int64_t iw = (ow0 + p) * SW - PL + kw * DW;
          xs[taps * DW_PIXELS + p] = (ow0 + p < OW && iw >= 0 && iw < W) ? x + ((n * H + ih) * W + iw) * C : zeros;
        }
        ws[taps++] = w + (kh * KW + kw) * C;
      }
    }
    int64_t c = 0;
    for (; c + 4 * LANES <= full; c += 4 * LANES) dw_tile_4(xs, ws, taps, c, ys, rs, bias, C, a);
    for (; c + 2 * LANES <= full; c += 2 * LANES) dw_tile_2(xs, ws, taps, c, ys, rs, bias, C, a);
    for (; c < full; c += LANES) dw_tile_1(xs, ws, taps, c, ys, rs, bias, C, a);
    if (c < C) { /* the channels past the last whole vector */
      const int64_t rest = C - c;
      vf acc[DW_PIXELS];
      for (int p = 0; p < DW_PIXELS; ++p) acc[p] = splat(0.0f);
      for (int64_t t = 0; t < taps; ++t) {
        const vf wv = ld_n(ws[t] + c, rest);
        for (int p = 0; p < DW_PIXELS; ++p) acc[p] += ld_n(xs[t * DW_PIXELS + p] + c, rest) * wv;
      }
      for (int p = 0; p < DW_PIXELS; ++p)
        if (ys[p]) finish(acc[p], ys[p] + c, bias ? bias + c : NULL, rs[p] ? rs[p] + c : NULL, rest, a);
    }
  }
  free(zeros); free(xs); free(ws);
  return 0;
}

/* One result row of a 3x3 depthwise convolution for the channels [c, c + lanes): `rows` the three
 * input rows (NULL: on the padding), `wv` the taps' weights. Inlined with `whole` (lanes = LANES)
 * and `all_rows` constant, so the loop has no tests but the window's. */
static inline __attribute__((always_inline)) void dw3_sweep(const float *const *rows, const vf *wv, float *yrow,
                                                            const float *rrow, const float *bias, int64_t c,
                                                            int64_t lanes, const int64_t *q, int64_t lo, int64_t hi,
                                                            const act_t *a, const int whole, const int all_rows) {
  const int64_t W = q[2], C = q[3], SW = q[10], PL = q[12], OW = q[16];
#define DW3_LOAD(p) (whole ? ld(p) : ld_n(p, lanes))
#define DW3_TAP(kh, kw) \
  if (all_rows || rows[kh]) acc += DW3_LOAD(rows[kh] + (iw + (kw)) * C + c) * wv[(kh) * 3 + (kw)];
  const vf start = bias ? DW3_LOAD(bias + c) : splat(0.0f);
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int64_t iw = ow * SW - PL;
    vf acc = start;
    if (ow >= lo && ow < hi) {
      DW3_TAP(0, 0) DW3_TAP(0, 1) DW3_TAP(0, 2)
      DW3_TAP(1, 0) DW3_TAP(1, 1) DW3_TAP(1, 2)
      DW3_TAP(2, 0) DW3_TAP(2, 1) DW3_TAP(2, 2)
    } else if (iw == -1 && W >= 2) { /* the left edge: the first column on the padding */
      DW3_TAP(0, 1) DW3_TAP(0, 2) DW3_TAP(1, 1) DW3_TAP(1, 2) DW3_TAP(2, 1) DW3_TAP(2, 2)
    } else if (iw >= 0 && iw + 2 == W) { /* the right edge: the last column past the row */
      DW3_TAP(0, 0) DW3_TAP(0, 1) DW3_TAP(1, 0) DW3_TAP(1, 1) DW3_TAP(2, 0) DW3_TAP(2, 1)
    } else {
      for (int kw = 0; kw < 3; ++kw) {
        if (iw + kw < 0 || iw + kw >= W) continue;
        for (int kh = 0; kh < 3; ++kh)
          if (rows[kh]) acc += DW3_LOAD(rows[kh] + (iw + kw) * C + c) * wv[kh * 3 + kw];
      }
    }
    finish(acc, yrow + ow * C + c, NULL, rrow ? rrow + ow * C + c : NULL, whole ? LANES : lanes, a);
  }
#undef DW3_TAP
#undef DW3_LOAD
}

/* Result rows [item0, item1) (of the flattened (n, oh)) of a 3x3 depthwise convolution without
 * dilation: per row and vector of channels, the 9 taps' weights stay in registers while the row's
 * pixels are swept, each pixel one load per multiply-add and no pointer tables; the pixels whose
 * windows lie inside the row (`lo` <= ow < `hi`) take no column checks. */
static int depthwise3_rows(const float *x, const float *w, const float *bias, const float *res, float *y,
                           const int64_t *q, const act_t *a, int64_t item0, int64_t item1) {
  const int64_t H = q[1], W = q[2], C = q[3];
  const int64_t SH = q[9], SW = q[10], PT = q[11], PL = q[12], OH = q[15], OW = q[16];
  int64_t lo = (PL + SW - 1) / SW, hi = W - 3 + PL >= 0 ? (W - 3 + PL) / SW + 1 : 0;
  if (hi > OW) hi = OW;
  if (lo > hi) lo = hi;
  for (int64_t item = item0; item < item1; ++item) {
    const int64_t n = item / OH, oh = item % OH;
    const float *rows[3];
    for (int kh = 0; kh < 3; ++kh) {
      const int64_t ih = oh * SH - PT + kh;
      rows[kh] = ih >= 0 && ih < H ? x + (n * H + ih) * W * C : NULL;
    }
    const int all_rows = rows[0] && rows[1] && rows[2];
    float *yrow = y + item * OW * C;
    const float *rrow = res ? res + item * OW * C : NULL;
    for (int64_t c = 0; c < C; c += LANES) {
      const int64_t lanes = C - c < LANES ? C - c : LANES;
      vf wv[9];
      _Pragma("GCC unroll 9") for (int t = 0; t < 9; ++t)
        wv[t] = lanes == LANES ? ld(w + t * C + c) : ld_n(w + t * C + c, lanes);
      if (lanes == LANES && all_rows) dw3_sweep(rows, wv, yrow, rrow, bias, c, lanes, q, lo, hi, a, 1, 1);
      else if (lanes == LANES) dw3_sweep(rows, wv, yrow, rrow, bias, c, lanes, q, lo, hi, a, 1, 0);
      else dw3_sweep(rows, wv, yrow, rrow, bias, c, lanes, q, lo, hi, a, 0, 0);
    }
  }
  return 0;
}

int sdc_conv_depthwise_f32(const float *x, const float *w, const float *bias, const float *res, float *y,
                           const int64_t *q, const float *act) {
  if (q[7] == 3 && q[8] == 3 && q[13] == 1 && q[14] == 1) {
    OVER_TILES(depthwise3_rows, q[0] * q[15], q[17])
  }
  OVER_TILES(depthwise_tiles, q[0] * q[15] * ((q[16] + DW_PIXELS - 1) / DW_PIXELS), q[17])
}

/* ---------------------------------------------------------------- windows that tile the image */

/* Tiles [item0, item1) of an ungrouped convolution whose windows tile an NCHW image (strides = the
 * kernel, no pads, no dilation: a vision transformer's patch embedding), with an NCHW result. Tile i
 * is the ROWS patches from i * ROWS of the flattened (n, oh, ow): each copied into a row of
 * K = C * KH * KW values (c, kh, kw order), then one grouped tile of one tap over those rows per
 * block of output channels, its results scattered to the channel planes. `q`: N C H W O OP KH KW OH
 * OW threads, `w`: [K][OP]. Rows and columns past the last whole window are not read. */
static int patch_tiles(const float *x, const float *w, const float *bias, const float *res, float *y,
                       const int64_t *q, const act_t *a, int64_t item0, int64_t item1) {
  const int64_t C = q[1], H = q[2], W = q[3], O = q[4], OP = q[5], KH = q[6], KW = q[7], OH = q[8], OW = q[9];
  const int64_t K = C * KH * KW, P = q[0] * OH * OW, BLOCK = MAX_VECTORS * LANES;
#if MAX_VECTORS >= 4
  static const tile_fn tiles[] = {NULL, tile_1, tile_2, tile_3, tile_4};
#else
  static const tile_fn tiles[] = {NULL, tile_1, tile_2};
#endif
  (void)res;
  float *rows = calloc((size_t)(ROWS * K), sizeof(float));
  float *out = malloc(sizeof(float) * (size_t)(ROWS * BLOCK));
  if (!rows || !out) {
    free(rows); free(out);
    return 1;
  }
  for (int64_t item = item0; item < item1; ++item) {
    const float *xs[ROWS];
    float *ys[ROWS];
    const float *rs[ROWS] = {NULL};
    int64_t base[ROWS]; /* the patch's result offset in channel plane 0, -1 past the last patch */
    for (int r = 0; r < ROWS; ++r) {
      const int64_t p = item * ROWS + r;
      xs[r] = rows + r * K;
      base[r] = -1;
      if (p >= P) continue;
      const int64_t n = p / (OH * OW), oh = p / OW % OH, ow = p % OW;
      base[r] = n * O * OH * OW + oh * OW + ow;
      float *row = rows + r * K;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t kh = 0; kh < KH; ++kh, row += KW) {
          const float *from = x + ((n * C + c) * H + oh * KH + kh) * W + ow * KW;
          for (int64_t kw = 0; kw < KW; ++kw) row[kw] = from[kw]; /* (a memcpy call per 8 floats took longer) */
        }
    }
    for (int64_t o0 = 0; o0 < O; o0 += BLOCK) {
      const int64_t cols = O - o0 < BLOCK ? O - o0 : BLOCK;
      for (int r = 0; r < ROWS; ++r) ys[r] = base[r] >= 0 ? out + r * BLOCK : NULL;
      const float *ws = w + o0;
      tiles[(cols + LANES - 1) / LANES](xs, &ws, 1, K, OP, ys, rs, bias ? bias + o0 : NULL, cols, a);
      for (int r = 0; r < ROWS; ++r) {
        if (base[r] < 0) continue;
        float *to = y + base[r] + o0 * OH * OW;
        for (int64_t j = 0; j < cols; ++j) to[j * OH * OW] = out[r * BLOCK + j];
      }
    }
  }
  free(rows); free(out);
  return 0;
}

int sdc_conv_patches_f32(const float *x, const float *w, const float *bias, const float *res, float *y,
                         const int64_t *q, const float *act) {
  OVER_TILES(patch_tiles, (q[0] * q[8] * q[9] + ROWS - 1) / ROWS, q[10])
}

/* ---------------------------------------------------------------- pooling */

/* The max of a window's vectors, NaN-propagating as torch's pooling (once a window meets a NaN the
 * result is NaN): `vmax` is one vmaxps, which gives v where either is NaN, and the NaNs
 * seen are kept in a mask off that dependency chain (the pick per tap of before made the chain 3
 * operations long). */
static inline vf vmax(vf a, vf b) { /* a > b ? a : b per lane */
#if defined(__AVX512F__)
  return (vf)_mm512_max_ps((__m512)a, (__m512)b);
#elif defined(__AVX__)
  return (vf)_mm256_max_ps((__m256)a, (__m256)b);
#else
  return pick(a > b, a, b);
#endif
}
#define MAX_INIT vf acc = splat(-__builtin_inff()); vi nans = (vi)splat(0.0f);
#define MAX_TAKE(v) do { const vf v_ = (v); nans |= (vi)(v_ != v_); acc = vmax(acc, v_); } while (0)
#define MAX_RESULT pick(nans, splat(__builtin_nanf("")), acc)

/* Result rows [row0, row1) of the flattened (n, oh) of a 2-d max pooling over channels-last x
 * [N][H][W][C] into y [N][OH][OW][C]; q as the convolutions' (G = C, no weights). Taps on the padding
 * are skipped (the padding is -inf), so a window wholly on it gives -inf. A 3x3 window without
 * dilation wholly inside the input takes its 9 taps unrolled, at fixed offsets from its corner. */
static void max_pool_rows(const float *x, float *y, const int64_t *q, int64_t row0, int64_t row1,
                          const float **taps) {
  const int64_t H = q[1], W = q[2], C = q[3], KH = q[7], KW = q[8];
  const int64_t SH = q[9], SW = q[10], PT = q[11], PL = q[12], DH = q[13], DW = q[14], OH = q[15], OW = q[16];
  const int three = KH == 3 && KW == 3 && DH == 1 && DW == 1;
  const int64_t rs = W * C; /* the next input row */
  for (int64_t row = row0; row < row1; ++row) {
    const int64_t n = row / OH, oh = row % OH, ih0 = oh * SH - PT;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t iw0 = ow * SW - PL;
      float *out = y + (row * OW + ow) * C;
      if (three && ih0 >= 0 && ih0 + 2 < H && iw0 >= 0 && iw0 + 2 < W) {
        const float *p = x + ((n * H + ih0) * W + iw0) * C;
        int64_t c = 0;
        for (; c < C; c += LANES) {
          const int64_t k = C - c < LANES ? C - c : LANES;
          const float *b = p + c;
          MAX_INIT
          if (k == LANES) {
            MAX_TAKE(ld(b)); MAX_TAKE(ld(b + C)); MAX_TAKE(ld(b + 2 * C));
            MAX_TAKE(ld(b + rs)); MAX_TAKE(ld(b + rs + C)); MAX_TAKE(ld(b + rs + 2 * C));
            MAX_TAKE(ld(b + 2 * rs)); MAX_TAKE(ld(b + 2 * rs + C)); MAX_TAKE(ld(b + 2 * rs + 2 * C));
            st(out + c, MAX_RESULT);
          } else {
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 3; ++j) MAX_TAKE(ld_n(b + i * rs + j * C, k));
            st_n(out + c, MAX_RESULT, k);
          }
        }
        continue;
      }
      int64_t used = 0; /* the window's input pixels, once for all its channels */
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t ih = ih0 + kh * DH;
        if (ih < 0 || ih >= H) continue;
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t iw = iw0 + kw * DW;
          if (iw >= 0 && iw < W) taps[used++] = x + ((n * H + ih) * W + iw) * C;
        }
      }
      int64_t c = 0;
      for (; c + LANES <= C; c += LANES) {
        MAX_INIT
        for (int64_t t = 0; t < used; ++t) MAX_TAKE(ld(taps[t] + c));
        st(out + c, MAX_RESULT);
      }
      if (c < C) {
        MAX_INIT
        for (int64_t t = 0; t < used; ++t) MAX_TAKE(ld_n(taps[t] + c, C - c));
        st_n(out + c, MAX_RESULT, C - c);
      }
    }
  }
}

typedef void (*pool_rows_fn)(const float *, float *, const int64_t *, int64_t, int64_t, const float **);

/* Result rows [row0, row1) of a pooling with a tap list of its own. */
static int pool_part(pool_rows_fn rows_fn, const float *x, float *y, const int64_t *q, int64_t row0, int64_t row1) {
  const float **taps = malloc(sizeof(float *) * (size_t)(q[7] * q[8] + 1));
  if (!taps) return 1;
  rows_fn(x, y, q, row0, row1, taps);
  free(taps);
  return 0;
}

/* The result's rows split evenly over `q[17]` threads (one: no parallel region). */
static int pool(pool_rows_fn rows_fn, const float *x, float *y, const int64_t *q) {
  const int64_t rows = q[0] * q[15];
  const int threads = q[17] > 1 ? (int)q[17] : 1;
  if (threads == 1) return pool_part(rows_fn, x, y, q, 0, rows);
  int failed = 0;
#pragma omp parallel num_threads(threads) reduction(|: failed)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    failed |= pool_part(rows_fn, x, y, q, rows * t / nt, rows * (t + 1) / nt);
  }
  return failed;
}

int sdc_max_pool_f32(const float *x, float *y, const int64_t *q) { return pool(max_pool_rows, x, y, q); }

/* Average pooling, as max_pool_rows; q[18], q[19]: the bottom and right pads, q[20]: whether taps on
 * the pads count in the divisor (count_include_pad). Taps past the pads (a ceil_mode window) never
 * count; a window that reads no counted tap divides 0 by 0, as the reference does. */
static void avg_pool_rows(const float *x, float *y, const int64_t *q, int64_t row0, int64_t row1,
                          const float **taps) {
  const int64_t H = q[1], W = q[2], C = q[3], KH = q[7], KW = q[8];
  const int64_t SH = q[9], SW = q[10], PT = q[11], PL = q[12], DH = q[13], DW = q[14], OH = q[15], OW = q[16];
  const int64_t PB = q[18], PR = q[19], with_pads = q[20];
  for (int64_t row = row0; row < row1; ++row) {
    const int64_t n = row / OH, oh = row % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      int64_t used = 0, counted = 0;
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t ih = oh * SH - PT + kh * DH;
        const int in_h = ih >= 0 && ih < H, pad_h = ih >= -PT && ih < H + PB;
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t iw = ow * SW - PL + kw * DW;
          const int in_w = iw >= 0 && iw < W, pad_w = iw >= -PL && iw < W + PR;
          if (in_h && in_w) taps[used++] = x + ((n * H + ih) * W + iw) * C;
          counted += (in_h && in_w) || (with_pads && pad_h && pad_w);
        }
      }
      const vf count = splat((float)counted);
      float *out = y + (row * OW + ow) * C;
      int64_t c = 0;
      for (; c + LANES <= C; c += LANES) {
        vf acc = splat(0.0f);
        for (int64_t t = 0; t < used; ++t) acc += ld(taps[t] + c);
        st(out + c, acc / count);
      }
      if (c < C) {
        vf acc = splat(0.0f);
        for (int64_t t = 0; t < used; ++t) acc += ld_n(taps[t] + c, C - c);
        st_n(out + c, acc / count, C - c);
      }
    }
  }
}

int sdc_avg_pool_f32(const float *x, float *y, const int64_t *q) { return pool(avg_pool_rows, x, y, q); }

/* Global average pooling of a channels-last [N][P][C] (P pixels) into [N][C]: items are (image, block
 * of GAP_VECTORS channel vectors), each summed over the pixels in that many independent accumulators
 * (one accumulator's chain of adds took 4x as long), the rows read in order. */
#define GAP_VECTORS 4
static void gap_items(const float *x, float *y, int64_t P, int64_t C, int64_t item0, int64_t item1) {
  const int64_t blocks = (C + GAP_VECTORS * LANES - 1) / (GAP_VECTORS * LANES);
  const vf count = splat((float)P);
  for (int64_t item = item0; item < item1; ++item) {
    const int64_t n = item / blocks, c0 = item % blocks * (GAP_VECTORS * LANES);
    const float *in = x + n * P * C;
    float *out = y + n * C;
    if (c0 + GAP_VECTORS * LANES <= C) {
      vf acc[GAP_VECTORS];
      for (int v = 0; v < GAP_VECTORS; ++v) acc[v] = splat(0.0f);
      for (int64_t p = 0; p < P; ++p)
        for (int v = 0; v < GAP_VECTORS; ++v) acc[v] += ld(in + p * C + c0 + v * LANES);
      for (int v = 0; v < GAP_VECTORS; ++v) st(out + c0 + v * LANES, acc[v] / count);
    } else {
      for (int64_t c = c0; c < C; c += LANES) {
        const int64_t n_lanes = C - c < LANES ? C - c : LANES;
        vf acc = splat(0.0f);
        for (int64_t p = 0; p < P; ++p) acc += ld_n(in + p * C + c, n_lanes);
        st_n(out + c, acc / count, n_lanes);
      }
    }
  }
}

int sdc_global_avg_pool_f32(const float *x, float *y, int64_t N, int64_t P, int64_t C, int64_t threads) {
  const int64_t items = N * ((C + GAP_VECTORS * LANES - 1) / (GAP_VECTORS * LANES));
  if (threads <= 1 || items < 2) {
    gap_items(x, y, P, C, 0, items);
    return 0;
  }
#pragma omp parallel num_threads((int)threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    gap_items(x, y, P, C, items * t / nt, items * (t + 1) / nt);
  }
  return 0;
}

/* ---------------------------------------------------------------- channel shuffle */

#if LANES == 16
typedef int64_t vl __attribute__((vector_size(64)));
/* Interleaves of two vectors: of their floats (a0 b0 a1 b1 ..), and of their float pairs. */
static inline vf zip_lo(vf a, vf b) { return __builtin_shuffle(a, b, (vi){0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23}); }
static inline vf zip_hi(vf a, vf b) { return __builtin_shuffle(a, b, (vi){8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31}); }
static inline vf zip2_lo(vf a, vf b) { return (vf)__builtin_shuffle((vl)a, (vl)b, (vl){0, 8, 1, 9, 2, 10, 3, 11}); }
static inline vf zip2_hi(vf a, vf b) { return (vf)__builtin_shuffle((vl)a, (vl)b, (vl){4, 12, 5, 13, 6, 14, 7, 15}); }

/* `n` (at most LANES * count) floats of `v[0..count)` stored in order at d. */
static inline void st_some(float *d, const vf *v, int count, int64_t n) {
  for (int k = 0; k < count && n > 0; ++k, n -= LANES, d += LANES) {
    if (n >= LANES) st(d, v[k]);
    else st_n(d, v[k], n);
  }
}

/* The three-way interleave of a, b, c (a0 b0 c0 a1 ..): per result vector one shuffle takes the a's
 * and b's, another the c's into the lanes left. */
static inline void zip3(vf a, vf b, vf c, vf *out) {
  out[0] = __builtin_shuffle(__builtin_shuffle(a, b, (vi){0, 16, 0, 1, 17, 0, 2, 18, 0, 3, 19, 0, 4, 20, 0, 5}), c,
                             (vi){0, 1, 16, 3, 4, 17, 6, 7, 18, 9, 10, 19, 12, 13, 20, 15});
  out[1] = __builtin_shuffle(__builtin_shuffle(a, b, (vi){21, 0, 6, 22, 0, 7, 23, 0, 8, 24, 0, 9, 25, 0, 10, 26}), c,
                             (vi){0, 21, 2, 3, 22, 5, 6, 23, 8, 9, 24, 11, 12, 25, 14, 15});
  out[2] = __builtin_shuffle(__builtin_shuffle(a, b, (vi){0, 11, 27, 0, 12, 28, 0, 13, 29, 0, 14, 30, 0, 15, 31, 0}), c,
                             (vi){26, 1, 2, 27, 4, 5, 28, 7, 8, 29, 10, 11, 30, 13, 14, 31});
}

/* Columns [j, j + n) (n at most LANES) of one pixel's A = 2, 3 or 4 rows of B, interleaved: 16 columns
 * of 2 rows are 2 stores, of 4 rows 4, where one float at a time took 4x a plain copy's time. */
static inline __attribute__((always_inline)) void transpose_columns(const float *s, float *d, int64_t A, int64_t B,
                                                                    int64_t j, int64_t n) {
  vf r[4];
  for (int64_t i = 0; i < A; ++i) r[i] = n == LANES ? ld(s + i * B + j) : ld_n(s + i * B + j, n);
  vf out[4];
  if (A == 2) {
    out[0] = zip_lo(r[0], r[1]);
    out[1] = zip_hi(r[0], r[1]);
  } else if (A == 3) {
    zip3(r[0], r[1], r[2], out);
  } else {
    const vf ab_lo = zip_lo(r[0], r[1]), ab_hi = zip_hi(r[0], r[1]);
    const vf cd_lo = zip_lo(r[2], r[3]), cd_hi = zip_hi(r[2], r[3]);
    out[0] = zip2_lo(ab_lo, cd_lo);
    out[1] = zip2_hi(ab_lo, cd_lo);
    out[2] = zip2_lo(ab_hi, cd_hi);
    out[3] = zip2_hi(ab_hi, cd_hi);
  }
  if (n == LANES) /* (whole vectors stored from registers: st_some's pointer kept them in memory) */
    for (int64_t k = 0; k < A; ++k) st(d + j * A + k * LANES, out[k]);
  else
    st_some(d + j * A, out, (int)A, n * A);
}
#endif

/* out[p][j][i] = in[p][i][j] for in [P][A][B]: a channel shuffle of channels-last pixels (the channels
 * split into A groups of B, transposed), the pixels split over `threads`; also an NCHW image made
 * channels-last (P = N, A = C, B = H * W). */
int sdc_block_transpose_f32(const float *restrict in, float *restrict out, int64_t P, int64_t A, int64_t B,
                            int64_t threads) {
#pragma omp parallel for num_threads(threads > 1 ? (int)threads : 1) if (threads > 1) schedule(static)
  for (int64_t p = 0; p < P; ++p) {
    const float *restrict s = in + p * A * B;
    float *restrict d = out + p * A * B;
#if LANES == 16
    if (A >= 2 && A <= 4) {
      int64_t j = 0;
      if (A == 2)
        for (; j + LANES <= B; j += LANES) transpose_columns(s, d, 2, B, j, LANES);
      else if (A == 3)
        for (; j + LANES <= B; j += LANES) transpose_columns(s, d, 3, B, j, LANES);
      else
        for (; j + LANES <= B; j += LANES) transpose_columns(s, d, 4, B, j, LANES);
      if (j < B) transpose_columns(s, d, A, B, j, B - j);
      continue;
    }
#endif
    for (int64_t i = 0; i < A; ++i)
      for (int64_t j = 0; j < B; ++j) d[j * A + i] = s[i * B + j];
  }
  return 0;
}

/* ---------------------------------------------------------------- local response normalization */

/* y[p][c] = x[p][c] * s^-beta, s = bias + alpha / size * (the sum of x[p][c']^2 over the window of c'
 * from c - before to c + after, channels past either end none), for channels-last x, y [P][C];
 * q = {P, C, before, after, threads, power} with power 1: beta 0.75 (1 / sqrt(s * sqrt(s))), 2: 0.5,
 * 3: 1, 0: powf; f = {alpha / size, bias, beta}. The window sums its squares in channel order, as the
 * reference's shifted slices do. 0, or 1 when a thread's row buffers were not allocated. */
int sdc_lrn_f32(const float *x, float *y, const int64_t *q, const float *f) {
  const int64_t P = q[0], C = q[1], before = q[2], after = q[3], threads = q[4], power = q[5];
  const int64_t taps = before + after + 1;
  const float scale = f[0], bias = f[1], beta = f[2];
  int failed = 0;
#pragma omp parallel num_threads(threads > 1 ? (int)threads : 1) if (threads > 1) reduction(|: failed)
  {
    float *pad = calloc((size_t)(C + taps), sizeof(float)), *sum = malloc(sizeof(float) * (size_t)(C > 0 ? C : 1));
    if (!pad || !sum) {
      failed = 1;
    } else {
#pragma omp for schedule(static)
      for (int64_t p = 0; p < P; ++p) {
        const float *xp = x + p * C;
        float *yp = y + p * C;
        for (int64_t c = 0; c < C; ++c) pad[before + c] = xp[c] * xp[c]; /* (the pads stay 0) */
        for (int64_t c = 0; c < C; ++c) sum[c] = pad[c];
        for (int64_t k = 1; k < taps; ++k)
          for (int64_t c = 0; c < C; ++c) sum[c] += pad[c + k];
        switch (power) {
        case 1: for (int64_t c = 0; c < C; ++c) { const float s = sum[c] * scale + bias; yp[c] = xp[c] * (1.0f / sqrtf(sqrtf(s) * s)); } break;
        case 2: for (int64_t c = 0; c < C; ++c) { const float s = sum[c] * scale + bias; yp[c] = xp[c] * (1.0f / sqrtf(s)); } break;
        case 3: for (int64_t c = 0; c < C; ++c) { const float s = sum[c] * scale + bias; yp[c] = xp[c] * (1.0f / s); } break;
        default: for (int64_t c = 0; c < C; ++c) { const float s = sum[c] * scale + bias; yp[c] = xp[c] * powf(s, -beta); }
        }
      }
    }
    free(pad);
    free(sum);
  }
  return failed;
}

/* ---------------------------------------------------------------- linear resizing */

/* y[n][oy][ox] = r0 * (c0 * x[n][i0][j0] + c1 * x[n][i0][j1]) + r1 * (c0 * x[n][i1][j0] + c1 * x[n][i1][j1])
 * per channel, for channels-last x [N][H][W][C] and y [N][OH][OW][C], where output row oy reads input rows
 * i0, i1 = rows[2 oy], rows[2 oy + 1] with weights r0, r1 = f[2 oy], f[2 oy + 1], and column ox columns
 * j0, j1 = cols[2 ox], cols[2 ox + 1] with c0, c1 = f[2 OH + 2 ox], f[2 OH + 2 ox + 1]: ONNX's linear
 * Resize of the two spatial dims, the taps computed by the caller. q = {N, H, W, C, OH, OW, threads,
 * rows[2 OH], cols[2 OW]}. */
int sdc_resize_linear_f32(const float *x, float *y, const int64_t *q, const float *f) {
  const int64_t N = q[0], H = q[1], W = q[2], C = q[3], OH = q[4], OW = q[5], threads = q[6];
  const int64_t *rows = q + 7, *cols = q + 7 + 2 * OH;
  const float *rw = f, *cw = f + 2 * OH;
#pragma omp parallel for num_threads(threads > 1 ? (int)threads : 1) if (threads > 1) schedule(static)
  for (int64_t item = 0; item < N * OH; ++item) {
    const int64_t n = item / OH, oy = item % OH;
    const float *x0 = x + (n * H + rows[2 * oy]) * W * C, *x1 = x + (n * H + rows[2 * oy + 1]) * W * C;
    const float r0 = rw[2 * oy], r1 = rw[2 * oy + 1];
    float *yr = y + item * OW * C;
    for (int64_t ox = 0; ox < OW; ++ox) {
      const int64_t j0 = cols[2 * ox] * C, j1 = cols[2 * ox + 1] * C;
      const float c0 = cw[2 * ox], c1 = cw[2 * ox + 1];
      float *yp = yr + ox * C;
      for (int64_t c = 0; c < C; ++c)
        yp[c] = r0 * (c0 * x0[j0 + c] + c1 * x0[j1 + c]) + r1 * (c0 * x1[j0 + c] + c1 * x1[j1 + c]);
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- recorded runs */

/* The pooling kernels in the convolutions' form (x, w, bias, res, y, q, act), so that a recorded run of
 * the executor's instructions (sdc/runtime/c_runs.py) calls every kernel alike; the arguments they do
 * not take are NULL. Global average pooling takes q = {N, P, C, threads}, the block transpose (a channel
 * shuffle) q = {P, A, B, threads}. */
int sdc_max_pool_call(const float *x, const float *w, const float *bias, const float *res, float *y,
                      const int64_t *q, const float *act) {
  (void)w, (void)bias, (void)res, (void)act;
  return sdc_max_pool_f32(x, y, q);
}

int sdc_avg_pool_call(const float *x, const float *w, const float *bias, const float *res, float *y,
                      const int64_t *q, const float *act) {
  (void)w, (void)bias, (void)res, (void)act;
  return sdc_avg_pool_f32(x, y, q);
}

int sdc_global_avg_pool_call(const float *x, const float *w, const float *bias, const float *res, float *y,
                             const int64_t *q, const float *act) {
  (void)w, (void)bias, (void)res, (void)act;
  return sdc_global_avg_pool_f32(x, y, q[0], q[1], q[2], q[3]);
}

int sdc_resize_linear_call(const float *x, const float *w, const float *bias, const float *res, float *y,
                           const int64_t *q, const float *act) {
  (void)w, (void)bias, (void)res;
  return sdc_resize_linear_f32(x, y, q, act);
}

int sdc_lrn_call(const float *x, const float *w, const float *bias, const float *res, float *y, const int64_t *q,
                 const float *act) {
  (void)w, (void)bias, (void)res;
  return sdc_lrn_f32(x, y, q, act);
}

int sdc_block_transpose_call(const float *x, const float *w, const float *bias, const float *res, float *y,
                             const int64_t *q, const float *act) {
  (void)w, (void)bias, (void)res, (void)act;
  return sdc_block_transpose_f32(x, y, q[0], q[1], q[2], q[3]);
}

/* ---------------------------------------------------------------- a squeeze-excite block's scaling */

/* y[n][p][c] = x[n][p][c] * s[n * SN + c] for channels-last x [N][P][C] (SN = C, or 0 where one s serves
 * every image); q = {N, P, C, SN, threads}, the rows (n, p) split over the threads. */
int sdc_scale_channels_f32(const float *x, const float *s, float *y, const int64_t *q) {
  const int64_t N = q[0], P = q[1], C = q[2], SN = q[3], threads = q[4];
#pragma omp parallel for num_threads(threads > 1 ? (int)threads : 1) if (threads > 1) schedule(static)
  for (int64_t r = 0; r < N * P; ++r) {
    const float *sc = s + r / P * SN, *xr = x + r * C;
    float *yr = y + r * C;
    int64_t c = 0;
    for (; c + LANES <= C; c += LANES) st(yr + c, ld(xr + c) * ld(sc + c));
    if (c < C) st_n(yr + c, ld_n(xr + c, C - c) * ld_n(sc + c, C - c), C - c);
  }
  return 0;
}

int sdc_scale_channels_call(const float *x, const float *w, const float *bias, const float *res, float *y,
                            const int64_t *q, const float *act) {
  (void)w, (void)bias, (void)act;
  return sdc_scale_channels_f32(x, res, y, q);
}

/* ---------------------------------------------------------------- a concat along the channels */

/* y[p] = (x_0[p], .., x_{n-1}[p]) for 2 <= n <= 4 channels-last parts x_i [P][C_i] and y [P][C_0 + ..];
 * q = {P, threads, n, C_0, .., C_{n-1}}. */
int sdc_concat_channels_f32(const float *const *parts, float *y, const int64_t *q) {
  const int64_t P = q[0], threads = q[1], n = q[2];
  int64_t C = 0;
  for (int64_t i = 0; i < n; ++i) C += q[3 + i];
#pragma omp parallel for num_threads(threads > 1 ? (int)threads : 1) if (threads > 1) schedule(static)
  for (int64_t p = 0; p < P; ++p) {
    float *out = y + p * C;
    for (int64_t i = 0; i < n; ++i) {
      memcpy(out, parts[i] + p * q[3 + i], sizeof(float) * (size_t)q[3 + i]);
      out += q[3 + i];
    }
  }
  return 0;
}

/* the parts are the call's first four pointers, in order (a run maps each as a value, `w` too) */
int sdc_concat_channels_call(const float *x, const float *w, const float *bias, const float *res, float *y,
                             const int64_t *q, const float *act) {
  (void)act;
  const float *parts[4] = {x, w, bias, res};
  return sdc_concat_channels_f32(parts, y, q);
}

typedef int (*kernel_call)(const float *, const float *, const float *, const float *, float *, const int64_t *,
                           const float *);

/* calls[8 i] is a kernel of the form above and calls[8 i + 1 ..] its seven arguments, for i < n in order;
 * 0, or 1 + the index of the first that returned nonzero (its scratch not allocated) */
int sdc_run_calls(int64_t n, void *const *calls) {
  for (int64_t i = 0; i < n; ++i) {
    void *const *c = calls + 8 * i;
    if (((kernel_call)c[0])(c[1], c[2], c[3], c[4], c[5], c[6], c[7])) return (int)(i + 1);
  }
  return 0;
}
