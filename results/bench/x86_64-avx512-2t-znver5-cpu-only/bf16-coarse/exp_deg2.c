// Section 90 of results/performance.md: KL log_target's bfloat16 0-d loop as normal_run runs it (the
// twin, no per-element flag, the store by vcvtneps2bf16 alone), its exp at degree 3 against degree 2,
// and the bfloat16 load three ways (vpmovzxwd + vpslld as LLVM emits it, vpermw with a zeroing mask,
// vpexpandw). Timing only: the constants are placeholders (exp_parts.c's). One thread, 2^13
// elements (in L1), best of 21 rounds of 400 calls. gcc -O2 -march=native exp_deg2.c -o e && ./e
#define main exp_parts_main
#include "../probes/exp_parts.c"
#undef main
#define LOADBF_PERM _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, widx, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)(t + i)))))
#define LOADBF_EXP _mm512_castsi512_ps(_mm512_maskz_expandloadu_epi16(0xAAAAAAAAu, t + i))
#define POLY3 __m512 p = _mm512_fmadd_ps(r, a3, a2); p = _mm512_fmadd_ps(r, p, a1); p = _mm512_fmadd_ps(r, p, a0);
#define POLY2 __m512 p = _mm512_fmadd_ps(r, a2, a1); p = _mm512_fmadd_ps(r, p, a0);
#define NORMAL_DEF(NAME, LOAD, POLY) \
__attribute__((noinline)) void NAME(const uint16_t* t, uint16_t* o, const float* tf, float* of, size_t n, float cf) { CONSTS \
  const __m512i bias2 = _mm512_set1_epi32(-0x4b400000 + 127); \
  short wi[32]; for (int q = 0; q < 32; q++) wi[q] = q / 2; const __m512i widx = _mm512_loadu_si512(wi); (void)widx; \
  for (size_t i = 0; i < n; i += 16) { \
    __m512 v = LOAD; \
    __m512 kf = _mm512_fmsub_ps(v, l2e, magic); \
    __m512 r0 = _mm512_add_ps(kf, magic); \
    __m512i e = _mm512_add_epi32(_mm512_castps_si512(kf), bias2); \
    __m512 r = _mm512_fmadd_ps(r0, nln2, v); \
    POLY \
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, cof), _mm512_castsi512_ps(_mm512_slli_epi32(e, 23))); \
    STOREBF_NOFIX; } }
NORMAL_DEF(n3, LOADBF, POLY3)
NORMAL_DEF(n2, LOADBF, POLY2)
NORMAL_DEF(n3_perm, LOADBF_PERM, POLY3)
NORMAL_DEF(n3_exp, LOADBF_EXP, POLY3)
NORMAL_DEF(n2_perm, LOADBF_PERM, POLY2)
int main(void) {
  const fn f[] = {n3, n2, n3_perm, n3_exp, n2_perm, n3};
  const char* const name[] = {"degree 3, vpmovzxwd+vpslld (shipped)", "degree 2", "degree 3, vpermw{z} load", "degree 3, vpexpandw load", "degree 2, vpermw{z} load", "degree 3 again"};
  time_all(f, name, sizeof f / sizeof f[0]);
  return 0;
}
