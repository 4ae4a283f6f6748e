"""Backend registry: data, a small protocol, lazy imports.

Nothing here imports numba, Triton or torch_npu at module import; a backend module is imported
the first time it is asked for. Asking explicitly for one that cannot load raises
:class:`BackendUnavailable` naming what is missing; automatic selection only picks by device.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

if TYPE_CHECKING:
    from kernels.executor import Executor, Formula
    from kernels.plan import Geometry
    from kernels.tiling import DeviceFacts, Space


def slug(text: str) -> str:
    """A device name as it goes into file and study names: lower case, runs of anything but
    letters and digits as one hyphen (``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def switch_tag(switches: Mapping[str, str]) -> str:
    """Loop switches as one string, ``NAME=value`` joined by spaces ("" for none): the tag a trial, a
    decision and a dashboard series carry (kernels.backends.cpu.forced_tag; an asv run's stored
    ``cpu_forced``, read without importing the CPU backend's loops)."""
    return " ".join(f"{name}={value}" for name, value in switches.items())


class Backend(Protocol):
    name: str
    device_type: str  # the torch device type its tensors live on
    timed: bool  # False for correctness-only backends (the Triton interpreter)

    def facts(self) -> DeviceFacts: ...
    def space(self, formula: Formula, geometry: Geometry, dtype: torch.dtype) -> Space: ...
    def launch(self, executor: Executor) -> None: ...
    def synchronize(self) -> None: ...


class BackendUnavailable(RuntimeError):
    """An explicitly requested backend cannot load here; the message says why."""


@dataclass(frozen=True)
class BackendInfo:
    name: str
    module: str  # exposes BACKEND, built on import; the import fails if the backend cannot run
    device_type: str
    needs: str  # what must be installed, for error messages


REGISTRY: tuple[BackendInfo, ...] = (
    BackendInfo("cpu", "kernels.backends.cpu", "cpu", "numba"),
    BackendInfo("cuda", "kernels.backends.triton_gpu", "cuda", "triton and a CUDA device visible to torch"),
    BackendInfo("npu", "kernels.backends.triton_npu", "npu", "torch_npu, triton-ascend and an Ascend NPU"),
    BackendInfo("triton-interpret", "kernels.backends.triton_interpret", "cpu", "triton (runs under TRITON_INTERPRET)"),
)
NAMES: tuple[str, ...] = tuple(info.name for info in REGISTRY)
_loaded: dict[str, Backend] = {}


def info(name: str) -> BackendInfo:
    for entry in REGISTRY:
        if entry.name == name:
            return entry
    raise ValueError(f"backend: expected one of {', '.join(NAMES)}, got {name!r}")


def get(name: str) -> Backend:
    """Load a backend by name, or raise BackendUnavailable with the cause chained."""
    entry = info(name)
    if name not in _loaded:
        try:
            module = importlib.import_module(entry.module)
            _loaded[name] = module.BACKEND
        except (ImportError, RuntimeError, AttributeError, OSError) as e:
            raise BackendUnavailable(
                f"backend {name!r} cannot load here: needs {entry.needs}; {type(e).__name__}: {e}"
            ) from e
    return _loaded[name]


def for_device(device: torch.device) -> str:
    """The backend a tensor's device implies."""
    for entry in REGISTRY:
        if entry.device_type == device.type:
            return entry.name
    raise BackendUnavailable(f"no backend serves tensors on {device}")


def probe(name: str) -> tuple[bool, str]:
    """(loads, why not) for `losstune doctor`."""
    try:
        get(name)
    except BackendUnavailable as e:
        return False, str(e)
    return True, ""
