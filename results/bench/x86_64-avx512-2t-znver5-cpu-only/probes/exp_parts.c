// Section 64 of results/performance.md: what KL log_target's 16-bit 0-d vector loop is made of on
// the Zen 5. The loop is numba's (inspect_asm of the "kl_div_log narrow scalar_grad" loop on this
// host: 16 vector instructions per 16 elements for float16, 21 for bfloat16), transcribed with
// intrinsics, with one part replaced at a time: the 16-bit loads and stores by float32 ones,
// vscalefps by a multiply, the bfloat16 store's subnormal fix-up (cpu_loops._f32_to_bf16_hw) dropped
// or done otherwise. The constants are placeholders, so the values are not the formula's: timing
// only (and the tile-flag variant counts flagged tiles instead of redoing them). One thread, 2^13
// elements (in L1), best of 21 rounds of 400 calls, each variant in every round.
//   gcc -O2 -march=native exp_parts.c -o exp_parts && ./exp_parts
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define CONSTS const __m512 lo=_mm512_set1_ps(-100.f), lo2=_mm512_set1_ps(-200.f), hi=_mm512_set1_ps(88.f), l2e=_mm512_set1_ps(1.4426950f), \
    magic=_mm512_set1_ps(12582912.f), nln2=_mm512_set1_ps(-0.6931472f), a3=_mm512_set1_ps(0.1666f), a2=_mm512_set1_ps(0.5f), \
    a1=_mm512_set1_ps(1.f), a0=_mm512_set1_ps(1.f), cof=_mm512_set1_ps(cf); const __m512i bias=_mm512_set1_epi32(-0x4b400000), expmask=_mm512_set1_epi32(0x7f800000), fix=_mm512_set1_epi32(0x00800000), one=_mm512_set1_epi32(1); const __m256i fixw=_mm256_set1_epi16(-0x80);
#define LOAD16 _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(t + i)))
#define LOAD32 _mm512_loadu_ps(tf + i)
#define STORE16 _mm256_storeu_si256((__m256i*)(o + i), _mm512_cvtps_ph(y, 4))
#define STORE32 _mm512_storeu_ps(of + i, y)
#define LOADBF _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(t + i))), 16))
#define STOREBF { __mmask16 z = _mm512_testn_epi32_mask(_mm512_castps_si512(y), expmask); \
    __m512 yy = _mm512_castsi512_ps(_mm512_mask_add_epi32(_mm512_castps_si512(y), z, _mm512_castps_si512(y), fix)); \
    __m256i h = (__m256i)_mm512_cvtneps_pbh(yy); h = _mm256_mask_add_epi16(h, z, h, fixw); _mm256_storeu_si256((__m256i*)(o + i), h); }
#define STOREBF_ARITH { __m512i u = _mm512_castps_si512(y); __m512i e = _mm512_and_si512(u, expmask); \
    __m512i add = _mm512_and_si512(_mm512_srai_epi32(_mm512_sub_epi32(e, one), 31), fix); \
    __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(_mm512_add_epi32(u, add))); \
    h = _mm256_sub_epi16(h, _mm512_cvtepi32_epi16(_mm512_srli_epi32(add, 16))); _mm256_storeu_si256((__m256i*)(o + i), h); }
#define STOREBF_CLASS { __mmask16 z = _mm512_fpclass_ps_mask(y, 0x26); \
    __m512 yy = _mm512_castsi512_ps(_mm512_mask_add_epi32(_mm512_castps_si512(y), z, _mm512_castps_si512(y), fix)); \
    __m256i h = (__m256i)_mm512_cvtneps_pbh(yy); h = _mm256_mask_add_epi16(h, z, h, fixw); _mm256_storeu_si256((__m256i*)(o + i), h); }
#define STOREBF_NOFIX _mm256_storeu_si256((__m256i*)(o + i), (__m256i)_mm512_cvtneps_pbh(y))
#define SCALEF _mm512_scalef_ps(_mm512_mul_ps(p, cof), _mm512_cvtepi32_ps(ki))
#define NOSCALEF _mm512_mul_ps(_mm512_mul_ps(p, cof), _mm512_castsi512_ps(ki))
// The loop body up to its result y, from the input at i: one source for DEF's loops and bf16_flag's.
#define EXP_BODY(LOAD, SCALE) \
    __m512 v = LOAD; \
    __m512 c = _mm512_max_ps(v, lo); __mmask16 k = _mm512_cmp_ps_mask(v, lo2, _CMP_NLE_UQ); \
    __m512 m = _mm512_min_ps(c, hi); \
    __m512 kf = _mm512_fmsub_ps(m, l2e, magic); \
    __m512 r0 = _mm512_add_ps(kf, magic); \
    __m512i ki = _mm512_add_epi32(_mm512_castps_si512(kf), bias); \
    __m512 r = _mm512_fmadd_ps(r0, nln2, c); \
    __m512 p = _mm512_fmadd_ps(r, a3, a2); p = _mm512_fmadd_ps(r, p, a1); \
    p = _mm512_maskz_fmadd_ps(k, r, p, a0); \
    __m512 y = SCALE;
