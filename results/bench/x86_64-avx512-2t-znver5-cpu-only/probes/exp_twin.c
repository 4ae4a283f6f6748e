// Section 68 of results/performance.md: the checked twin's loop (one power of two and a flag, the
// bfloat16 store without its subnormal fix-up) against the shipped one on the Zen 5, and the other
// variants tried, beside exp_parts.c's (section 64). "V": the shipped body with one part
// changed (the scale's exponent as a float add, no zeroing mask, cof folded into the polynomial's
// coefficients, all three); "T": the twin (no clamps, no mask, 2^k from exponent bits, the flag's
// unsigned compare ORed into a mask), its bfloat16 store with the fix-up, without it flagged three
// ways, and without it unflagged (a bound). Timing only: the constants are placeholders.
// exp_parts.c is included for its macros and loops (its main renamed away); the twin's variants and a
// main over all of them follow. gcc -O2 -march=native exp_twin.c -o exp_twin && ./exp_twin
#define main exp_parts_main
#include "exp_parts.c"
#undef main

#define SCALEF_FLT _mm512_scalef_ps(_mm512_mul_ps(p, cof), _mm512_add_ps(r0, cexp))
#define BODY_V(LOAD, SCALE, MASKED, FOLD) \
    __m512 v = LOAD; \
    __m512 c = _mm512_max_ps(v, lo); __mmask16 k = MASKED ? _mm512_cmp_ps_mask(v, lo2, _CMP_NLE_UQ) : (__mmask16)0xffff; \
    __m512 m = _mm512_min_ps(c, hi); \
    __m512 kf = _mm512_fmsub_ps(m, l2e, magic); \
    __m512 r0 = _mm512_add_ps(kf, magic); \
    __m512i ki = _mm512_add_epi32(_mm512_castps_si512(kf), bias); \
    __m512 r = _mm512_fmadd_ps(r0, nln2, c); \
    __m512 p = _mm512_fmadd_ps(r, FOLD ? b3 : a3, FOLD ? b2 : a2); p = _mm512_fmadd_ps(r, p, FOLD ? b1 : a1); \
    p = MASKED ? _mm512_maskz_fmadd_ps(k, r, p, FOLD ? b0 : a0) : _mm512_fmadd_ps(r, p, FOLD ? b0 : a0); \
    __m512 y = SCALE;
#define SCALEF_FOLD _mm512_scalef_ps(p, _mm512_cvtepi32_ps(ki))
#define SCALEF_FOLD_FLT _mm512_scalef_ps(p, _mm512_add_ps(r0, cexp))
#define DEFV(NAME, LOAD, SCALE, STORE, MASKED, FOLD) \
__attribute__((noinline)) void NAME(const uint16_t* t, uint16_t* o, const float* tf, float* of, size_t n, float cf) { CONSTS \
  const __m512 cexp = _mm512_set1_ps(3.f), b3 = _mm512_mul_ps(a3, cof), b2 = _mm512_mul_ps(a2, cof), b1 = _mm512_mul_ps(a1, cof), b0 = _mm512_mul_ps(a0, cof); \
  for (size_t i = 0; i < n; i += 16) { BODY_V(LOAD, SCALE, MASKED, FOLD) STORE; } }
DEFV(v_ship, LOAD16, SCALEF, STORE16, 1, 0)
DEFV(v_flt, LOAD16, SCALEF_FLT, STORE16, 1, 0)
DEFV(v_nomask, LOAD16, SCALEF, STORE16, 0, 0)
DEFV(v_fold, LOAD16, SCALEF_FOLD, STORE16, 1, 1)
DEFV(v_all, LOAD16, SCALEF_FOLD_FLT, STORE16, 0, 1)
DEFV(v_flt_nomask, LOAD16, SCALEF_FLT, STORE16, 0, 0)
DEFV(b_ship, LOADBF, SCALEF, STOREBF, 1, 0)
DEFV(b_all, LOADBF, SCALEF_FOLD_FLT, STOREBF, 0, 1)
DEFV(b_all_nofix, LOADBF, SCALEF_FOLD_FLT, STOREBF_NOFIX, 0, 1)
DEFV(v_fold_nomask, LOAD16, SCALEF_FOLD, STORE16, 0, 1)
DEFV(b_fold_nomask, LOADBF, SCALEF_FOLD, STOREBF, 0, 1)
DEFV(b_fold_nomask_nofix, LOADBF, SCALEF_FOLD, STOREBF_NOFIX, 0, 1)


