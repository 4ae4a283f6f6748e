"""The CPU backend: numba-compiled parallel loops (kernels/backends/cpu_loops.py)."""

from __future__ import annotations

import platform

import numpy as np
import torch

from kernels.backends import cpu_loops
from kernels.executor import Executor, Formula
from kernels.modes import Variant
from kernels.plan import Geometry
from kernels.tiling import DeviceFacts, Space, cpu_space


def as_numpy(t: torch.Tensor, span: int | None = None) -> np.ndarray:
    """A 1-D numpy view of a tensor's elements (no copy); 16-bit floats as their raw bits.

    With ``span`` the view covers ``span`` elements of storage from the tensor's first element, so
    a strided kernel can address it with the tensor's own strides.
    """
    flat = t.reshape(-1) if span is None else t.as_strided((span,), (1,))
    if t.dtype == torch.float32:
        return flat.numpy()
    bits = flat.view(torch.int16).numpy()
    return bits if t.dtype == torch.float16 else bits.view(np.uint16)  # int16 = float16, uint16 = bfloat16


def _span(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True))


class CpuBackend:
    name = "cpu"
    device_type = "cpu"
    timed = True

    def __init__(self) -> None:
        self._kernels: dict[str, cpu_loops.CpuKernels] = {}
        self._facts = DeviceFacts(
            "cpu", f"{platform.machine() or 'cpu'}-{cpu_loops.max_threads()}t", cpu_loops.max_threads()
        )

    def facts(self) -> DeviceFacts:
        return self._facts

    def space(self, formula: Formula, geometry: Geometry, dtype: torch.dtype) -> Space:
        return cpu_space(self._facts, geometry.variants, geometry.numel)

    def kernels(self, formula: Formula) -> cpu_loops.CpuKernels:
        if formula.name not in self._kernels:
            self._kernels[formula.name] = cpu_loops.make_cpu_kernels(formula.value)
        return self._kernels[formula.name]

    def launch(self, ex: Executor) -> None:
        if ex.empty:
            return
        kernels = self.kernels(ex.formula)
        cfg, geo = ex.config, ex.geometry
        parallel = cfg.cores > 1
        if parallel:
            cpu_loops.set_threads(cfg.cores)
        pick = 1 if parallel else 0
        cof = np.float32(ex.cof)
        # The input operand is not read by every formula (KL never reads self): then the target
        # stands in for it, so no memory of self is touched.
        x, x_axis = (ex.inp, 1) if ex.formula.reads_input else (ex.target, 2)
        if cfg.variant in (Variant.FLAT, Variant.SCALAR_GRAD):
            fn = (kernels.flat if cfg.variant is Variant.FLAT else kernels.scalar_grad)[pick]
            fn(
                as_numpy(ex.grad),
                as_numpy(x),
                as_numpy(ex.target),
                as_numpy(ex.out),
                geo.numel,
                cof,
                cfg.tile,
                cfg.cores,
            )
            return
        shape = geo.shape
        strides = np.array(geo.strides, dtype=np.int64)
        strides[1] = strides[x_axis]
        arrays = [
            as_numpy(t, _span(shape, s)) for t, s in zip((ex.grad, x, ex.target, ex.out), strides.tolist(), strict=True)
        ]
        if cfg.variant is Variant.STRIDED:
            kernels.strided[pick](*arrays, np.array(shape, np.int64), strides, geo.numel, cof, cfg.tile, cfg.cores)
            return
        rstrides = np.array(geo.rstrides, dtype=np.int64)
        rstrides[1] = rstrides[x_axis]
        # A reduced operand's span also covers the summed dims.
        full = [
            _span(shape, k) + _span(geo.rshape, r) - 1
            for k, r in zip(strides.tolist()[:3], rstrides.tolist(), strict=True)
        ]
        arrays[:3] = [as_numpy(t, n) for t, n in zip((ex.grad, x, ex.target), full, strict=True)]
        kernels.reduce[pick](
            *arrays,
            np.array(shape, np.int64),
            strides,
            np.array(geo.rshape, np.int64),
            rstrides,
            geo.n_out,
            cof,
            cfg.tile,
            cfg.cores,
        )

    def synchronize(self) -> None:
        """numba calls return when the work is done."""


BACKEND = CpuBackend()
