"""The CPU backend's launcher (kernels/backends/cpu.py, Executor.launcher): a contiguous plan's launch
decided once per plan, taken by dispatch.run and replayed plans alike, never by another backend
instance or by a plan copied with another formula, and launching on the tensors it is handed."""

from __future__ import annotations

import dataclasses

import numba
import pytest
import torch

import kernels
from kernels import dispatch
from kernels.backends import cpu, cpu_loops
from kernels.backends.cpu import TABLE_MIN_NUMEL, CpuBackend
from kernels.modes import Variant
from kernels.ops import kl_div, l1, mse
from tests.helpers import assert_within, ulps_for


@pytest.fixture(autouse=True)
def _fresh_plans() -> None:
    dispatch.clear_plans()


def test_contiguous_plans_have_a_launcher_and_the_walks_none() -> None:
    x, t = torch.randn(64, 33), torch.randn(64, 33)
    _, flat = mse.get_workspace_size(torch.randn(64, 33), x, t, "none", None, allocate=True)
    _, scalar = l1.get_workspace_size(torch.randn(()), x, t, "mean", None, allocate=True)
    _, walk = mse.get_workspace_size(torch.randn(64, 33), x, torch.randn(33), "none", None, allocate=True)
    _, summed = kl_div.get_workspace_size(torch.randn(64, 33), torch.randn(33), t, "sum", False, None, allocate=True)
    assert flat.config.variant is Variant.FLAT and flat.launcher is not None
    assert scalar.config.variant is Variant.SCALAR_GRAD and scalar.launcher is not None
    assert walk.config.variant is Variant.STRIDED and walk.launcher is None
    assert summed.config.variant is Variant.REDUCE and summed.launcher is None


def test_a_16bit_target_table_walk_has_no_launcher() -> None:
    """The table walk builds a table per launch (CpuBackend._look_up): the backend's launch, not a
    launcher."""
    n = TABLE_MIN_NUMEL  # the table pays off from there on: the space offers it no sooner
    g, x, t = torch.randn(()).bfloat16(), torch.randn(n).bfloat16(), torch.randn(n).bfloat16()
    _, ex = kl_div.get_workspace_size(g, x, t, "mean", True, None, allocate=True)
    table = [c for c in ex.space if c.variant is Variant.TABLE]
    if not table:
        pytest.skip("no table walk in this host's space (no hardware gathers)")
    _, planned = kl_div.get_workspace_size(g, x, t, "mean", True, torch.empty_like(x), config=table[0])
    assert planned.launcher is None
    dispatch.run(planned)
    assert_within(planned.out, kl_div.reference(g, x, t, "mean", True), ulps_for(torch.bfloat16))


def test_an_empty_problem_launches_nothing() -> None:
    g, x, t = torch.randn(0), torch.randn(0), torch.randn(0)
    _, ex = mse.get_workspace_size(g, x, t, "none", None, allocate=True)
    assert ex.empty and ex.launcher is cpu._nothing  # the no-op: no loop is called with n = 0
    dispatch.run(ex)  # nothing to launch, and nothing fails


def test_a_cached_launcher_launches_on_the_tensors_of_each_call() -> None:
    """The launcher keeps no address: two calls with one plan write each its own out, right."""
    g = torch.randn(())
    x1, t1, x2, t2 = (torch.randn(5000) for _ in range(4))
    a = kernels.l1_loss_backward(g, x1, t1, "sum")
    kept = a.clone()
    b = kernels.l1_loss_backward(g, x2, t2, "sum")
    assert len(dispatch._plans) == 1  # the second call replayed the first's plan and its launcher
    assert torch.equal(a, kept)
    assert_within(a, l1.reference(g, x1, t1, "sum"), ulps_for(torch.float32))
    assert_within(b, l1.reference(g, x2, t2, "sum"), ulps_for(torch.float32))


def test_a_plan_copied_with_another_formula_launches_that_formula() -> None:
    """dataclasses.replace (tuner.restamp's plans) leaves the launcher None: the copy's launch reads
    the copy, not a launch of the plan it came from."""
    g, x, t = torch.randn(3000), torch.randn(3000), torch.randn(3000)
    _, ex = mse.get_workspace_size(g, x, t, "none", None, allocate=True)
    as_l1 = dataclasses.replace(ex, formula=l1.FORMULA)
    assert ex.launcher is not None and as_l1.launcher is None
    dispatch.run(as_l1)
    assert_within(as_l1.out, torch.sign(x - t) * g * ex.cof, ulps_for(torch.float32))


def test_another_backend_instance_launches_with_its_own_loops() -> None:
    """tuner.restamp launches a plan through a CpuBackend over another revision of the loops, to
    read what that revision compiles: the plan's launcher (the registered backend's) must not
    stand in for it."""
    g, x, t = torch.randn(2048), torch.randn(2048), torch.randn(2048)
    _, ex = mse.get_workspace_size(g, x, t, "none", None, allocate=True)
    assert ex.launcher is not None
    other = CpuBackend(cpu_loops)

    def compiled() -> list[str]:  # the other backend's own mse loops that hold a compiled signature
        return [name for name, fn in other.built() if name.startswith("mse ") and fn.signatures]

    assert compiled() == []
    ex.out.fill_(float("nan"))
    other.launch(ex)
    assert compiled()
    assert_within(ex.out, mse.reference(g, x, t, "none"), ulps_for(torch.float32))


@pytest.mark.skipif(cpu_loops.max_threads() < 2, reason="one numba thread here")
def test_a_parallel_launcher_sets_its_thread_count_each_launch() -> None:
    """numba's thread count is the calling thread's: another plan may have set it (through
    cpu_loops.set_threads, whose memo is per thread) since this plan was made."""
    g, x, t = torch.randn(1 << 16), torch.randn(1 << 16), torch.randn(1 << 16)
    _, ex = mse.get_workspace_size(g, x, t, "none", None, allocate=True)
    two = dataclasses.replace(ex.space.default, cores=2)
    _, planned = mse.get_workspace_size(g, x, t, "none", torch.empty_like(x), config=two)
    assert planned.launcher is not None
    cpu_loops.set_threads(1)
    dispatch.run(planned)
    assert numba.get_num_threads() == 2
    assert_within(planned.out, mse.reference(g, x, t, "none"), ulps_for(torch.float32))
