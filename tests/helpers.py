"""Test-side wrappers of kernels.accuracy (the one accuracy bar shared with the tuner), and a
fresh-process runner for builds chosen at import time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from kernels.accuracy import mismatch, ulps_for

__all__ = ["assert_within", "run_fresh", "ulps_for"]

ROOT = Path(__file__).resolve().parents[1]


def assert_within(
    out: torch.Tensor, ref: torch.Tensor, ulps: float, *, rel_to: torch.Tensor | None = None, rel: float = 0.0
) -> None:
    problem = mismatch(out, ref, ulps, rel_to=rel_to, rel=rel)
    assert problem is None, problem


def run_fresh(code: str, env: dict[str, str]) -> str:
    """Run ``code`` in a new interpreter at the repository root with ``env`` added (the CPU
    backend picks its instruction builds when it is imported) and return what it printed."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()
