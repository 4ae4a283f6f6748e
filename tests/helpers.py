"""Test-side wrappers of kernels.accuracy (the one accuracy bar shared with the tuner)."""

from __future__ import annotations

import torch

from kernels.accuracy import mismatch, ulps_for

__all__ = ["assert_within", "ulps_for"]


def assert_within(
    out: torch.Tensor, ref: torch.Tensor, ulps: float, *, rel_to: torch.Tensor | None = None, rel: float = 0.0
) -> None:
    problem = mismatch(out, ref, ulps, rel_to=rel_to, rel=rel)
    assert problem is None, problem
