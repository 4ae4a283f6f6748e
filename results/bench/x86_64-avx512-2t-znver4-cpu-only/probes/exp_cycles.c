/* Section 47 of results/performance.md: exp_cuts.c's four loops on one thread, n elements of
 * float16 in and out (65536: 256 KiB, in L2; 262144: 1 MiB, the L2's size), best of 5 trials of
 * reps calls: nanoseconds per element and cycles per 16 lanes at the 3.66 GHz section 37 measured
 * (mode -1: a memcpy of the same bytes). Each call opens a one-thread OpenMP region. Not part of
 * the package:
 *     gcc -O3 -march=native -fopenmp exp_cycles.c -o /tmp/exp_cycles -lm
 *     /tmp/exp_cycles 65536 4000 && /tmp/exp_cycles 262144 1000 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "exp_cuts.c"
static double now(void){struct timespec ts;clock_gettime(CLOCK_MONOTONIC,&ts);return ts.tv_sec+ts.tv_nsec*1e-9;}
int main(int argc,char**argv){
  long n=atol(argv[1]); int reps=atoi(argv[2]);
  uint16_t*a=aligned_alloc(64,n*2),*b=aligned_alloc(64,n*2);
  for(long i=0;i<n;i++){float f=(float)((i%1000)/250.0-2.0); __m128 v=_mm_set_ss(f); a[i]=_mm_extract_epi16(_mm_cvtps_ph(v,0),0);}
  exp_init();
  for(int mode=-1;mode<4;mode++){
    double best=1e9;
    for(int trial=0;trial<5;trial++){
      double t0=now();
      for(int r=0;r<reps;r++){ if(mode<0) copy16(a,b,n,1); else exp_loop(a,b,n,0.7f,1.0f/n,mode,1);}
      double dt=(now()-t0)/reps/n*1e9; if(dt<best)best=dt;}
    printf("mode %2d: %.3f ns/elem = %.2f cycles/16 at 3.66GHz\n",mode,best,best*3.66*16);
  }
}
