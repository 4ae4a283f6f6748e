// Section 72 of results/performance.md: KL log_target's float16 0-d loop (half_value, a float16
// target and out, a 0-d float16 gradient) at 2^24 elements, out of DRAM, on one and two threads,
// against a copy of the same bytes in the same process: is the Zen 3's 75% of the copy (section
// 63's report rows) the algorithm's bound or the library's overhead?
// The loop is exp_half.c's transcription of kl_div._log_value(_SHORT, True, ldexp_half), the
// shipped float16 loop (the clamps, the Cody-Waite step, the 4-term polynomial, the zero below
// -745, one clamped power of two). "cvt" is the loop's two F16C conversions and a multiply alone.
// "table, gather" and "table, scalar" are the table walk's way (cpu_loops._look_up, Variant.TABLE):
// out's pattern for each of the 65536 target patterns, built once (not timed), then one 8-lane
// vpgatherdd of 4 bytes at entry t per 8 elements, packed to 16 bits; or one load per element.
//   gcc -O2 -mavx2 -mfma -mf16c -fopenmp exp_half_dram.c -o /tmp/exp_half_dram && /tmp/exp_half_dram 11
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec a;
  clock_gettime(CLOCK_MONOTONIC, &a);
  return a.tv_sec + a.tv_nsec * 1e-9;
}

static void copy(const uint16_t *t, uint16_t *o, long n, float G, int off) {
  (void)G, (void)off;
  for (long i = 0; i < n; i += 16) _mm256_storeu_si256((__m256i *)(o + i), _mm256_loadu_si256((const __m256i *)(t + i)));
}

static void cvt(const uint16_t *t, uint16_t *o, long n, float G, int off) {
  (void)off;
  const __m256 g = _mm256_set1_ps(G);
  for (long i = 0; i < n; i += 8)
    _mm_storeu_si128((__m128i *)(o + i),
                     _mm256_cvtps_ph(_mm256_mul_ps(g, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + i)))), 4));
}

static void hh(const uint16_t *t, uint16_t *o, long n, float G, int off) {
  const __m256 lo = _mm256_set1_ps(-194.f), hi = _mm256_set1_ps(237.f), l2e = _mm256_set1_ps(1.4426950408889634f),
               rnd = _mm256_set1_ps(12582912.f), ln2 = _mm256_set1_ps(0.6931471805599453f),
               c0 = _mm256_set1_ps(0.49996224f), c1 = _mm256_set1_ps(0.49998113f), c2 = _mm256_set1_ps(0.2525117f),
               c3 = _mm256_set1_ps(0.0839608f), z = _mm256_set1_ps(-745.13324f), g = _mm256_set1_ps(G);
  const __m256i offv = _mm256_set1_epi32(off), kmin = _mm256_set1_epi32(-126), kmax = _mm256_set1_epi32(127),
                bias = _mm256_set1_epi32(127 << 23);
  for (long i = 0; i < n; i += 8) {
    __m256 tv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + i)));
    __m256 tl = _mm256_max_ps(tv, lo), tc = _mm256_min_ps(tl, hi);
    __m256 j = _mm256_fmadd_ps(tc, l2e, rnd), k = _mm256_sub_ps(j, rnd);
    __m256 r = _mm256_fnmadd_ps(k, ln2, tl);
    __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_fmadd_ps(c3, r, c2), r, c1), r, c0);
    p = _mm256_and_ps(p, _mm256_cmp_ps(tv, z, _CMP_NLE_UQ));
    __m256 s = _mm256_mul_ps(p, g);
    __m256i ki = _mm256_add_epi32(_mm256_castps_si256(j), offv);
    ki = _mm256_min_epi32(_mm256_max_epi32(ki, kmin), kmax);
    __m256 sc = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(ki, 23), bias));
    _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(_mm256_mul_ps(s, sc), 4));
  }
}

static uint16_t *TABLE;  // 65536 + 2 entries: a gather reads 4 bytes at entry i

