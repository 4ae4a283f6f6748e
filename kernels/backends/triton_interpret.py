"""The Triton kernels on CPU tensors under Triton's interpreter: how CI proves them right. Never timed.

Triton decides interpretation when its modules are first imported, so this backend must set
TRITON_INTERPRET=1 before triton loads; in a process that already loaded triton for a GPU it
cannot load (the cause says so).
"""

from __future__ import annotations

import os
import sys

import torch

if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
    raise RuntimeError("triton was already imported without TRITON_INTERPRET=1 in this process")
os.environ["TRITON_INTERPRET"] = "1"

from kernels.backends import triton_loops  # noqa: E402
from kernels.executor import Executor, Formula  # noqa: E402
from kernels.plan import Geometry  # noqa: E402
from kernels.tiling import DeviceFacts, Space, cuda_space  # noqa: E402

# The interpreter stands in for a GPU of this many SMs, so the CUDA space (and its default) applies.
INTERPRETED_SMS = 4


class TritonInterpretBackend:
    name = "triton-interpret"
    device_type = "cpu"
    timed = False

    def facts(self) -> DeviceFacts:
        return DeviceFacts("triton-interpret", "interpreter", INTERPRETED_SMS)

    def space(self, formula: Formula, geometry: Geometry, dtype: torch.dtype) -> Space:
        return cuda_space(self.facts(), geometry.variants, geometry.numel)

    def launch(self, ex: Executor) -> None:
        triton_loops.launch(ex, extra={}, approx_exp2=True)  # num_warps means nothing to the interpreter

    def synchronize(self) -> None:
        """The interpreter runs synchronously."""


BACKEND = TritonInterpretBackend()
