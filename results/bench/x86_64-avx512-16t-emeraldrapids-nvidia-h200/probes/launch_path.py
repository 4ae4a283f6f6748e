"""Run 4's probe: each call timed both ways in the same interleaved rounds (kernels.timing.Span):
CALL, a start event recorded on an idle GPU (what every CUDA report before run 4 measured), and
DEVICE, the call queued behind a spin kernel (launch-free). Our tuned launch, torch's eager
baseline and the size-matched copy, at sizes from 2^10 to 2^26. Usage: python launch_path.py"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kernels import backends, timing
from kernels.modes import Op, Reduction
from tuner.problems import Case

CALL, DEVICE = timing.Span.CALL, timing.Span.DEVICE


def runs(case: Case) -> list[Callable[[int], object]]:
    """Our tuned launch, torch's baseline and the size-matched copy, on the case's seeded inputs."""
    g, x, t = case.inputs("cuda")
    out = case.out_like(x)
    ex = case.phase_one(g, x, t, out, "cuda")
    launch = backends.get("cuda").launch
    vendor = case.baseline()
    copy, _ = timing.copy_probe("cuda", timing.bytes_moved(case.read_tensors(g, x, t), out))
    return [lambda _: launch(ex), lambda _: vendor(g, x, t), copy]


def main() -> None:
    print("op   dtype    numel  red   |  ours: call  device | torch: call  device |  copy: call  device  (us)")
    for op, dtype, red in ((Op.MSE, torch.float32, Reduction.NONE), (Op.MSE, torch.bfloat16, Reduction.MEAN)):
        for k in (10, 16, 20, 22, 24, 26):
            each = runs(Case(op, dtype, (1 << k,), red))
            spans = [s for _ in each for s in (CALL, DEVICE)]
            timed = timing.interleaved(
                [r for r in each for _ in (CALL, DEVICE)], "cuda", rounds=3, min_time_s=0.005, spans=spans
            )
            us = " | ".join(f"{timed[i].median_s * 1e6:10.1f} {timed[i + 1].median_s * 1e6:7.1f}" for i in (0, 2, 4))
            print(f"{op.value:4} {str(dtype)[6:]:8} 2^{k:<4} {red.name.lower():5} | {us}")


if __name__ == "__main__":
    main()
