#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
static double now(){struct timespec a; clock_gettime(CLOCK_MONOTONIC,&a); return a.tv_sec+a.tv_nsec*1e-9;}
#define BODY(LOAD, STORE) \
  const __m256 lo=_mm256_set1_ps(-194.f), hi=_mm256_set1_ps(237.f), l2e=_mm256_set1_ps(1.4426950408889634f), \
   rnd=_mm256_set1_ps(12582912.f), ln2=_mm256_set1_ps(0.6931471805599453f), c0=_mm256_set1_ps(0.49996224f), \
   c1=_mm256_set1_ps(0.49998113f), c2=_mm256_set1_ps(0.2525117f), c3=_mm256_set1_ps(0.0839608f), z=_mm256_set1_ps(-745.13324f), g=_mm256_set1_ps(G); \
  const __m256i offv=_mm256_set1_epi32(off), kmin=_mm256_set1_epi32(-126), kmax=_mm256_set1_epi32(127), bias=_mm256_set1_epi32(127<<23); \
  for (long i=0;i<n;i+=8){ __m256 tv=LOAD; \
    __m256 tl=_mm256_max_ps(tv,lo), tc=_mm256_min_ps(tl,hi); \
    __m256 j=_mm256_fmadd_ps(tc,l2e,rnd); __m256 k=_mm256_sub_ps(j,rnd); \
    __m256 r=_mm256_fnmadd_ps(k,ln2,tl); \
    __m256 p=_mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_fmadd_ps(c3,r,c2),r,c1),r,c0); \
    p=_mm256_and_ps(p,_mm256_cmp_ps(tv,z,_CMP_NLE_UQ)); \
    __m256 s=_mm256_mul_ps(p,g); \
    __m256i ki=_mm256_add_epi32(_mm256_castps_si256(j),offv); \
    ki=_mm256_min_epi32(_mm256_max_epi32(ki,kmin),kmax); \
    __m256 sc=_mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(ki,23),bias)); \
    __m256 v=_mm256_mul_ps(s,sc); STORE; }
__attribute__((noinline)) void hh(const uint16_t* t, uint16_t* o, long n, float G, int off) { BODY(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(t+i))), _mm_storeu_si128((__m128i*)(o+i), _mm256_cvtps_ph(v,4))) }
__attribute__((noinline)) void hf(const uint16_t* t, float* o, long n, float G, int off) { BODY(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(t+i))), _mm256_storeu_ps(o+i, v)) }
__attribute__((noinline)) void fh(const float* t, uint16_t* o, long n, float G, int off) { BODY(_mm256_loadu_ps(t+i), _mm_storeu_si128((__m128i*)(o+i), _mm256_cvtps_ph(v,4))) }
__attribute__((noinline)) void ff(const float* t, float* o, long n, float G, int off) { BODY(_mm256_loadu_ps(t+i), _mm256_storeu_ps(o+i, v)) }
__attribute__((noinline)) void cvt(const uint16_t* t, uint16_t* o, long n, float G, int off) { for (long i=0;i<n;i+=8) _mm_storeu_si128((__m128i*)(o+i), _mm256_cvtps_ph(_mm256_mul_ps(_mm256_set1_ps(G),_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(t+i)))),4)); }
int main(){ long n=1<<14; uint16_t*t=aligned_alloc(64,n*4),*o=aligned_alloc(64,n*4); float*tf=aligned_alloc(64,n*4),*of=aligned_alloc(64,n*4);
 for(long i=0;i<n;i++){ t[i]=0x3400+(rand()&0x3ff); tf[i]=0.3f;}
 const char* names[]={"h->h","h->f","f->h","f->f","cvt only"};
 for(int v=0;v<5;v++){ double best=1e9; for(int r=0;r<5;r++){ double a=now(); for(int k=0;k<5000;k++){
   if(v==0)hh(t,o,n,-1.3f,-12582912+16); else if(v==1)hf(t,of,n,-1.3f,-12582912+16); else if(v==2)fh(tf,o,n,-1.3f,-12582912+16); else if(v==3)ff(tf,of,n,-1.3f,-12582912+16); else cvt(t,o,n,1.3f,0);}
   double b=now(); double c=(b-a)/5000/n*1e9*2.93*8; if(c<best)best=c;}
   printf("%s: %.1f cycles per 8\n",names[v],best);}
}
