"""A fresh process's first call of each op (mse, l1, KL, KL log_target) by dtype by case (contiguous,
0-d gradient, broadcast, transposed, summed back to a broadcast input) through the public calls on
the CPU backend. Prints one JSON object: whether kernels.backends.numba_patches is installed, each
call's seconds (its compile, nearly all), and the sha256 of the LLVM IR of every loop signature the
calls compiled, with one thing masked: the address numba writes into each parallel loop's outlined
function's name (``__numba_parfor_gufunc_0x7f96214f0d10``, the id of an object of the compiling
process), which no two processes share. Run it with LOSSTUNE_JIT_CACHE=0 (every loop compiles) and PYTHONHASHSEED=0 (two
processes doing the same steps name things alike), once with LOSSTUNE_NUMBA_PATCHES=0 and once
without: compare.py reads the two outputs."""

import hashlib
import json
import re
import time

import torch

import kernels
from kernels.backends import cpu, numba_patches

N, ROWS = 1 << 16, 256


def calls(op: str, dt: torch.dtype) -> dict[str, object]:
    gen = torch.Generator().manual_seed(0)
    full = [torch.randn(N, generator=gen).to(dt) for _ in range(3)]
    mat = [v.view(ROWS, ROWS) for v in full]
    row = torch.randn(1, ROWS, generator=gen).to(dt)
    g0 = torch.tensor(0.75).to(dt)
    fn = {
        "mse": kernels.mse_loss_backward,
        "l1": kernels.l1_loss_backward,
        "kl_div": lambda g, x, t, r: kernels.kl_div_backward(g, x, t, r, False),
        "kl_div-log": lambda g, x, t, r: kernels.kl_div_backward(g, x, t, r, True),
    }[op]
    return {
        "contiguous": lambda: fn(*full, "none"),
        "0-d": lambda: fn(g0, full[1], full[2], "mean"),
        "broadcast": lambda: fn(mat[0], row, mat[2], "none"),
        "transposed": lambda: fn(mat[0], mat[1].t(), mat[2], "none"),
        "summed": lambda: fn(g0, row, mat[2], "sum"),
    }


seconds = {}
for op in ("mse", "l1", "kl_div", "kl_div-log"):
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for case, call in calls(op, dt).items():
            start = time.perf_counter()
            call()
            seconds[f"{op} {str(dt)[6:]} {case}"] = round(time.perf_counter() - start, 3)
ir = {
    f"{name} {sig}": re.sub(r"_gufunc_0x[0-9a-f]+", "_gufunc_0x?", fn.inspect_llvm(sig))
    for name, fn in cpu.BACKEND.built()
    for sig in fn.signatures
}
print(
    json.dumps(
        {
            "installed": numba_patches.state().installed,
            "seconds": seconds,
            "ir_sha256": {k: hashlib.sha256(v.encode()).hexdigest() for k, v in sorted(ir.items())},
        }
    )
)
