/* Section 47 of results/performance.md: the float32 transposed walk's floor on this chip. kl_div
 * float32 with a 0-d gradient (out = t * c) for a transposed view (t's memory (m, 64), out (64, m)),
 * hand-written with AVX-512 intrinsics as the numba walk does it with whole-line rows (the
 * tables' float32 entries): 64 x 64 tiles, pass (a) computing a tile into a 16 KiB buffer in t's
 * order, pass (b) moving it into out through 16 x 16 register transposes of zmm rows, one whole
 * line of out per row. mode 0: the whole walk; 1: pass (a) only; 2: pass (a) and the transposes,
 * their stores sent to an L1 scratch (timing only); 3: the walk with out's lines skewed (rows 4q..4q+3
 * of a block store the line 16q columns further on, modulo the tile, so a block's 16 lines fall in
 * 4 L1 sets, not one), pass (a) writing its buffer pre-skewed with 4 masked stores per 16
 * elements; 4: 3's skewed stores with pass (a) unskewed (out wrong: timing only). stream: out's
 * lines stored non-temporally.
 * Not part of the package; built and driven by walk_f32.py. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>

#define COLS 64
#define TILE_ROWS 64

static inline void transpose16(__m512 r[16]) {
    __m512 a[16], b[16];
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        b[i] = _mm512_shuffle_ps(a[i], a[i + 2], 0x44);
        b[i + 1] = _mm512_shuffle_ps(a[i], a[i + 2], 0xEE);
        b[i + 2] = _mm512_shuffle_ps(a[i + 1], a[i + 3], 0x44);
        b[i + 3] = _mm512_shuffle_ps(a[i + 1], a[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        a[i] = _mm512_shuffle_f32x4(b[i], b[i + 4], 0x88);
        a[i + 4] = _mm512_shuffle_f32x4(b[i], b[i + 4], 0xDD);
        a[i + 8] = _mm512_shuffle_f32x4(b[i + 8], b[i + 12], 0x88);
        a[i + 12] = _mm512_shuffle_f32x4(b[i + 8], b[i + 12], 0xDD);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(a[i], a[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(a[i], a[i + 8], 0xDD);
        r[i + 4] = _mm512_shuffle_f32x4(a[i + 4], a[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(a[i + 4], a[i + 12], 0xDD);
    }
}

static int slot[16];

/* Finds slot[] (column j of a block is left in register slot[j]) by transposing labels; returns 0,
 * or -1 if some register is not one whole column. */
int f32_init(void) {
    float m[16][16] __attribute__((aligned(64)));
    __m512 r[16];
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 16; j++) m[i][j] = (float)(i * 16 + j);
        r[i] = _mm512_load_ps(m[i]);
    }
    transpose16(r);
    for (int s = 0; s < 16; s++) {
        _mm512_store_ps(m[s], r[s]);
        int col = (int)m[s][0] % 16;
        for (int i = 0; i < 16; i++)
            if (m[s][i] != (float)(i * 16 + col)) return -1;
        slot[col] = s;
    }
    return 0;
}

void f32_contiguous(const float *t, float *out, long n, float c, int threads, int stream) {
#pragma omp parallel num_threads(threads)
    {
        long share = n / omp_get_num_threads(), start = omp_get_thread_num() * share;
        __m512 k = _mm512_set1_ps(c);
        for (long i = start; i < start + share; i += 16) {
            __m512 v = _mm512_mul_ps(_mm512_load_ps(t + i), k);
            if (stream)
                _mm512_stream_ps(out + i, v);
            else
                _mm512_store_ps(out + i, v);
        }
        _mm_sfence();
    }
}

void f32_walk(const float *t, float *out, long n, float c, int threads, int stream, int mode) {
    long m = n / COLS;
#pragma omp parallel num_threads(threads)
    {
        float buf[TILE_ROWS * COLS] __attribute__((aligned(64)));
        __m512 scratch[16];
        __m512 k = _mm512_set1_ps(c);
        long tiles = m / TILE_ROWS, share = tiles / omp_get_num_threads(), first = omp_get_thread_num() * share;
        for (long tile = first; tile < first + share; tile++) {
            long r0 = tile * TILE_ROWS;
            const float *src = t + r0 * COLS;
            if (mode == 3) {
                for (int r = 0; r < TILE_ROWS; r++)
                    for (int cb = 0; cb < COLS; cb += 16) {
                        __m512 v = _mm512_mul_ps(_mm512_load_ps(src + r * COLS + cb), k);
                        for (int q = 0; q < 4; q++)
                            _mm512_mask_store_ps(buf + ((r - 16 * q) & (TILE_ROWS - 1)) * COLS + cb,
                                                 (__mmask16)(0xF << (4 * q)), v);
                    }
            } else {
                for (int i = 0; i < TILE_ROWS * COLS; i += 16) _mm512_store_ps(buf + i, _mm512_mul_ps(_mm512_load_ps(src + i), k));
            }
            if (mode == 1) continue;
            for (int cb = 0; cb < COLS; cb += 16)
                for (int rb = 0; rb < TILE_ROWS; rb += 16) {
                    __m512 x[16];
                    for (int i = 0; i < 16; i++) x[i] = _mm512_load_ps(buf + (rb + i) * COLS + cb);
                    transpose16(x);
                    for (int j = 0; j < 16; j++) {
                        int skew = mode >= 3 ? 16 * (j >> 2) : 0;
                        float *line = out + (cb + j) * m + r0 + ((rb + skew) & (TILE_ROWS - 1));
                        if (mode == 2) {
                            scratch[j] = x[slot[j]];
                            __asm__ volatile("" ::"m"(scratch));
                        } else if (stream)
                            _mm512_stream_ps(line, x[slot[j]]);
                        else
                            _mm512_store_ps(line, x[slot[j]]);
                    }
                }
        }
        _mm_sfence();
    }
}
