// Probe (performance.md section 45): 8x8 float32 register transposes of a 64x64 tile (16 KiB, in L1)
// into another, three ways, one thread; ns per element. The cross-lane round is the one the
// lanes-first prototype (lanes_first-2p22.txt) moved to the loads. Evidence run by hand.
//   gcc -O2 -march=native transposes8x8.c -o t8 && ./t8
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define N 64
static float src[N * N] __attribute__((aligned(64))), dst[N * N] __attribute__((aligned(64)));

static inline void tr8_inreg(__m256 r[8]) {  // after the cross-lane step: two in-lane rounds
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  r[0] = _mm256_shuffle_ps(t0, t2, 0x44); r[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  r[2] = _mm256_shuffle_ps(t1, t3, 0x44); r[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
  r[4] = _mm256_shuffle_ps(t4, t6, 0x44); r[5] = _mm256_shuffle_ps(t4, t6, 0xEE);
  r[6] = _mm256_shuffle_ps(t5, t7, 0x44); r[7] = _mm256_shuffle_ps(t5, t7, 0xEE);
}

// A: whole-row loads, two in-lane rounds, vperm2f128 cross-lane round (24 shuffles / 64)
static void blockA(const float *s, float *d) {
  __m256 r[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_load_ps(s + i * N);
  tr8_inreg(r);
  // rows now: r0 = cols 0|4 of rows 0-3|... standard finish
  __m256 o[8];
  o[0] = _mm256_permute2f128_ps(r[0], r[4], 0x20); o[4] = _mm256_permute2f128_ps(r[0], r[4], 0x31);
  o[1] = _mm256_permute2f128_ps(r[1], r[5], 0x20); o[5] = _mm256_permute2f128_ps(r[1], r[5], 0x31);
  o[2] = _mm256_permute2f128_ps(r[2], r[6], 0x20); o[6] = _mm256_permute2f128_ps(r[2], r[6], 0x31);
  o[3] = _mm256_permute2f128_ps(r[3], r[7], 0x20); o[7] = _mm256_permute2f128_ps(r[3], r[7], 0x31);
  for (int i = 0; i < 8; i++) _mm256_store_ps(d + i * N, o[i]);
}
// B: rows assembled from 128-bit halves at load time (vinsertf128 m128), 16 shuffles / 64
static void blockB(const float *s, float *d) {
  __m256 r[8];
  for (int i = 0; i < 4; i++) {
    r[i] = _mm256_loadu2_m128(s + (i + 4) * N, s + i * N);          // lo: row i[0:4], hi: row i+4[0:4]
    r[i + 4] = _mm256_loadu2_m128(s + (i + 4) * N + 4, s + i * N + 4);  // lo: row i[4:8], hi: row i+4[4:8]
  }
  tr8_inreg(r);
  for (int i = 0; i < 8; i++) _mm256_store_ps(d + i * N, r[i]);
}
// C: the same halves from a zero-extending xmm load and a broadcast load, merged by a blend;
// an asm barrier keeps the compiler from folding the pair back into vinsertf128.
static inline __m256 halves(const float *lo, const float *hi) {
  __m256 a = _mm256_castps128_ps256(_mm_load_ps(lo));
  __m256 b = _mm256_broadcast_ps((const __m128 *)hi);
  __asm__("" : "+x"(b));
  return _mm256_blend_ps(a, b, 0xF0);
}
static void blockC(const float *s, float *d) {
  __m256 r[8];
  for (int i = 0; i < 4; i++) {
    r[i] = halves(s + i * N, s + (i + 4) * N);
    r[i + 4] = halves(s + i * N + 4, s + (i + 4) * N + 4);
  }
  tr8_inreg(r);
  for (int i = 0; i < 8; i++) _mm256_store_ps(d + i * N, r[i]);
}
typedef void (*blk)(const float *, float *);
static double run(blk f, int side, int reps) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int k = 0; k < reps; k++)
    for (int bi = 0; bi < N; bi += side)
      for (int bj = 0; bj < N; bj += side) f(src + bi * N + bj, dst + bj * N + bi);
  clock_gettime(CLOCK_MONOTONIC, &b);
  return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / ((double)reps * N * N);
}
static int check(blk f, int side) {
  for (int i = 0; i < N * N; i++) src[i] = i;
  for (int bi = 0; bi < N; bi += side) for (int bj = 0; bj < N; bj += side) f(src + bi * N + bj, dst + bj * N + bi);
  // each block's mapping must be a transpose, up to the order of output rows within the block
  for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) if (dst[j * N + i] != src[i * N + j]) return 0;
  return 1;
}
int main(void) {
  const char *names[] = {"A 8x8 ymm, vperm2f128", "B 8x8 ymm, vinsertf128 m128 halves", "C 8x8 ymm, broadcast + blend halves"};
  blk fs[] = {blockA, blockB, blockC};
  int sides[] = {8, 8, 8};
  for (int v = 0; v < 3; v++) printf("%s: %s\n", names[v], check(fs[v], sides[v]) ? "correct" : "WRONG");
  for (int round = 0; round < 5; round++) {
    printf("round %d:", round);
    for (int v = 0; v < 3; v++) printf("  %c %.3f ns/el", names[v][0], run(fs[v], sides[v], 20000));
    printf("\n");
  }
}
