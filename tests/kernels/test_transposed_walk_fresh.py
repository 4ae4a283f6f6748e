"""The CPU transposed walk's variants that a host offers only when asked (environment knobs read
at import: the other register row width, half rows on a whole-line host, inputs first, deferred
out stores), each checked bitwise against the contiguous call in a fresh process.

Apart from test_transposed_walk.py because each compiles the whole walk again in its own process
(the deferred walk alone took 400 s of a two-worker CI run): one file is one xdist worker's, and
these in that file made it the run's tail (performance.md, section 74)."""

from __future__ import annotations

import pytest

from kernels.backends import cpu_loops
from tests.helpers import run_fresh

pytestmark = pytest.mark.usefixtures("cpu_backend")


def _fresh_walk_script(check: str, call: str, knobs: str) -> str:
    """A script for a fresh process: after ``check`` (an assert on the walk it got), ``call``
    (kernels.<call>, ARGS standing for g, x, t) on transposed views of five shapes (whole tiles,
    ragged, one block after a pair, whole pairs and odd blocks, a streamed 160), every dtype, 1 and 2
    cores, ordinary and streamed stores (``knobs``: the config's keywords), against the same call on
    contiguous copies; it prints the cases whose bits differ."""
    return (
        "import torch, kernels\n"
        "from kernels.backends import cpu_loops\n"
        "from kernels.modes import Variant\n"
        "from kernels.tiling import Tiling\n"
        f"{check}\n"
        "bad = []\n"
        "for dtype in (torch.float32, torch.float16, torch.bfloat16):\n"
        "    bits = torch.int32 if dtype == torch.float32 else torch.int16\n"
        "    for shape in ((128, 64), (130, 77), (40, 48), (70, 320), (67, 160)):\n"
        "        gen = torch.Generator().manual_seed(1)\n"
        "        x, t, g = (torch.randn(shape[::-1], generator=gen).to(dtype).t() for _ in range(3))\n"
        f"        want = kernels.{call.replace('ARGS', 'g.contiguous(), x.contiguous(), t.contiguous()')})\n"
        "        for cores in (1, 2):\n"
        "            for stream in (False, True):\n"
        f"                c = Tiling(4096, cores, Variant.STRIDED, {knobs})\n"
        f"                got = kernels.{call.replace('ARGS', 'g, x, t')}, config=c)\n"
        "                if not torch.equal(got.view(bits), want.view(bits)):\n"
        "                    bad.append((str(dtype), shape, cores, stream))\n"
        "print(bad)\n"
    )


def test_the_other_row_width_gives_the_contiguous_bits_in_a_fresh_process() -> None:
    """The walk this host does not pick by default (LOSSTUNE_CPU_TRANSPOSE_BYTES), ordinary and
    streamed stores, 1 and 2 cores, every dtype: bitwise the contiguous call's result."""
    other = cpu_loops.LINE // 2 if cpu_loops.TRANSPOSE_BYTES == cpu_loops.LINE else cpu_loops.LINE
    code = _fresh_walk_script(
        f"assert cpu_loops.TRANSPOSE_BYTES == {other}", "kl_div_backward(ARGS, 'none', True", "stream=stream"
    )
    assert run_fresh(code, {"LOSSTUNE_CPU_TRANSPOSE_BYTES": str(other)}) == "[]"


def test_half_rows_on_a_whole_line_host_give_the_contiguous_bits_in_a_fresh_process() -> None:
    """The knob Zen 4 has (LOSSTUNE_CPU_HALF_ROWS=1 offers it on any host with whole-line rows,
    which LOSSTUNE_CPU_TRANSPOSE_BYTES=64 gives any host): ymm transposes of stacked blocks into
    whole lines, ordinary and streamed stores, every dtype, ragged edges."""
    code = _fresh_walk_script(
        "assert cpu_loops.TRANSPOSE_BYTES == 64 and cpu_loops.TRANSPOSE_ROWS == (0, 32), cpu_loops.TRANSPOSE_ROWS",
        "mse_loss_backward(ARGS, 'none'",
        "stream=stream, transpose_row=32",
    )
    env = {"LOSSTUNE_CPU_TRANSPOSE_BYTES": "64", "LOSSTUNE_CPU_HALF_ROWS": "1"}
    assert run_fresh(code, env) == "[]"


_INPUTS_FIRST_SCRIPT = """
import torch, kernels
from kernels.backends import cpu_loops
from kernels.modes import Variant
from kernels.tiling import Tiling
assert cpu_loops.INPUTS_FIRST
bad = []
def check(label, g, x, t, log, out_dtype):
    bits = torch.int32 if out_dtype == torch.float32 else torch.int16
    out = torch.empty(t.shape, dtype=out_dtype)
    want = kernels.kl_div_backward(g, x.contiguous(), t.contiguous(), "mean", log, out=out).clone()
    for cores in (1, 2):
        for stream in (False, True):
            for row in cpu_loops.TRANSPOSE_ROWS:
                c = Tiling(4096, cores, Variant.STRIDED, stream=stream, transpose_row=row, transpose_in=True)
                got = kernels.kl_div_backward(g, x, t, "mean", log, out=torch.empty_like(out), config=c)
                if not torch.equal(got.view(bits), want.view(bits)):
                    bad.append((label, log, cores, stream, row))
gen = torch.Generator().manual_seed(1)
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    g = torch.tensor(0.75).to(dtype)
    for shape in ((128, 64), (130, 77), (64, 200), (5, 300), (300, 3), (9, 9), (40, 48), (70, 320), (67, 160)):
        x, t = (torch.randn(shape[::-1], generator=gen).to(dtype).t() for _ in range(2))
        for log in (False, True):
            check((str(dtype), shape), g, x, t, log, dtype)
# a float32 target with a 16-bit out (self's type; the blocks follow the target's width: a 16-bit
# target's 2 bytes a side tie with a float32 out's 4, and the planner keeps out's order), and a target whose
# inner stride is 2 (its whole tile moves element by element)
x16 = torch.randn(160, 70, generator=gen).to(torch.float16).t()
x32 = torch.randn(160, 70, generator=gen).t()
check("float32 target, float16 out", torch.tensor(2.0), x16, x32, True, torch.float16)
check("float32 target, bfloat16 out", torch.tensor(0.5), x32.to(torch.bfloat16), x32, False, torch.bfloat16)
strided = torch.randn(160, 140, generator=gen).to(torch.bfloat16)[:, ::2].t()
check("stride 2", torch.tensor(1.5), strided, strided, True, torch.bfloat16)
print(bad)
"""


