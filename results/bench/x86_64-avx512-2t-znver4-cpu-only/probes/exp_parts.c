/* Section 47 of results/performance.md: what the 16-bit exp loop's time is made of. The shipped
 * body (exp_cuts.c's mode A, constants inlined) with parts taken out, one thread, 16384 elements
 * in L1, best of 5: cycles per 16 lanes at 3.66 GHz. The outputs are meaningless; timing only.
 * Not part of the package:  gcc -O3 -march=native exp_parts.c -o /tmp/exp_parts && /tmp/exp_parts */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(void){struct timespec ts;clock_gettime(CLOCK_MONOTONIC,&ts);return ts.tv_sec+ts.tv_nsec*1e-9;}
#define S(x) _mm512_set1_ps(x)
/* variant bits: 1 no scalef (mul), 2 no poly (r only), 4 no cvt in (f32 load), 8 no cvt out (f32 store), 16 no mask, 32 no clamp */
__attribute__((noinline)) void loop(const void* src, void* dst, long n, int v) {
  for (long i=0;i<n;i+=16){
    __m512 t = (v&4)? _mm512_load_ps((const float*)src+i) : _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)((const uint16_t*)src+i)));
    __m512 tl = (v&32)? t : _mm512_max_ps(t,S(-194.f));
    __m512 tc = (v&32)? t : _mm512_min_ps(tl,S(237.f));
    __mmask16 live = (v&16)? 0xffff : _mm512_cmp_ps_mask(t,S(-745.f),_CMP_NLE_UQ);
    __m512 j=_mm512_fmadd_ps(tc,S(1.4426950f),S(12582912.f));
    __m512 k=_mm512_sub_ps(j,S(12582912.f));
    __m512 r=_mm512_fnmadd_ps(k,S(0.6931472f),tl);
    __m512 p;
    if (v&2) p=_mm512_maskz_mov_ps(live,r);
    else { p=_mm512_fmadd_ps(S(0.084f),r,S(0.25f)); p=_mm512_fmadd_ps(p,r,S(0.5f)); p=_mm512_maskz_fmadd_ps(live,p,r,S(0.5f)); }
    __m512 s=_mm512_mul_ps(p,S(-0.7f));
    __m512 e=_mm512_add_ps(k,S(-20.f));
    __m512 o=(v&1)? _mm512_mul_ps(s,e) : _mm512_scalef_ps(s,e);
    if (v&8) _mm512_store_ps((float*)dst+i,o);
    else _mm256_store_si256((__m256i*)((uint16_t*)dst+i),_mm512_cvtps_ph(o,0));
  }
}
int main(){
  long n=16384; int reps=20000;
  float*a=aligned_alloc(64,n*4),*b=aligned_alloc(64,n*4);
  for(long i=0;i<n;i++) a[i]=0;
  int vs[]={0,1,2,4,8,16,32,1|2,1|2|16|32};
  for(unsigned q=0;q<sizeof vs/sizeof*vs;q++){int v=vs[q];double best=1e9;
    for(int tr=0;tr<5;tr++){double t0=now();for(int r=0;r<reps;r++)loop(a,b,n,v);double dt=(now()-t0)/reps/n*1e9;if(dt<best)best=dt;}
    printf("variant %2d (%s%s%s%s%s%s): %.2f cycles/16\n",v,v&1?"-scalef ":"",v&2?"-poly ":"",v&4?"-cvtin ":"",v&8?"-cvtout ":"",v&16?"-mask ":"",v&32?"-clamp ":"",best*3.66*16);}
}
