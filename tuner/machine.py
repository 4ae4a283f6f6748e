"""Which machine a measurement came from: asv's machine name carries the accelerator.

asv's machine file (~/.asv-machine.json) has no field for the accelerator, so its identity is part
of the machine name (``x86_64-avx2-2t-znver3-cpu-only``,
``x86_64-avx512-16t-sapphirerapids-nvidia-h100-80gb-hbm3``) and is written again, in full, beside
each run by the benchmark suite (``results/asv-meta/``). The CPU's vector tier and its
microarchitecture are in the name too: asv compares a commit only with runs of the same machine
name, and an AVX-512 host and an AVX2 one run different loops at different speeds (results/
performance.md, section 29), as do two hosts of one tier: this machine class has come as an Intel
Xeon and as an AMD Zen 4, both AVX-512, whose DRAM copy and gathers differ (the Xeon's table walk
runs 1.16-2.6x the exp loop's time on the Zen 4; section 32). One name for two hosts would read a
change of host as a regression.

The frozen tables are kept per tier by default (kernels.backends.cpu.table_scope): a tier's loops
are the same code on every host of it, so its table is valid on each, if tuned on one. A
microarchitecture's own table, tuned with LOSSTUNE_CPU_TABLE_SCOPE=microarch, is read before it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path

import torch

from kernels.backends import slug
from kernels.backends.cpu import BACKEND as CPU_BACKEND
from kernels.backends.cpu import device_name, forced_switches, forced_tag, host_isa, microarch


def accelerators() -> list[str]:
    """Names of the accelerators torch sees (CUDA, then Ascend NPU); empty on a CPU-only host."""
    names: list[str] = []
    if torch.cuda.is_available():
        names += [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    npu = getattr(torch, "npu", None)
    if npu is not None and npu.is_available():
        names += [npu.get_device_name(i) for i in range(npu.device_count())]
    return names


def cpu_model() -> str:
    """The CPU's marketing name (``AMD EPYC``, ``Intel(R) Xeon(R) Platinum 8480+``): Linux's
    /proc/cpuinfo, else what platform says (often empty on Linux), else the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def machine_name(environ: Mapping[str, str] | None = None) -> str:
    """The asv machine name: CPU arch, vector tier and thread count, the microarchitecture, then the
    first accelerator (or cpu-only); where a CPU loop switch is set (``environ``, default the
    process's), ``-forced-`` and 8 hex digits of their tag. Such a run measures loops the host does
    not run by default, and asv compares runs of one machine name alone: under the host's own name
    asv's pages and ``asv compare`` would read a switch as a regression. The switches themselves
    are stored with the run (describe's ``cpu_forced``)."""
    accel = accelerators()
    device = device_name(platform.machine(), os.cpu_count() or 1)
    parts = [device, microarch(), slug(accel[0]) if accel else "cpu-only"]
    tag = forced_tag(environ)
    if tag:
        parts.append("forced-" + hashlib.sha256(tag.encode()).hexdigest()[:8])
    return "-".join(p for p in parts if p)


THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def torch_pages(setting: Path = THP_SETTING, env: Mapping[str, str] | None = None) -> str:
    """The pages torch's CPU allocator gets for a tensor of 2 MiB and up, and why: the kernel's
    transparent huge page mode and ``THP_MEM_ALLOC_ENABLE``, which c10's allocator reads once a
    process through ``c10::utils::check_env``: exactly "1" has it madvise(MADV_HUGEPAGE) such a
    buffer; "0", unset or any other value (which torch warns of and ignores) does not.

    Why a report says it: PyTorch's backward allocates its result every call, and here it faulted
    those pages in again each time; on 2 MiB pages its time at 2^24 and 2^26 was 0.39x (median),
    while our kernels, timed into an out allocated once, did not move beyond the runs' spread
    (results/performance.md, section 85). So the vendor column is PyTorch as this setting gives it."""
    env = os.environ if env is None else env
    try:
        found = re.search(r"\[(\w+)\]", setting.read_text())
    except OSError:
        found = None
    raw = env.get("THP_MEM_ALLOC_ENABLE")
    named = "THP_MEM_ALLOC_ENABLE " + ("unset" if raw is None else f"{raw!r}")
    if found is None:
        return f"pages unknown (no {setting}; {named})"
    mode = found.group(1)
    huge = mode == "always" or (mode == "madvise" and raw == "1")
    return f"{'2 MiB' if huge else '4 KiB'} pages (THP {mode}, {named})"


def describe() -> dict[str, object]:
    """Everything about the host a run should be stored with; with it, what the CPU backend's loop
    switches picked here (``cpu_loops``) and which of them the environment set (``cpu_forced``):
    a run with any set measured loops this host does not run by default."""
    return {
        "machine": machine_name(),
        "accelerators": accelerators(),
        "arch": platform.machine(),
        "cpu_model": cpu_model(),
        "isa": host_isa(),
        "microarch": microarch(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_pages": torch_pages(),
        "platform": platform.platform(),
        "cpu_loops": CPU_BACKEND.picks(),
        "cpu_forced": forced_switches(),
    }
