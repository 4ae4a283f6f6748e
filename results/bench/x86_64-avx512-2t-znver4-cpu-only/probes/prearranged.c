/* Section 51 of results/performance.md: walk_floor.c's transposed walk (kl_div float16, 0-d gradient,
 * 16 x 16 register transposes of 256-bit rows) with its tile buffer pre-arranged: pass (a) stores
 * each 16-result ymm as two xmm halves where the transpose's cross-lane round would move them, so
 * pass (b) runs the three in-lane rounds only. Not part of the package; built and driven by
 * prearranged.py. */
#include "../floor/walk_floor.c"

static int slot3[16];

static inline void transpose16_in_lane(__m256i r[16]) {
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
            r[g + 2 * i] = _mm256_unpacklo_epi64(b[g + i], b[g + i + 4]);
            r[g + 2 * i + 1] = _mm256_unpackhi_epi64(b[g + i], b[g + i + 4]);
        }
}

/* position (in uint16) inside a 16x16 block of the pre-arranged buffer of mem row q (0..15), out-row half a */
static inline int pos(int q, int a) { return (8 * a + (q & 7)) * 16 + (q >> 3) * 8; }

/* labels: element (q, col) = q*16+col. After pre-arrangement and in-lane rounds, register s holds
 * out row col=? across q=0..15 */
int pre_init(void) {
    uint16_t m[256] __attribute__((aligned(32)));
    for (int q = 0; q < 16; q++)
        for (int a = 0; a < 2; a++)
            for (int e = 0; e < 8; e++) m[pos(q, a) + e] = (uint16_t)(q * 16 + 8 * a + e);
    __m256i r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm256_load_si256((__m256i *)(m + 16 * i));
    transpose16_in_lane(r);
    uint16_t o[16] __attribute__((aligned(32)));
    for (int s = 0; s < 16; s++) {
        _mm256_store_si256((__m256i *)o, r[s]);
        int col = o[0] % 16;
        for (int i = 0; i < 16; i++)
            if (o[i] != i * 16 + col) return -1 - s;
        slot3[col] = s;
    }
    return floor_init();
}

/* buffer: blocks of 16 mem rows x 16 out rows, block (rb16, cb) at ((rb16/16)*4 + cb/16) * 256 elements */
void pre_walk(const uint16_t *t, uint16_t *out, long n, float c, int threads, int stream, int mode) {
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
            for (int r = 0; r < TILE_ROWS; r++) {
                int q = r & 15;
                uint16_t *rowbase = buf + (r >> 4) * 4 * 256;
                for (int cb = 0; cb < COLS; cb += 16) {
                    __m512 v = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(src + r * COLS + cb)));
                    __m256i h = _mm512_cvtps_ph(_mm512_mul_ps(v, k), 4);
                    uint16_t *blk = rowbase + (cb >> 4) * 256;
                    _mm_store_si128((__m128i *)(blk + pos(q, 0)), _mm256_castsi256_si128(h));
                    _mm_store_si128((__m128i *)(blk + pos(q, 1)), _mm256_extracti128_si256(h, 1));
                }
            }
            if (mode == 1) continue;
            for (int cb = 0; cb < COLS; cb += 16)
                for (int rb = 0; rb < TILE_ROWS; rb += 32) {
                    __m256i x[16], y[16];
                    const uint16_t *bx = buf + ((rb >> 4) * 4 + (cb >> 4)) * 256;
                    const uint16_t *by = buf + (((rb + 16) >> 4) * 4 + (cb >> 4)) * 256;
                    for (int i = 0; i < 16; i++) {
                        x[i] = _mm256_load_si256((const __m256i *)(bx + 16 * i));
                        y[i] = _mm256_load_si256((const __m256i *)(by + 16 * i));
                    }
                    transpose16_in_lane(x);
                    transpose16_in_lane(y);
                    for (int j = 0; j < 16; j++) {
                        uint16_t *line = out + (cb + j) * m + r0 + rb;
                        if (mode == 2) {
                            scratch[2 * j] = x[slot3[j]];
                            scratch[2 * j + 1] = y[slot3[j]];
                            __asm__ volatile("" ::"m"(scratch));
                        } else if (stream) {
                            _mm256_stream_si256((__m256i *)line, x[slot3[j]]);
                            _mm256_stream_si256((__m256i *)(line + 16), y[slot3[j]]);
                        } else {
                            _mm256_store_si256((__m256i *)line, x[slot3[j]]);
                            _mm256_store_si256((__m256i *)(line + 16), y[slot3[j]]);
                        }
                    }
                }
        }
        _mm_sfence();
    }
}
