"""KL log_target's bfloat16 walks with a 0-d gradient (and, beside them, a full one) with the walks'
twin pick off and on (backends.cpu.CpuBackend.checked_walks), on the Zen 4: the Xeon's A/B
(``xeon-480mib/walks_twin/ab.py``, run as it is) with its two backends made without the coarse
formula, which the Zen 4 does not take (results/performance.md, section 112): off, the walks run the
narrow formula inline, as the Zen 4 shipped them; on, a walk with a 0-d gradient takes the narrow
twin's set. Both backends take the contiguous loops' twin (checked_bf16), which no walk reads. Run
from the repository root:

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/checked_bf16/ab_walks.py 7 16 20 22 24

Not part of the package.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kernels.backends.cpu import CpuBackend

_XEON = Path(__file__).parents[2] / "x86_64-avx512-2t-rocketlake-cpu-only" / "xeon-480mib" / "walks_twin" / "ab.py"


def _backend(walks: bool) -> CpuBackend:
    backend = CpuBackend()
    backend.checked_bf16, backend.coarse = True, False
    backend.checked_walks = walks
    return backend


if __name__ == "__main__":
    spec = importlib.util.spec_from_file_location("walks_twin_ab", _XEON)
    assert spec is not None and spec.loader is not None
    xeon = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(xeon)
    xeon.BACKENDS = (_backend(False), _backend(True))  # read by its main() at each row
    xeon.main()
