/* Section 47 of results/performance.md: does the transposed walk's out cost less when its lines
 * leave in long runs? walk_floor.c's walk (kl_div float16, 0-d gradient, 128 x 64 tiles, 16 x 16
 * register transposes of 256-bit rows) with pass (b) storing into a staging buffer of `stage`
 * tiles (out's 64 rows, each stage * 256 B, its pitch padded by one line so a block's 16 rows
 * fall in different L1 sets), then each staged row copied into out as one run of whole lines,
 * ordinary or non-temporal stores. The staging buffers are made once (staged_init), outside the
 * timed calls. Not part of the package; built and driven by staged_out.py. */
#include <stdlib.h>
#include <string.h>

#include "../floor/walk_floor.c"

/* Pass (b) of one tile over out's rows c0..c1 (buffer columns): floor_walk's 16 x 16 transposes,
 * each line of out stored as two 256-bit halves; skewed: rows 4q..4q+3 of a block store the line
 * 32q columns further on, modulo the tile. */
static inline void pass_b(const uint16_t *buf, uint16_t *out, long m, long r0, int c0, int c1, int stream, int skewed) {
    for (int cb = c0; cb < c1; cb += 16)
        for (int rb = 0; rb < TILE_ROWS; rb += 32) {
            __m256i x[16], y[16];
            for (int i = 0; i < 16; i++) {
                x[i] = _mm256_load_si256((const __m256i *)(buf + (rb + i) * COLS + cb));
                y[i] = _mm256_load_si256((const __m256i *)(buf + (rb + 16 + i) * COLS + cb));
            }
            transpose16(x);
            transpose16(y);
            for (int j = 0; j < 16; j++) {
                int col = skewed ? (rb + 32 * (j >> 2)) & (TILE_ROWS - 1) : rb;
                uint16_t *line = out + (cb + j) * m + r0 + col;
                if (stream) {
                    _mm256_stream_si256((__m256i *)line, x[slot[j]]);
                    _mm256_stream_si256((__m256i *)(line + 16), y[slot[j]]);
                } else {
                    _mm256_store_si256((__m256i *)line, x[slot[j]]);
                    _mm256_store_si256((__m256i *)(line + 16), y[slot[j]]);
                }
            }
        }
}

#define MAX_THREADS 64
static uint16_t *stage_bufs[MAX_THREADS]; /* one staging buffer per thread, made once by staged_init */
static long stage_cap;                    /* the most tiles each holds */

/* Allocates and touches (so no page faults fall inside a timed call) one staging buffer of
 * max_stage tiles per thread; returns 0, or -1 if an allocation failed or threads is too many. */
int staged_init(int threads, int max_stage) {
    long bytes = (long)COLS * ((long)max_stage * TILE_ROWS + 32) * 2;
    if (threads > MAX_THREADS) return -1;
    for (int i = 0; i < threads; i++) {
        free(stage_bufs[i]);
        stage_bufs[i] = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
        if (!stage_bufs[i]) return -1;
        memset(stage_bufs[i], 0, (size_t)bytes);
    }
    stage_cap = max_stage;
    return 0;
}

int staged_walk(const uint16_t *t, uint16_t *out, long n, float c, int threads, int stream, int stage) {
    long m = n / COLS, pitch = (long)stage * TILE_ROWS + 32;
    if (stage > stage_cap || threads > MAX_THREADS) return -1; /* staged_init has not made room for it */
#pragma omp parallel num_threads(threads)
    {
        uint16_t buf[TILE_ROWS * COLS] __attribute__((aligned(64)));
        uint16_t *st = stage_bufs[omp_get_thread_num()];
        __m512 k = _mm512_set1_ps(c);
        long tiles = m / TILE_ROWS, share = tiles / omp_get_num_threads(), first = omp_get_thread_num() * share;
        for (long s0 = first; s0 < first + share; s0 += stage) {
            long ns = first + share - s0 < stage ? first + share - s0 : stage;
            for (long tile = s0; tile < s0 + ns; tile++) {
                const uint16_t *src = t + tile * TILE_ROWS * COLS;
                for (int i = 0; i < TILE_ROWS * COLS; i += 16) {
                    __m512 v = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(src + i)));
                    _mm256_store_si256((__m256i *)(buf + i), _mm512_cvtps_ph(_mm512_mul_ps(v, k), 4));
                }
                /* into the staging rows, pitch apart: tile - s0 is its place in them */
                pass_b(buf, st, pitch, (tile - s0) * TILE_ROWS, 0, COLS, 0, 0);
            }
            for (int row = 0; row < COLS; row++) {
                const uint16_t *from = st + row * pitch;
                uint16_t *to = out + row * m + s0 * TILE_ROWS;
                for (long i = 0; i < ns * TILE_ROWS; i += 32) {
                    __m512i v = _mm512_load_si512((const void *)(from + i));
                    if (stream)
                        _mm512_stream_si512((void *)(to + i), v);
                    else
                        _mm512_store_si512((void *)(to + i), v);
                }
            }
        }
        _mm_sfence();
    }
    return 0;
}

