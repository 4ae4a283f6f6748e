/* Section 47 of results/performance.md: the cuts section 35 counted for the 16-bit exp loop
 * (kl_div with log_target, float16, 0-d gradient: out = float16(-exp(t) * g * cof)), measured.
 * Not part of the package; built and driven by exp_cuts.py.
 *   A: the shipped formula (kernels/ops/kl_div.py, _log_value with _SHORT and one_step), as
 *      numba's vector body has it: clamp, k by the 1.5 * 2^23 rounding, one-fma reduction,
 *      degree-3 polynomial, the zero mask, p * (g * -m), then 2^k from j's bits (vpaddd, vcvtdq2ps)
 *      through vscalefps;
 *   B: A with the scale's exponent as k + c in float (one vaddps for vpaddd + vcvtdq2ps);
 *   C: B with g * -m folded into the polynomial's coefficients (a loop constant with a 0-d
 *      gradient: no vmulps);
 *   D: a 32-entry table of 2^(i/32) in two registers (vpermi2ps on j's low 5 bits), |r| <=
 *      ln2/64, a degree-1 polynomial with g * -m folded in, the exponent k/32 + c in one fma
 *      (vscalefps floors it). */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

static const float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f, ROUND = 12582912.0f;
static const float LO = -194.0f, HI = 237.0f, EXP64_ZERO = -745.13324f;
/* exp(r) on |r| <= ln2/2, halved (kl_div.py's _SHORT) */
static const float C3[4] = {0.9999244809150696f / 2, 0.9999622702598572f / 2, 0.5050235390663147f / 2,
                            0.16792160272598267f / 2};

typedef struct {
    float c[4], d0, d1, tab[32], gm;
    int shift;
} Consts;

static float tab_c1, tab_c0; /* the degree-1 fit, set by exp_init */

/* The degree-1 minimax line of exp on |r| <= ln2/64 (equioscillation: error at -a, the tangent
 * point and a equal), halved like _SHORT. */
void exp_init(void) {
    double a = log(2.0) / 64, c1 = (exp(a) - exp(-a)) / (2 * a), x = log(c1);
    double err = (exp(a) - c1 * a - exp(x) + c1 * x) / 2; /* half the gap at a and at the tangent */
    tab_c1 = (float)(c1 / 2);
    tab_c0 = (float)((exp(x) - c1 * x + err) / 2);
}

static void consts(Consts *k, float g, float cof) {
    int e;
    float m = frexpf(cof, &e);
    k->gm = g * -m;
    k->shift = e;
    for (int i = 0; i < 4; i++) k->c[i] = C3[i] * k->gm;
    k->d0 = tab_c0 * k->gm;
    k->d1 = tab_c1 * k->gm;
    for (int i = 0; i < 32; i++) k->tab[i] = (float)exp2(i / 32.0);
}

static inline __m512 body(__m512 t, int mode, const Consts *q) {
    const __m512 tl = _mm512_max_ps(t, _mm512_set1_ps(LO)); /* t first: a NaN t is kept */
    const __m512 tc = _mm512_min_ps(tl, _mm512_set1_ps(HI));
    const __mmask16 live = _mm512_cmp_ps_mask(t, _mm512_set1_ps(EXP64_ZERO), _CMP_NLE_UQ);
    if (mode == 3) {
        __m512 j = _mm512_fmadd_ps(tc, _mm512_set1_ps(32 * LOG2E), _mm512_set1_ps(ROUND));
        __m512 k = _mm512_sub_ps(j, _mm512_set1_ps(ROUND));
        __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(LN2 / 32), tl);
        __m512 s = _mm512_maskz_fmadd_ps(live, _mm512_set1_ps(q->d1), r, _mm512_set1_ps(q->d0));
        __m512 tv = _mm512_permutex2var_ps(_mm512_loadu_ps(q->tab), _mm512_castps_si512(j), _mm512_loadu_ps(q->tab + 16));
        __m512 e = _mm512_fmadd_ps(k, _mm512_set1_ps(1.0f / 32), _mm512_set1_ps((float)(1 + q->shift)));
        return _mm512_scalef_ps(_mm512_mul_ps(s, tv), e);
    }
    __m512 j = _mm512_fmadd_ps(tc, _mm512_set1_ps(LOG2E), _mm512_set1_ps(ROUND));
    __m512 k = _mm512_sub_ps(j, _mm512_set1_ps(ROUND));
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(LN2), tl);
    const float *c = mode == 2 ? q->c : C3;
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(c[3]), r, _mm512_set1_ps(c[2]));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c[1]));
    p = _mm512_maskz_fmadd_ps(live, p, r, _mm512_set1_ps(c[0]));
    __m512 s = mode == 2 ? p : _mm512_mul_ps(p, _mm512_set1_ps(q->gm));
    __m512 e;
    if (mode == 0) {
        const int bits = 0x4B400000 - 1 - q->shift;
        e = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_castps_si512(j), _mm512_set1_epi32(bits)));
    } else {
        e = _mm512_add_ps(k, _mm512_set1_ps((float)(1 + q->shift)));
    }
    return _mm512_scalef_ps(s, e);
}

#define LOOP(MODE)                                                                                  \
    for (long i = start; i < start + share; i += 16) {                                               \
        __m512 t = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i)));                  \
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(body(t, MODE, &own), _MM_FROUND_TO_NEAREST_INT)); \
    }

/* out = float16(-exp(t) * g * cof) for float16 t, n a multiple of 32 * threads. */
void exp_loop(const uint16_t *src, uint16_t *dst, long n, float g, float cof, int mode, int threads) {
    Consts q;
    consts(&q, g, cof);
#pragma omp parallel num_threads(threads)
    {
        long share = n / omp_get_num_threads(), start = omp_get_thread_num() * share;
        const Consts own = q; /* the thread's own copy: out's stores cannot alias it, so its loads leave the loop */
        /* one loop per mode, so each body is compiled with its mode a constant */
        switch (mode) {
        case 0: LOOP(0) break;
        case 1: LOOP(1) break;
        case 2: LOOP(2) break;
        default: LOOP(3) break;
        }
    }
}

void copy16(const uint16_t *src, uint16_t *dst, long n, int threads) {
#pragma omp parallel num_threads(threads)
    {
        long share = n / omp_get_num_threads(), start = omp_get_thread_num() * share;
        memcpy(dst + start, src + start, (size_t)share * 2);
    }
}