#define DEF(NAME, LOAD, SCALE, STORE) \
__attribute__((noinline)) void NAME(const uint16_t* t, uint16_t* o, const float* tf, float* of, size_t n, float cf) { CONSTS \
  for (size_t i = 0; i < n; i += 16) { EXP_BODY(LOAD, SCALE) STORE; } }
DEF(shipped, LOAD16, SCALEF, STORE16)
DEF(f32_io, LOAD32, SCALEF, STORE32)
DEF(no_scalef, LOAD16, NOSCALEF, STORE16)
DEF(f32_no_scalef, LOAD32, NOSCALEF, STORE32)
DEF(bf16_shipped, LOADBF, SCALEF, STOREBF)
DEF(bf16_nofix, LOADBF, SCALEF, STOREBF_NOFIX)
DEF(f16_in_f32_out, LOAD16, SCALEF, STORE32)
DEF(f32_in_f16_out, LOAD32, SCALEF, STORE16)
DEF(bf16_arith, LOADBF, SCALEF, STOREBF_ARITH)
DEF(bf16_class, LOADBF, SCALEF, STOREBF_CLASS)
static volatile long flagged;
__attribute__((noinline)) void bf16_flag(const uint16_t* t, uint16_t* o, const float* tf, float* of, size_t n, float cf) { CONSTS
  __m512i least = _mm512_set1_epi32(-1);
  for (size_t i = 0; i < n; i += 16) {
    EXP_BODY(LOADBF, SCALEF)
    least = _mm512_min_epu32(least, _mm512_and_si512(_mm512_castps_si512(y), expmask));
    STOREBF_NOFIX; }
  flagged += _mm512_reduce_min_epu32(least) == 0;  // the shipped code would redo the tile with the fix-up; timed here without (the probe's values are not the formula's)
}
typedef void (*fn)(const uint16_t*, uint16_t*, const float*, float*, size_t, float);
// The loops f[0..count) on the same 2^13 elements, interleaved: the best of 21 rounds of 400 calls
// each, printed per 16 elements (exp_twin.c's main calls it too).
static void time_all(const fn* f, const char* const* name, int count) {
  size_t n = 1 << 13;
  uint16_t *t = aligned_alloc(64, n * 2), *o = aligned_alloc(64, n * 2); float *tf = aligned_alloc(64, n * 4), *of = aligned_alloc(64, n * 4);
  for (size_t i = 0; i < n; i++) { t[i] = 0x3c00 + (i % 1024); tf[i] = (float)(i % 1024) / 512.f; }
  double best[64]; for (int j = 0; j < count; j++) best[j] = 1e9;
  for (int round = 0; round < 21; round++)
    for (int j = 0; j < count; j++) { double s = now(); for (int r = 0; r < 400; r++) f[j](t, o, tf, of, n, 0.5f); double d = (now() - s) / 400; if (d < best[j]) best[j] = d; }
  for (int j = 0; j < count; j++) printf("%-38s %.3f ns per 16 elements\n", name[j], best[j] / (n / 16) * 1e9);
  printf("flagged tiles: %ld\n", (long)flagged);
}
int main(void) {
  const fn f[] = {shipped, f32_io, no_scalef, f32_no_scalef, bf16_shipped, bf16_nofix, f16_in_f32_out, f32_in_f16_out, bf16_arith, bf16_class, bf16_flag};
  const char* const name[] = {"shipped (f16 in/out, vscalefps)", "float32 in/out, vscalefps", "f16 in/out, vscalefps -> vmulps", "float32 in/out, vscalefps -> vmulps", "bf16 in/out as shipped (fix-up)", "bf16 in/out, no subnormal fix-up", "f16 in, float32 out", "float32 in, f16 out", "bf16, fix-up without masks", "bf16, fix-up: vfpclassps mask", "bf16, no fix-up, tile flag (min of exponents)"};
  time_all(f, name, sizeof f / sizeof f[0]);
  return 0;
}