def test_the_inputs_first_walk_gives_the_contiguous_bits_in_a_fresh_process() -> None:
    """Tiling.transpose_in (LOSSTUNE_CPU_INPUTS_FIRST=1 offers it on any host): KL with a 0-d
    gradient, both log_target modes, every dtype and mixed ones, ragged edges, a target of inner
    stride 2, every row the host offers, 1 and 2 cores, ordinary and streamed stores: bitwise the
    contiguous call's result."""
    assert run_fresh(_INPUTS_FIRST_SCRIPT, {"LOSSTUNE_CPU_INPUTS_FIRST": "1"}) == "[]"


_DEFERRED_SCRIPT = """
import torch, kernels
from kernels.backends import cpu_loops
from kernels.modes import Variant
from kernels.tiling import Tiling
assert cpu_loops.DEFERRED
calls = {
    "mse": lambda g, x, t, red, **kw: kernels.mse_loss_backward(g, x, t, red, **kw),
    "l1": lambda g, x, t, red, **kw: kernels.l1_loss_backward(g, x, t, red, **kw),
    "kl_div": lambda g, x, t, red, **kw: kernels.kl_div_backward(g, x, t, red, False, **kw),
    "kl_div-log": lambda g, x, t, red, **kw: kernels.kl_div_backward(g, x, t, red, True, **kw),
}
bad = []
def check(label, op, g, x, t):
    red = "none" if g.dim() else "mean"
    bits = torch.int16
    want = calls[op](g.contiguous(), x.contiguous(), t.contiguous(), red)
    for cores in (1, 2):
        for stream in (False, True):
            for row in cpu_loops.TRANSPOSE_ROWS:
                c = Tiling(4096, cores, Variant.STRIDED, stream=stream, transpose_row=row, defer_out=True)
                got = calls[op](g, x, t, red, out=torch.empty(want.shape, dtype=want.dtype), config=c)
                if not torch.equal(got.view(bits), want.view(bits)):
                    bad.append((label, op, cores, stream, row))
gen = torch.Generator().manual_seed(1)
def transposed(shape, dtype):
    return torch.randn(shape[::-1], generator=gen).to(dtype).t()
# whole tiles one after another (the pieces with the held tile's rows between them), ragged tiles
# between whole ones (held rows stored before the next pass), and shapes under one tile
shapes = ((256, 256), (384, 192), (300, 200), (130, 77), (9, 9))
for dtype in (torch.float16, torch.bfloat16):
    for shape in shapes:
        x, t = transposed(shape, dtype), transposed(shape, dtype)
        grads = {"full": transposed(shape, dtype), "0-d": torch.tensor(0.75).to(dtype)}
        if shape == (384, 192):  # a row of gradients, stride 0 on dim 0: its tiles are never one run
            grads["row"] = torch.randn(shape[1], generator=gen).to(dtype)
        for op in calls:
            for grad, g in grads.items():
                check((str(dtype), shape, grad), op, g, x, t)
# a float32 target with a 16-bit self and out (KL takes one), and inputs of inner stride 2 (their tiles go row by row)
x16, t32 = transposed((256, 320), torch.float16), transposed((256, 320), torch.float32)
check("float32 target, float16 out", "kl_div", torch.tensor(2.0).half(), x16, t32)
check("float32 target, float16 out", "kl_div-log", torch.tensor(0.5).half(), x16, t32)
strided = torch.randn(320, 520, generator=gen).to(torch.bfloat16)[:, ::2].t()
check("stride 2", "l1", torch.tensor(1.5).to(torch.bfloat16), strided, strided.clone())
check("stride 2", "kl_div-log", torch.tensor(1.5).to(torch.bfloat16), strided, strided.clone())
print(bad)
"""


def test_the_deferred_walk_gives_the_contiguous_bits_in_a_fresh_process() -> None:
    """Tiling.defer_out (LOSSTUNE_CPU_DEFERRED=1 offers it on any host): every op and KL mode,
    both 16-bit dtypes and a float32 target beside them, full, 0-d and row gradients, whole tiles
    in sequence and ragged ones among them, inputs of inner stride 2, every row the host offers, 1
    and 2 cores, ordinary and streamed stores: bitwise the contiguous call's result."""
    assert run_fresh(_DEFERRED_SCRIPT, {"LOSSTUNE_CPU_DEFERRED": "1"}) == "[]"
