// Section 70 of results/performance.md: the float16 twin with its flag taken from the target's raw
// patterns (a vpmaxuw of |bits| per 16, compared once after the loop: what cpu_loops.RAW_FLAG
// builds, there as vpmaxuw + vpmaxsw for the two signs) against the flag as a min and max of e;
// each with the scale as a multiply by 2^k or as an integer add into the exponent bits, and the
// vcvtps2ph into a register then a plain store (an empty asm keeps gcc from folding the store).
// One thread, in L1, best of 21 rounds (exp_parts.c's time_all). Timing only: the constants are
// placeholders. gcc -O2 -march=native exp_flag.c -o exp_flag && ./exp_flag
#define main exp_parts_main
#include "exp_parts.c"
#undef main
static volatile long tflag;
// VARIANT bits: 1 = int add for the power (no vmulps), 2 = flag on raw halves (max of |bits|) instead of min/max of e, 4 = cvtps2ph to a register then a plain store
#define BEST(NAME, V) \
__attribute__((noinline)) void NAME(const uint16_t* t, uint16_t* o, const float* tf, float* of, size_t n, float cf) { CONSTS \
  const __m512i bias2 = _mm512_set1_epi32(-0x4b400000 + 127); __m512i hiv = _mm512_setzero_si512(), lov = _mm512_set1_epi32(128); __m256i hw = _mm256_setzero_si256(); \
  const __m256i absw = _mm256_set1_epi16(0x7fff); const __m512i bias3 = _mm512_set1_epi32(-0x4b400000); \
  for (size_t i = 0; i < n; i += 16) { \
    __m256i raw = _mm256_loadu_si256((const __m256i*)(t + i)); \
    if ((V) & 2) { hw = _mm256_max_epu16(hw, _mm256_and_si256(raw, absw)); __asm__("" : "+v"(raw)); } \
    __m512 v = _mm512_cvtph_ps(raw); \
    __m512 kf = _mm512_fmadd_ps(v, l2e, magic); \
    __m512 r0 = _mm512_sub_ps(kf, magic); \
    __m512 r = _mm512_fnmadd_ps(r0, nln2, v); \
    __m512 p = _mm512_fmadd_ps(r, a3, a2); p = _mm512_fmadd_ps(r, p, a1); p = _mm512_fmadd_ps(r, p, a0); \
    __m512 s = _mm512_mul_ps(p, cof); __m512 y; \
    if ((V) & 1) { __m512i kk = _mm512_add_epi32(_mm512_castps_si512(kf), bias3); y = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(s), _mm512_slli_epi32(kk, 23))); \
       if (!((V) & 2)) { hiv = _mm512_max_epi32(hiv, kk); lov = _mm512_min_epi32(lov, kk); } } \
    else { __m512i e = _mm512_add_epi32(_mm512_castps_si512(kf), bias2); y = _mm512_mul_ps(s, _mm512_castsi512_ps(_mm512_slli_epi32(e, 23))); \
       if (!((V) & 2)) { hiv = _mm512_max_epi32(hiv, e); lov = _mm512_min_epi32(lov, e); } } \
    __m256i h = _mm512_cvtps_ph(y, 4); if ((V) & 4) __asm__("" : "+v"(h)); \
    _mm256_storeu_si256((__m256i*)(o + i), h); } \
  tflag += _mm512_reduce_max_epi32(hiv) > 254 || _mm512_reduce_min_epi32(lov) < -200 || _mm256_movemask_epi8(_mm256_cmpgt_epi16(hw, _mm256_set1_epi16(0x5570))); }
BEST(b0, 0) BEST(b1, 1) BEST(b2, 2) BEST(b3, 3) BEST(b4, 4) BEST(b5, 5) BEST(b6, 6) BEST(b7, 7)
#define TWF(NAME) __attribute__((noinline)) void NAME(const uint16_t* t, uint16_t* o, const float* tf, float* of, size_t n, float cf) { CONSTS \
  const __m512i bias2 = _mm512_set1_epi32(-0x4b400000 + 127); \
  for (size_t i = 0; i < n; i += 16) { __m512 v = LOAD16; __m512 kf = _mm512_fmadd_ps(v, l2e, magic); __m512 r0 = _mm512_sub_ps(kf, magic); \
    __m512i e = _mm512_add_epi32(_mm512_castps_si512(kf), bias2); __m512 r = _mm512_fnmadd_ps(r0, nln2, v); \
    __m512 p = _mm512_fmadd_ps(r, a3, a2); p = _mm512_fmadd_ps(r, p, a1); p = _mm512_fmadd_ps(r, p, a0); \
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, cof), _mm512_castsi512_ps(_mm512_slli_epi32(e, 23))); STORE16; } }
TWF(noflag)
int main(void) {
  const fn f[] = {b0, b1, b2, b3, b4, b5, b6, b7, noflag};
  const char* const name[] = {"minmax e, vmulps power", "minmax k, int-add power", "raw-halves flag, vmulps", "raw-halves flag, int-add", "minmax e, vmulps, reg cvt", "minmax k, int-add, reg cvt", "raw flag, vmulps, reg cvt", "raw flag, int-add, reg cvt", "no flag (bound)"};
  time_all(f, name, sizeof f / sizeof f[0]);
  return 0;
}
