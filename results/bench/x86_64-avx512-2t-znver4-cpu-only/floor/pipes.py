"""Throughput of single vector instructions on the host (section 37 of results/performance.md).

Writes a C file of inline-assembly loops, each eight independent copies of one instruction (or
an alternating pair), builds it with gcc -O2 -march=native and prints cycles per instruction,
the clock taken from a chain of dependent vaddps (latency 3 on Zen 4, 4 on Intel's cores: pass
``--add-latency``). Not part of the package: the evidence of a finding, run by hand.

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/floor/pipes.py
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import tempfile

TESTS: dict[str, list[str]] = {
    "vcvtps2ph zmm -> ymm": ["vcvtps2ph $4,%%zmm{s},%%ymm{d}"],
    "vcvtps2ph zmm -> m256": ["vcvtps2ph $4,%%zmm{s},{d}*32(%0)"],
    "vcvtph2ps ymm -> zmm": ["vcvtph2ps %%ymm{s},%%zmm{d}"],
    "vcvtph2ps m256 -> zmm": ["vcvtph2ps {d}*32(%0),%%zmm{d}"],
    "vcvtps2ph ymm -> xmm": ["vcvtps2ph $4,%%ymm{s},%%xmm{d}"],
    "vcvtneps2bf16 zmm": ["vcvtneps2bf16 %%zmm{s},%%ymm{d}"],
    "vpunpcklwd ymm": ["vpunpcklwd %%ymm{s},%%ymm7,%%ymm{d}"],
    "vpunpcklwd zmm": ["vpunpcklwd %%zmm{s},%%zmm7,%%zmm{d}"],
    "vperm2i128 ymm": ["vperm2i128 $0x20,%%ymm{s},%%ymm7,%%ymm{d}"],
    "vinserti128 ymm": ["vinserti128 $1,%%xmm{s},%%ymm7,%%ymm{d}"],
    "vfmadd231ps zmm": ["vfmadd231ps %%zmm7,%%zmm6,%%zmm{d}"],
    "vscalefps zmm": ["vscalefps %%zmm{s},%%zmm7,%%zmm{d}"],
    "vpermi2ps zmm": ["vpermi2ps %%zmm7,%%zmm6,%%zmm{d}"],
    "vpermps zmm": ["vpermps %%zmm7,%%zmm{s},%%zmm{d}"],
    "vcvtdq2ps zmm": ["vcvtdq2ps %%zmm{s},%%zmm{d}"],
    "vpaddd zmm": ["vpaddd %%zmm{s},%%zmm7,%%zmm{d}"],
    "store ymm": ["vmovdqu %%ymm{s},{d}*64(%0)"],
    "store zmm": ["vmovdqu64 %%zmm{s},{d}*64(%0)"],
    "vcvtps2ph + vpunpcklwd ymm": ["vcvtps2ph $4,%%zmm{s},%%ymm{d}", "vpunpcklwd %%ymm{s},%%ymm7,%%ymm{d}"],
    "vcvtph2ps + vpunpcklwd ymm": ["vcvtph2ps %%ymm{s},%%zmm{d}", "vpunpcklwd %%ymm{s},%%ymm7,%%ymm{d}"],
    "vcvtph2ps + vcvtps2ph": ["vcvtph2ps %%ymm{s},%%zmm{d}", "vcvtps2ph $4,%%zmm{s},%%ymm{d}"],
    "vcvtps2ph + vfmadd231ps": ["vcvtps2ph $4,%%zmm{s},%%ymm{d}", "vfmadd231ps %%zmm7,%%zmm6,%%zmm{d}"],
    "vpunpcklwd ymm + vfmadd231ps": ["vpunpcklwd %%ymm{s},%%ymm7,%%ymm{d}", "vfmadd231ps %%zmm7,%%zmm6,%%zmm{d}"],
    "vpunpcklwd + vperm2i128 ymm": ["vpunpcklwd %%ymm{s},%%ymm7,%%ymm{d}", "vperm2i128 $0x20,%%ymm{s},%%ymm7,%%ymm{d}"],
}
CLOCK = ["vaddps %%zmm0,%%zmm0,%%zmm0"]


def _loop(name: str, body: list[str]) -> str:
    # Eight instructions per iteration: destinations 0-5 (6 and 7 are sources), sources 8-15.
    lines = [body[i % len(body)].format(d=i % 6, s=8 + i) for i in range(8)]
    asm = "\\n\\t".join(lines)
    clobbers = ",".join(f'"xmm{i}"' for i in range(16))
    return (
        f"static double {name}(void) {{ double best = 1e9; for (int r = 0; r < 7; r++) {{ double t0 = now();"
        f' for (long i = 0; i < ITERS; i++) __asm__ volatile("{asm}" :: "r"(mem) : "memory", {clobbers});'
        " double d = now() - t0; if (d < best) best = d; } return best / ITERS * 1e9 / 8; }"
    )


def source(add_latency: int) -> str:
    parts = [
        "#include <stdio.h>",
        "#include <time.h>",
        "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"
        " return t.tv_sec + t.tv_nsec * 1e-9; }",
        "static char mem[4096] __attribute__((aligned(64)));",
        "#define ITERS 5000000L",
        _loop("t_clock", CLOCK),
    ]
    parts += [_loop(f"t_{i}", body) for i, body in enumerate(TESTS.values())]
    parts.append(f'int main(void) {{ double c = t_clock() / {add_latency}.0; printf("clock %.2f GHz\\n\\n", 1 / c);')
    parts.append('printf("| instruction(s), 8 independent per iteration | cycles per instruction |\\n|---|---|\\n");')
    parts += [f'printf("| %-30s | %.2f |\\n", "{name}", t_{i}() / c);' for i, name in enumerate(TESTS)]
    parts.append("return 0; }")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--add-latency", type=int, default=3, help="cycles of a dependent vaddps on this CPU")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = pathlib.Path(tmp, "pipes.c"), pathlib.Path(tmp, "pipes")
        c.write_text(source(args.add_latency))
        subprocess.run(["gcc", "-O2", "-march=native", str(c), "-o", str(exe)], check=True)
        subprocess.run([str(exe)], check=True)


if __name__ == "__main__":
    main()