/* The walk with out's lines skewed: in a 16-row block, rows 4q..4q+3 store the line 32q columns
 * further on (modulo the tile), so a block's 16 lines fall in 4 L1 sets, not one, which is what
 * padding out's rows did in section 42 (0.83-0.90x). Pass (a) writes the buffer pre-skewed with 4
 * masked stores per 16 elements so pass (b)'s loads and transposes are the same as floor_walk's.
 * plain_a: pass (a) unskewed (out wrong; timing only), to price the skewed stores alone. */
int skewed_walk(const uint16_t *t, uint16_t *out, long n, float c, int threads, int stream, int plain_a) {
    long m = n / COLS;
#pragma omp parallel num_threads(threads)
    {
        uint16_t buf[TILE_ROWS * COLS] __attribute__((aligned(64)));
        __m512 k = _mm512_set1_ps(c);
        long tiles = m / TILE_ROWS, share = tiles / omp_get_num_threads(), first = omp_get_thread_num() * share;
        for (long tile = first; tile < first + share; tile++) {
            long r0 = tile * TILE_ROWS;
            const uint16_t *src = t + r0 * COLS;
            for (int r = 0; r < TILE_ROWS; r++)
                for (int cb = 0; cb < COLS; cb += 16) {
                    __m512 v = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(src + r * COLS + cb)));
                    __m256i h = _mm512_cvtps_ph(_mm512_mul_ps(v, k), 4);
                    if (plain_a) { /* timing only: out's values are then wrong */
                        _mm256_store_si256((__m256i *)(buf + r * COLS + cb), h);
                        continue;
                    }
                    for (int q = 0; q < 4; q++) {
                        int to = (r - 32 * q) & (TILE_ROWS - 1);
                        _mm256_mask_storeu_epi16(buf + to * COLS + cb, (__mmask16)(0xF << (4 * q)), h);
                    }
                }
            pass_b(buf, out, m, r0, 0, COLS, stream, 1);
        }
        _mm_sfence();
    }
    return 0;
}

/* The walk with the threads splitting out's rows, not its columns: thread i takes out's rows
 * 64i/T.. (T threads), so it reads its share of every input row (one of t's two lines per row
 * with 2 threads) and writes 64/T of out's row streams instead of all 64. */
int rowsplit_walk(const uint16_t *t, uint16_t *out, long n, float c, int threads, int stream) {
    long m = n / COLS;
#pragma omp parallel num_threads(threads)
    {
        uint16_t buf[TILE_ROWS * COLS] __attribute__((aligned(64)));
        __m512 k = _mm512_set1_ps(c);
        int nt = omp_get_num_threads(), width = COLS / nt, c0 = omp_get_thread_num() * width;
        for (long tile = 0; tile < m / TILE_ROWS; tile++) {
            long r0 = tile * TILE_ROWS;
            const uint16_t *src = t + r0 * COLS;
            for (int r = 0; r < TILE_ROWS; r++)
                for (int cb = c0; cb < c0 + width; cb += 16) {
                    __m512 v = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(src + r * COLS + cb)));
                    _mm256_store_si256((__m256i *)(buf + r * COLS + cb), _mm512_cvtps_ph(_mm512_mul_ps(v, k), 4));
                }
            pass_b(buf, out, m, r0, c0, c0 + width, stream, 0);
        }
        _mm_sfence();
    }
    return 0;
}
