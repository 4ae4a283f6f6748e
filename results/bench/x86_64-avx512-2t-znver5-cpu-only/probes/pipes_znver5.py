# Section 70 of results/performance.md: the Zen 4 probe floor/pipes.py (section 37) with the Zen 5
# loop's other instructions added; prints the C source, built and run by hand on the Zen 5 (the
# clock from a dependent vaddps, 2 cycles):
#   python probes/pipes_znver5.py > p.c && gcc -O2 -march=native p.c -o p && ./p
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "x86_64-avx512-2t-znver4-cpu-only" / "floor"))
import pipes  # noqa: E402

pipes.TESTS.update(
    {
        "vmulps zmm": ["vmulps %%zmm{s},%%zmm7,%%zmm{d}"],
        "vfmadd213ps zmm (indep)": ["vfmadd213ps %%zmm7,%%zmm6,%%zmm{s}"],
        "vpslld zmm": ["vpslld $23,%%zmm{s},%%zmm{d}"],
        "vpsubd zmm": ["vpsubd %%zmm{s},%%zmm7,%%zmm{d}"],
        "vpcmpud k": ["vpcmpud $6,%%zmm{s},%%zmm7,%%k1"],
        "vpmaxuw zmm": ["vpmaxuw %%zmm{s},%%zmm7,%%zmm{d}"],
        "vpmovzxwd m256": ["vpmovzxwd {d}*32(%0),%%zmm{d}"],
        "vpandd zmm": ["vpandd %%zmm{s},%%zmm7,%%zmm{d}"],
        "vsubps zmm": ["vsubps %%zmm{s},%%zmm7,%%zmm{d}"],
        "vcvtph2ps m256 + fma": ["vcvtph2ps {d}*32(%0),%%zmm{d}", "vfmadd213ps %%zmm7,%%zmm6,%%zmm{s}"],
        "vcvtps2ph + vmulps": ["vcvtps2ph $4,%%zmm{s},%%ymm{d}", "vmulps %%zmm{s},%%zmm7,%%zmm{d}"],
        "vcvtps2ph + vpslld": ["vcvtps2ph $4,%%zmm{s},%%ymm{d}", "vpslld $23,%%zmm{s},%%zmm{d}"],
        "fma + vpsubd": ["vfmadd213ps %%zmm7,%%zmm6,%%zmm{s}", "vpsubd %%zmm{s},%%zmm7,%%zmm{d}"],
        "fma + vsubps": ["vfmadd213ps %%zmm7,%%zmm6,%%zmm{s}", "vsubps %%zmm{s},%%zmm7,%%zmm{d}"],
        "vpermw zmm": ["vpermw %%zmm{s},%%zmm7,%%zmm{d}"],
    }
)
print(pipes.source(2).replace("ITERS 5000000L", "ITERS 2000000L"))
