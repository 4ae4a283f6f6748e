"""Probe (performance.md section 44): the table's executor and the default's of kl_div float32 full
transposed at 2^22, the same config on the same tensors, timed interleaved with nothing else, under
three shuffles. The full report timed them 1.37x apart twice. Evidence run by hand, not part of the
package.

    python same_config.py
"""

from __future__ import annotations

import torch

from kernels import backends, timing
from kernels.modes import Op, Reduction
from tuner.bench import _checked
from tuner.problems import Case, InputLayout


def main() -> None:
    case = Case(Op.KL_DIV, torch.float32, (1 << 22,), Reduction.NONE, layout=InputLayout.TRANSPOSED)
    _, (tuned, default) = _checked(case, "cpu", torch.device("cpu"), default=True)
    assert tuned.config == default.config, (tuned.config, default.config)
    print(f"{case.label()}: {tuned.config.short()} ({tuned.config_source}), twice each")
    launch = backends.get("cpu").launch
    runs = [lambda _, e=e: launch(e) for e in (tuned, default, tuned, default)]
    for seed in range(3):
        timed = timing.interleaved(runs, torch.device("cpu"), rounds=3, min_time_s=0.1, seed=seed)
        rounds = ["/".join(f"{m * 1e6:.0f}" for m in t.medians) for t in timed]
        print(f"  seed {seed}: tuned, default, tuned, default us (per round): {'  '.join(rounds)}")


if __name__ == "__main__":
    main()
