"""The NPU backend: the same Triton kernels on Ascend through torch_npu and triton-ascend.

Not run on hardware by this project yet (no NPU host); written to the documented APIs:
``triton.runtime.driver.active.utils.get_device_properties(torch.npu.current_device())`` gives
``num_vectorcore``; the Unified Buffer size follows the SoC (``torch.npu.get_device_name``);
``multibuffer`` is a triton-ascend launch option.
"""

from __future__ import annotations

import os
import re

import torch

try:
    import torch_npu  # noqa: F401  (registers the npu device with torch)
except ImportError as e:
    raise ImportError(f"torch_npu is not installed ({e})") from e
if not torch.npu.is_available():
    raise RuntimeError("torch.npu.is_available() is False")
if os.environ.get("TRITON_INTERPRET") == "1":
    raise RuntimeError("TRITON_INTERPRET=1 is set: Triton would interpret instead of compiling")

import triton  # noqa: E402

from kernels.backends import slug, triton_loops  # noqa: E402
from kernels.executor import Executor, Formula  # noqa: E402
from kernels.plan import Geometry  # noqa: E402
from kernels.tiling import DeviceFacts, Space, npu_space  # noqa: E402

# Unified Buffer bytes per vector core, by SoC family (CANN platform configs).
UB_BYTES = {"ascend910b": 192 * 1024, "ascend910_93": 192 * 1024, "ascend950": 248 * 1024}


def ub_bytes_for(soc: str) -> int:
    key = re.sub(r"[^a-z0-9_]", "", soc.lower())
    for prefix, size in UB_BYTES.items():
        if key.startswith(prefix):
            return size
    raise RuntimeError(f"unknown Ascend SoC {soc!r}: no Unified Buffer size for it (known: {', '.join(UB_BYTES)})")


class NpuBackend:
    name = "npu"
    device_type = "npu"
    timed = True

    def __init__(self) -> None:
        device = torch.npu.current_device()
        props = triton.runtime.driver.active.utils.get_device_properties(device)
        cores = int(props.get("num_vectorcore", -1))
        if cores <= 0:
            raise RuntimeError(f"triton-ascend reported no vector cores: {props}")
        soc = torch.npu.get_device_name(device)
        self._facts = DeviceFacts("npu", slug(soc), cores, ub_bytes_for(soc))

    def facts(self) -> DeviceFacts:
        return self._facts

    def space(self, formula: Formula, geometry: Geometry, dtype: torch.dtype) -> Space:
        return npu_space(self._facts, geometry.variants, geometry.numel, dtype.itemsize, formula.live_buffers)

    def launch(self, ex: Executor) -> None:
        # The N-d walk's SUB pieces are sized to the Unified Buffer; the 2-d tile kernel is CUDA's
        # (not written for triton-ascend's UB budget, and never run on an NPU).
        triton_loops.launch(ex, extra={"multibuffer": ex.config.multibuffer}, tiles_2d=False, split_sums=False)

    def synchronize(self) -> None:
        torch.npu.synchronize()


BACKEND = NpuBackend()
