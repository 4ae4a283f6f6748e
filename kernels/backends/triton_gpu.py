"""The CUDA backend: the Triton kernels on NVIDIA GPUs through torch's CUDA tensors."""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    raise RuntimeError("torch.cuda.is_available() is False (no CUDA device or a CPU-only torch)")
if os.environ.get("TRITON_INTERPRET") == "1":
    raise RuntimeError("TRITON_INTERPRET=1 is set: Triton would interpret instead of compiling")

from kernels.backends import slug, triton_loops  # noqa: E402
from kernels.executor import Executor, Formula  # noqa: E402
from kernels.plan import Geometry  # noqa: E402
from kernels.tiling import DeviceFacts, Space, cuda_space  # noqa: E402


class CudaBackend:
    name = "cuda"
    device_type = "cuda"
    timed = True

    def __init__(self) -> None:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self._facts = DeviceFacts("cuda", slug(props.name), props.multi_processor_count)

    def facts(self) -> DeviceFacts:
        return self._facts

    def space(self, formula: Formula, geometry: Geometry, dtype: torch.dtype) -> Space:
        return cuda_space(self._facts, geometry.variants, geometry.numel)

    def launch(self, ex: Executor) -> None:
        triton_loops.launch(ex, extra={"num_warps": ex.config.num_warps}, approx_exp2=True, rne_cast=True)

    def synchronize(self) -> None:
        torch.cuda.synchronize()


BACKEND = CudaBackend()
