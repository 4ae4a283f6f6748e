"""Which machine a measurement came from: asv's machine name carries the accelerator.

asv's machine file (~/.asv-machine.json) has no field for the accelerator, so its identity is part
of the machine name (``x86_64-2t-cpu-only``, ``x86_64-16t-nvidia-h100-80gb-hbm3``) and is written
again, in full, beside each run by the benchmark suite (``results/asv-meta/``).
"""

from __future__ import annotations

import os
import platform
import re

import torch


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def accelerators() -> list[str]:
    """Names of the accelerators torch sees (CUDA, then Ascend NPU); empty on a CPU-only host."""
    names: list[str] = []
    if torch.cuda.is_available():
        names += [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    npu = getattr(torch, "npu", None)
    if npu is not None and npu.is_available():
        names += [npu.get_device_name(i) for i in range(npu.device_count())]
    return names


def machine_name() -> str:
    """The asv machine name: CPU arch and thread count, then the first accelerator (or cpu-only)."""
    accel = accelerators()
    return f"{platform.machine() or 'cpu'}-{os.cpu_count() or 1}t-{_slug(accel[0]) if accel else 'cpu-only'}"


def describe() -> dict[str, object]:
    """Everything about the host a run should be stored with."""
    return {
        "machine": machine_name(),
        "accelerators": accelerators(),
        "arch": platform.machine(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