static volatile long tflag;
#define TWIN_DEF(NAME, LOAD, STORE, FLAGEXPR) \
__attribute__((noinline)) void NAME(const uint16_t* t, uint16_t* o, const float* tf, float* of, size_t n, float cf) { CONSTS \
  const __m512i bias2 = _mm512_set1_epi32(-0x4b400000 + 127), c253 = _mm512_set1_epi32(253); __mmask16 acc = 0; __m512i least = _mm512_set1_epi32(-1); \
  for (size_t i = 0; i < n; i += 16) { \
    __m512 v = LOAD; \
    __m512 kf = _mm512_fmsub_ps(v, l2e, magic); \
    __m512 r0 = _mm512_add_ps(kf, magic); \
    __m512i e = _mm512_add_epi32(_mm512_castps_si512(kf), bias2); \
    __m512 r = _mm512_fmadd_ps(r0, nln2, v); \
    __m512 p = _mm512_fmadd_ps(r, a3, a2); p = _mm512_fmadd_ps(r, p, a1); p = _mm512_fmadd_ps(r, p, a0); \
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, cof), _mm512_castsi512_ps(_mm512_slli_epi32(e, 23))); \
    acc |= _mm512_cmpgt_epu32_mask(_mm512_sub_epi32(e, one), c253); \
    FLAGEXPR; \
    STORE; } \
  tflag += acc != 0 || _mm512_reduce_min_epu32(least) == 0; }
TWIN_DEF(t_bf16_nofix_mask, LOADBF, STOREBF_NOFIX, acc |= _mm512_testn_epi32_mask(_mm512_castps_si512(y), expmask))
TWIN_DEF(t_bf16_nofix_min, LOADBF, STOREBF_NOFIX, least = _mm512_min_epu32(least, _mm512_and_si512(_mm512_castps_si512(y), expmask)))
TWIN_DEF(t_bf16_nofix_exact, LOADBF, STOREBF_NOFIX, acc |= _mm512_cmplt_epu32_mask(_mm512_sub_epi32(_mm512_slli_epi32(_mm512_castps_si512(y), 1), one), _mm512_set1_epi32(0x00FFFFFF)))
TWIN_DEF(t_bf16_nofix_none, LOADBF, STOREBF_NOFIX, (void)0)
TWIN_DEF(t_f16, LOAD16, STORE16, (void)0)
TWIN_DEF(t_bf16, LOADBF, STOREBF, (void)0)
int main(void) {
  const fn f[] = {t_bf16_nofix_exact, t_bf16_nofix_mask, t_bf16_nofix_min, t_bf16_nofix_none, t_f16, t_bf16, v_fold_nomask, b_fold_nomask, b_fold_nomask_nofix, v_ship, v_flt, v_nomask, v_fold, v_all, v_flt_nomask, b_ship, b_all, b_all_nofix, shipped, f32_io, no_scalef, f32_no_scalef, bf16_shipped, bf16_nofix, f16_in_f32_out, f32_in_f16_out, bf16_arith, bf16_class, bf16_flag};
  const char* const name[] = {"T bf16 twin nofix, exact subnormal flag (shipped)", "T bf16 twin nofix, testn mask flag", "T bf16 twin nofix, min flag", "T bf16 twin nofix, no flag", "T f16 twin one power", "T bf16 twin one power", "V f16 fold+nomask", "V bf16 fold+nomask", "V bf16 fold+nomask nofix", "V f16 shipped", "V f16 float exponent", "V f16 no mask", "V f16 cof folded", "V f16 all three", "V f16 flt+nomask", "V bf16 shipped", "V bf16 all three", "V bf16 all three nofix", "shipped (f16 in/out, vscalefps)", "float32 in/out, vscalefps", "f16 in/out, vscalefps -> vmulps", "float32 in/out, vscalefps -> vmulps", "bf16 in/out as shipped (fix-up)", "bf16 in/out, no subnormal fix-up", "f16 in, float32 out", "float32 in, f16 out", "bf16, fix-up without masks", "bf16, fix-up: vfpclassps mask", "bf16, no fix-up, tile flag (min of exponents)"};
  time_all(f, name, sizeof f / sizeof f[0]);
  return 0;
}