static void gather(const uint16_t *t, uint16_t *o, long n, float G, int off) {
  (void)G, (void)off;
  const __m256i low = _mm256_set1_epi32(0xffff);
  for (long i = 0; i < n; i += 16) {
    __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(t + i)));
    __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(t + i + 8)));
    a = _mm256_and_si256(_mm256_i32gather_epi32((const int *)TABLE, a, 2), low);
    b = _mm256_and_si256(_mm256_i32gather_epi32((const int *)TABLE, b, 2), low);
    _mm256_storeu_si256((__m256i *)(o + i), _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8));
  }
}

static void scalar(const uint16_t *t, uint16_t *o, long n, float G, int off) {
  (void)G, (void)off;
  for (long i = 0; i < n; i++) o[i] = TABLE[t[i]];
}

typedef void (*loop)(const uint16_t *, uint16_t *, long, float, int);

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 11;
  if (reps < 1 || reps > 64) return fprintf(stderr, "rounds: expected 1 to 64, got %d\n", reps), 2;
  const long n = 1L << 24;
  uint16_t *t = aligned_alloc(64, n * 2), *o = aligned_alloc(64, n * 2);
  for (long i = 0; i < n; i++) t[i] = 0x3400 + (rand() & 0x3ff);  // t in [0.25, 0.5): no clamp is hit
  memset(o, 0, n * 2);
  enum { LOOPS = 5 };
  const char *names[] = {"copy", "cvt", "exp (hh)", "table, gather", "table, scalar"};
  loop loops[] = {copy, cvt, hh, gather, scalar};
  double med[2][LOOPS], lo_[2][LOOPS], hi_[2][LOOPS];
  TABLE = aligned_alloc(64, (65536 + 32) * 2);
  uint16_t *pattern = aligned_alloc(64, 65536 * 2);
  for (long i = 0; i < 65536; i++) pattern[i] = (uint16_t)i;
  hh(pattern, TABLE, 65536, -1.3f, -12582912 + 16);  // the formula's bits for every pattern
  TABLE[65536] = TABLE[65537] = 0;
  uint16_t *check = aligned_alloc(64, n * 2), *want = aligned_alloc(64, n * 2);
  hh(t, want, n, -1.3f, -12582912 + 16);
  gather(t, check, n, 0, 0);
  if (memcmp(check, want, n * 2)) return puts("gather: bits differ from the loop's"), 1;
  scalar(t, check, n, 0, 0);
  if (memcmp(check, want, n * 2)) return puts("scalar: bits differ from the loop's"), 1;
  for (int threads = 1; threads <= 2; threads++) {
    omp_set_num_threads(threads);
    double times[LOOPS][64];
    for (int r = 0; r < reps; r++)  // the loops interleaved round by round
      for (int v = 0; v < LOOPS; v++) {
        double a = now();
#pragma omp parallel
        {
          int id = omp_get_thread_num(), nt = omp_get_num_threads();
          long share = n / nt;
          loops[v](t + id * share, o + id * share, share, -1.3f, -12582912 + 16);
        }
        times[v][r] = now() - a;
      }
    for (int v = 0; v < LOOPS; v++) {
      qsort(times[v], reps, sizeof(double), cmp);
      med[threads - 1][v] = times[v][reps / 2], lo_[threads - 1][v] = times[v][0], hi_[threads - 1][v] = times[v][reps - 1];
    }
  }
  printf("# 2^24 float16 in and out (64 MiB moved), %d interleaved rounds; medians (min-max) in us\n", reps);
  printf("| loop | 1 thread | 2 threads | 2 threads / 1 | copy / loop, 2 threads (%% of the copy) |\n|---|---|---|---|---|\n");
  for (int v = 0; v < LOOPS; v++)
    printf("| %s | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %.2f | %.0f%% |\n", names[v], med[0][v] * 1e6, lo_[0][v] * 1e6,
           hi_[0][v] * 1e6, med[1][v] * 1e6, lo_[1][v] * 1e6, hi_[1][v] * 1e6, med[1][v] / med[0][v],
           100 * med[1][0] / med[1][v]);
  printf("copy at 2 threads: %.1f GB/s\n", 4.0 * n / med[1][0] / 1e9);
  return 0;
}
