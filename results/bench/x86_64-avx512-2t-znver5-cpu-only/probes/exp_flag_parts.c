// Section 70 of results/performance.md: what the checked twin's per-element flag costs in the Zen 5's
// float16 KL log_target loop, and what bounds the loop without it. The twin of exp_twin.c ("twin
// f16": k's add, an unsigned compare and a mask OR per 16 elements) against the same loop with
// the flag as a vector max of (e - 1), as a min and max of e, without a flag (a bound), with
// Estrin's polynomial, two independent streams, and float32 in place of each 16-bit conversion.
// One thread, in L1, best of 21 rounds (exp_parts.c's time_all). Timing only: the constants are
// placeholders. gcc -O2 -march=native exp_flag_parts.c -o exp_flag_parts && ./exp_flag_parts
#define main exp_parts_main
#include "exp_parts.c"
#undef main
// f16 twin as shipped in exp_twin.c, and variants: Estrin polynomial; no flag; float32 in/out.
static volatile long tflag;
#define TW(NAME, LOAD, STORE, POLY, FLAG) \
__attribute__((noinline)) void NAME(const uint16_t* t, uint16_t* o, const float* tf, float* of, size_t n, float cf) { CONSTS \
  const __m512i bias2 = _mm512_set1_epi32(-0x4b400000 + 127), c253 = _mm512_set1_epi32(253); __mmask16 acc = 0; __m512i hiv = _mm512_setzero_si512(), lo_ = _mm512_set1_epi32(128); \
  for (size_t i = 0; i < n; i += 16) { \
    __m512 v = LOAD; \
    __m512 kf = _mm512_fmadd_ps(v, l2e, magic); \
    __m512 r0 = _mm512_sub_ps(kf, magic); \
    __m512i e = _mm512_add_epi32(_mm512_castps_si512(kf), bias2); \
    __m512 r = _mm512_fnmadd_ps(r0, nln2, v); \
    __m512 p; POLY; \
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, cof), _mm512_castsi512_ps(_mm512_slli_epi32(e, 23))); \
    if (FLAG == 1) acc |= _mm512_cmpgt_epu32_mask(_mm512_sub_epi32(e, one), c253); \
    if (FLAG == 2) hiv = _mm512_max_epu32(hiv, _mm512_sub_epi32(e, one)); \
    if (FLAG == 3) { hiv = _mm512_max_epi32(hiv, e); lo_ = _mm512_min_epi32(lo_, e); } \
    STORE; } \
  tflag += acc != 0 || _mm512_reduce_max_epu32(hiv) > 253 || _mm512_reduce_min_epi32(lo_) < 1; }

#define HORNER p = _mm512_fmadd_ps(r, a3, a2); p = _mm512_fmadd_ps(r, p, a1); p = _mm512_fmadd_ps(r, p, a0);
#define ESTRIN { __m512 r2 = _mm512_mul_ps(r, r); __m512 lo_ = _mm512_fmadd_ps(r, a1, a0), hi_ = _mm512_fmadd_ps(r, a3, a2); p = _mm512_fmadd_ps(r2, hi_, lo_); }
TW(tw, LOAD16, STORE16, HORNER, 1)
TW(tw_estrin, LOAD16, STORE16, ESTRIN, 1)
TW(tw_noflag, LOAD16, STORE16, HORNER, 0)
TW(tw_max, LOAD16, STORE16, HORNER, 2)
TW(tw_minmax, LOAD16, STORE16, HORNER, 3)
TW(tw_f32, LOAD32, STORE32, HORNER, 1)
TW(tw_f32in, LOAD32, STORE16, HORNER, 1)
TW(tw_f32out, LOAD16, STORE32, HORNER, 1)
// two independent halves per iteration, to see whether more in flight helps
__attribute__((noinline)) void tw_x2(const uint16_t* t, uint16_t* o, const float* tf, float* of, size_t n, float cf) { CONSTS
  const __m512i bias2 = _mm512_set1_epi32(-0x4b400000 + 127), c253 = _mm512_set1_epi32(253); __mmask16 acc = 0;
  size_t h = n / 2;
  for (size_t i = 0; i < h; i += 16) {
    for (int q = 0; q < 2; q++) { size_t ii = i + q * h;
    __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(t + ii)));
    __m512 kf = _mm512_fmadd_ps(v, l2e, magic); __m512 r0 = _mm512_sub_ps(kf, magic);
    __m512i e = _mm512_add_epi32(_mm512_castps_si512(kf), bias2); __m512 r = _mm512_fnmadd_ps(r0, nln2, v);
    __m512 p; HORNER
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, cof), _mm512_castsi512_ps(_mm512_slli_epi32(e, 23)));
    acc |= _mm512_cmpgt_epu32_mask(_mm512_sub_epi32(e, one), c253);
    _mm256_storeu_si256((__m256i*)(o + ii), _mm512_cvtps_ph(y, 4)); } }
  tflag += acc != 0; }
int main(void) {
  const fn f[] = {tw_max, tw_minmax, tw, tw_estrin, tw_noflag, tw_f32, tw_f32in, tw_f32out, tw_x2};
  const char* const name[] = {"twin f16 flag vpmaxud(e-1)", "twin f16 flag min/max e", "twin f16", "twin f16 estrin", "twin f16 no flag", "twin f32 io", "twin f32 in f16 out", "twin f16 in f32 out", "twin f16 two streams"};
  time_all(f, name, sizeof f / sizeof f[0]);
  return 0;
}
