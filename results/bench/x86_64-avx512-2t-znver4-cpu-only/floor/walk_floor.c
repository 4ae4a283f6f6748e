/* The transposed walk of kl_div float16 with a 0-d gradient, hand-written with AVX-512 intrinsics:
 * the yardstick of section 37 of results/performance.md (is the numba walk at the floor of its
 * algorithm on this CPU?). Not part of the package; built and driven by against_c.py.
 *
 * out = float16(t * c), c = -g * cof, for a transposed view: t's memory is (m, 64) row-major, out
 * is (64, m) row-major. The walk takes tiles of 128 rows by 64 columns: pass (a) computes the tile
 * into a 16 KiB buffer in t's order, pass (b) moves it into out through 16 x 16 register
 * transposes of 256-bit rows, two stacked blocks filling each 64-byte line of out, as the numba
 * walk does with half-line rows (cpu_loops, Tiling.transpose_row = 32).
 * mode 0: the whole walk; 1: pass (a) only; 2: pass (a) and the transposes, their stores sent to
 * a scratch in L1 instead of out (timing only). stream: out's lines stored non-temporally. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>

#define COLS 64
#define TILE_ROWS 128

static int slot[16]; /* column j of a transposed block is left in register slot[j] */

static inline void transpose16(__m256i r[16]) {
    __m256i a[16], b[16];
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm256_unpacklo_epi16(r[i], r[i + 1]);
        a[i + 1] = _mm256_unpackhi_epi16(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4)
        for (int i = 0; i < 2; i++) {
            b[g + 2 * i] = _mm256_unpacklo_epi32(a[g + i], a[g + i + 2]);
            b[g + 2 * i + 1] = _mm256_unpackhi_epi32(a[g + i], a[g + i + 2]);
        }
    for (int g = 0; g < 16; g += 8)
        for (int i = 0; i < 4; i++) {
            a[g + 2 * i] = _mm256_unpacklo_epi64(b[g + i], b[g + i + 4]);
            a[g + 2 * i + 1] = _mm256_unpackhi_epi64(b[g + i], b[g + i + 4]);
        }
    for (int i = 0; i < 8; i++) {
        b[2 * i] = _mm256_permute2x128_si256(a[i], a[i + 8], 0x20);
        b[2 * i + 1] = _mm256_permute2x128_si256(a[i], a[i + 8], 0x31);
    }
    for (int i = 0; i < 16; i++) r[i] = b[i];
}

/* Finds slot[] by transposing labels; returns 0, or -1 if some slot is not one whole column. */
int floor_init(void) {
    uint16_t m[16][16] __attribute__((aligned(32)));
    __m256i r[16];
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 16; j++) m[i][j] = (uint16_t)(i * 16 + j);
        r[i] = _mm256_load_si256((__m256i *)m[i]);
    }
    transpose16(r);
    for (int s = 0; s < 16; s++) {
        _mm256_store_si256((__m256i *)m[s], r[s]);
        int col = m[s][0] % 16;
        for (int i = 0; i < 16; i++)
            if (m[s][i] != i * 16 + col) return -1;
        slot[col] = s;
    }
    return 0;
}

void floor_contiguous(const uint16_t *t, uint16_t *out, long n, float c, int threads, int stream) {
#pragma omp parallel num_threads(threads)
    {
        long share = n / omp_get_num_threads(), start = omp_get_thread_num() * share;
        __m512 k = _mm512_set1_ps(c);
        for (long i = start; i < start + share; i += 16) {
            __m256i h = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(t + i))), k), 4);
            if (stream)
                _mm256_stream_si256((__m256i *)(out + i), h);
            else
                _mm256_store_si256((__m256i *)(out + i), h);
        }
        _mm_sfence();
    }
}

void floor_walk(const uint16_t *t, uint16_t *out, long n, float c, int threads, int stream, int mode) {
    long m = n / COLS;
#pragma omp parallel num_threads(threads)
    {
        uint16_t buf[TILE_ROWS * COLS] __attribute__((aligned(64)));
        __m256i scratch[32];
        __m512 k = _mm512_set1_ps(c);
        long tiles = m / TILE_ROWS, share = tiles / omp_get_num_threads(), first = omp_get_thread_num() * share;
        for (long tile = first; tile < first + share; tile++) {
            long r0 = tile * TILE_ROWS;
            const uint16_t *src = t + r0 * COLS;
            for (int i = 0; i < TILE_ROWS * COLS; i += 16) {
                __m512 v = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(src + i)));
                _mm256_store_si256((__m256i *)(buf + i), _mm512_cvtps_ph(_mm512_mul_ps(v, k), 4));
            }
            if (mode == 1) continue;
            for (int cb = 0; cb < COLS; cb += 16)
                for (int rb = 0; rb < TILE_ROWS; rb += 32) {
                    __m256i x[16], y[16];
                    for (int i = 0; i < 16; i++) {
                        x[i] = _mm256_load_si256((const __m256i *)(buf + (rb + i) * COLS + cb));
                        y[i] = _mm256_load_si256((const __m256i *)(buf + (rb + 16 + i) * COLS + cb));
                    }
                    transpose16(x);
                    transpose16(y);
                    for (int j = 0; j < 16; j++) {
                        uint16_t *line = out + (cb + j) * m + r0 + rb;
                        if (mode == 2) {
                            scratch[2 * j] = x[slot[j]];
                            scratch[2 * j + 1] = y[slot[j]];
                            __asm__ volatile("" ::"m"(scratch));
                        } else if (stream) {
                            _mm256_stream_si256((__m256i *)line, x[slot[j]]);
                            _mm256_stream_si256((__m256i *)(line + 16), y[slot[j]]);
                        } else {
                            _mm256_store_si256((__m256i *)line, x[slot[j]]);
                            _mm256_store_si256((__m256i *)(line + 16), y[slot[j]]);
                        }
                    }
                }
        }
        _mm_sfence();
    }
}
