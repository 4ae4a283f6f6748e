/* Section 47 of results/performance.md: what the 16-bit exp loop's time is made of. exp_cuts.c's
 * loop A (the shipped formula: clamps, the zero mask, k by rounding, one-fma reduction, degree-3
 * polynomial, p * (g * -m), the scale's exponent from j's bits by vpsubd + vcvtdq2ps, vscalefps,
 * float16 in and out), constants inlined, with parts taken out. Each variant is its own function
 * (its flags are compile-time constants, so no branch is left in its loop). One thread, n elements
 * (65536: 256 KiB in and out, in L2), best of 5 trials: cycles per 16 lanes at the 3.66 GHz
 * section 37 measured. The outputs are meaningless; timing only. Not part of the package:
 *     gcc -O3 -march=native exp_parts.c -o /tmp/exp_parts && /tmp/exp_parts */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S(x) _mm512_set1_ps(x)
enum { NO_SCALEF = 1, NO_POLY = 2, NO_CVT_IN = 4, NO_CVT_OUT = 8, NO_MASK = 16, NO_CLAMP = 32, NO_EXP_BITS = 64 };

static inline void body(const void *src, void *dst, long i, int v) {
    __m512 t = (v & NO_CVT_IN) ? _mm512_loadu_ps((const float *)src + i)
                               : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)src + i)));
    __m512 tl = (v & NO_CLAMP) ? t : _mm512_max_ps(t, S(-194.f));
    __m512 tc = (v & NO_CLAMP) ? t : _mm512_min_ps(tl, S(237.f));
    __mmask16 live = (v & NO_MASK) ? 0xffff : _mm512_cmp_ps_mask(t, S(-745.13324f), _CMP_NLE_UQ);
    __m512 j = _mm512_fmadd_ps(tc, S(1.4426950f), S(12582912.f));
    __m512 k = _mm512_sub_ps(j, S(12582912.f));
    __m512 r = _mm512_fnmadd_ps(k, S(0.6931472f), tl);
    __m512 p;
    if (v & NO_POLY) {
        p = _mm512_maskz_mov_ps(live, r); /* the three fmas gone, the mask kept */
    } else {
        p = _mm512_fmadd_ps(S(0.0839608f), r, S(0.2525118f));
        p = _mm512_fmadd_ps(p, r, S(0.4999811f));
        p = _mm512_maskz_fmadd_ps(live, p, r, S(0.4999622f));
    }
    __m512 s = _mm512_mul_ps(p, S(-0.7f));
    __m512 e = (v & NO_EXP_BITS) ? _mm512_add_ps(k, S(-20.f)) /* exp_cuts.c's B */
                                 : _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_castps_si512(j), _mm512_set1_epi32(0x4B400000 + 20)));
    __m512 o = (v & NO_SCALEF) ? _mm512_mul_ps(s, e) : _mm512_scalef_ps(s, e);
    if (v & NO_CVT_OUT)
        _mm512_storeu_ps((float *)dst + i, o);
    else
        _mm256_storeu_si256((__m256i *)((uint16_t *)dst + i), _mm512_cvtps_ph(o, 0));
}

#define VARIANT(V)                                                                  \
    __attribute__((noinline)) static void loop_##V(const void *src, void *dst, long n) { \
        for (long i = 0; i < n; i += 16) body(src, dst, i, V);                      \
    }
VARIANT(0)
VARIANT(1)
VARIANT(2)
VARIANT(4)
VARIANT(8)
VARIANT(16)
VARIANT(32)
VARIANT(64)
VARIANT(3)
VARIANT(51)

static const struct {
    int v;
    void (*fn)(const void *, void *, long);
    const char *what;
} VARIANTS[] = {
    {0, loop_0, "A's body"},
    {1, loop_1, "without vscalefps (a vmulps)"},
    {2, loop_2, "without the polynomial's three fmas"},
    {4, loop_4, "without the vcvtph2ps (float32 in)"},
    {8, loop_8, "without the vcvtps2ph (float32 out)"},
    {16, loop_16, "without the zero mask"},
    {32, loop_32, "without the two clamps"},
    {64, loop_64, "the exponent in float (exp_cuts.c's B)"},
    {3, loop_3, "without vscalefps and the fmas"},
    {51, loop_51, "without vscalefps, the fmas, the mask and the clamps"},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void) {
    long n = 65536;
    int reps = 4000;
    float *a = aligned_alloc(64, n * 4), *b = aligned_alloc(64, n * 4 + 4096);
    memset(a, 0, n * 4);
    for (unsigned q = 0; q < sizeof VARIANTS / sizeof *VARIANTS; q++) {
        double best = 1e9;
        for (int tr = 0; tr < 5; tr++) {
            double t0 = now();
            for (int r = 0; r < reps; r++) VARIANTS[q].fn(a, b + 1024, n); /* out 4 KiB off in: no 4K aliasing */
            double dt = (now() - t0) / reps / n * 1e9;
            if (dt < best) best = dt;
        }
        printf("%-52s %6.2f cycles/16\n", VARIANTS[q].what, best * 3.66 * 16);
    }
    return 0;
}
