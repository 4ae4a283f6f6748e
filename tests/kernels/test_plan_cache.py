"""The plan cache of phase one (kernels/dispatch.py): a replayed call plans exactly what the full
path plans, every error is still raised, nothing a call holds is kept alive, and writing a frozen
table drops the plans made from the old one."""

from __future__ import annotations

import dataclasses
import gc
import sys
import weakref

import pytest
import torch

import kernels
from kernels import dispatch, frozen
from kernels.errors import AclnnError
from kernels.executor import Executor
from kernels.ops import kl_div, l1, mse
from tests.helpers import assert_within, ulps_for


@pytest.fixture(autouse=True)
def _fresh_plans() -> None:
    dispatch.clear_plans()


def _plan(ex: Executor) -> tuple[object, ...]:
    return (ex.op, ex.formula.name, ex.backend, ex.config, ex.config_source, ex.key, ex.geometry, ex.cof, ex.space)


def test_replay_plans_what_the_full_path_plans_on_new_tensors() -> None:
    g, x, t = torch.randn(()), torch.randn(64, 33), torch.randn(33)
    _, first = mse.get_workspace_size(g, x, t, "mean", None, allocate=True)
    g2, x2, t2 = torch.randn(()), torch.randn(64, 33), torch.randn(33)
    _, again = mse.get_workspace_size(g2, x2, t2, "mean", None, allocate=True)
    assert len(dispatch._plans) == 1  # the second call was a replay
    dispatch.clear_plans()
    _, full = mse.get_workspace_size(g2, x2, t2, "mean", None, allocate=True)
    assert _plan(again) == _plan(full) == _plan(first)
    assert again.grad is g2 and again.inp is x2 and again.target is t2
    assert again.out is not first.out and again.out.shape == (64, 33)
    dispatch.run(again)
    assert_within(again.out, mse.reference(g2, x2, t2, "mean"), ulps_for(torch.float32))


def test_other_strides_get_their_own_plan_and_right_values() -> None:
    t = torch.randn(40, 30)
    contiguous = torch.randn(40, 30)
    transposed = torch.randn(30, 40).t()
    g = torch.randn(40, 30)
    a = kernels.mse_loss_backward(g, contiguous, t, "none")
    b = kernels.mse_loss_backward(g, transposed, t, "none")
    assert len(dispatch._plans) == 2
    assert_within(a, mse.reference(g, contiguous, t, "none"), 4.0)
    assert_within(b, mse.reference(g, transposed, t, "none"), 4.0)


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        ({"reduction": 1}, {"reduction": True}),  # True == 1 and hashes alike: the key holds the type
        ({"log_target": True}, {"log_target": 1}),
        ({"out": None}, {"out": torch.empty(7, dtype=torch.float16)}),
    ],
    ids=["reduction-bool", "log_target-int", "out-dtype"],
)
def test_an_error_is_raised_after_a_similar_call_succeeded(good: dict[str, object], bad: dict[str, object]) -> None:
    g, x, t = torch.randn(7), torch.randn(7), torch.randn(7)
    args = {"reduction": "sum", "log_target": False, "out": None}
    kernels.kl_div_backward(g, x, t, **(args | good))
    with pytest.raises(AclnnError) as err:
        kernels.kl_div_backward(g, x, t, **(args | bad))
    assert err.value.code == 161002


def test_phase_one_without_out_still_raises_161001_after_an_allocating_call() -> None:
    g, x, t = torch.randn(5), torch.randn(5), torch.randn(5)
    kernels.mse_loss_backward(g, x, t, "sum")  # allocates out: cached with allocate=True
    with pytest.raises(AclnnError) as err:
        mse.get_workspace_size(g, x, t, "sum", None)
    assert err.value.code == 161001 and "out" in str(err.value)


def test_explicit_configs_are_never_cached() -> None:
    g, x, t = torch.randn(9), torch.randn(9), torch.randn(9)
    _, ex = mse.get_workspace_size(g, x, t, "none", torch.empty(9))
    mse.get_workspace_size(g, x, t, "none", torch.empty(9), config=ex.space.default)
    assert len(dispatch._plans) == 1


def test_the_cache_holds_no_tensor_alive() -> None:
    g, x, t = torch.randn(1000), torch.randn(1000), torch.randn(1000)
    out = kernels.kl_div_backward(g, x, t, "mean", True)
    refs = [weakref.ref(v) for v in (g, x, t, out)]
    del g, x, t, out
    gc.collect()
    assert all(r() is None for r in refs)
    assert len(dispatch._plans) == 1


def test_caching_a_plan_keeps_the_callers_executor_and_a_template_without_tensors() -> None:
    g, x, t = torch.randn(()), torch.randn(64, 33), torch.randn(33)
    _, first = mse.get_workspace_size(g, x, t, "mean", None, allocate=True)
    ((template, _),) = dispatch._plans.values()
    assert (template.grad, template.inp, template.target, template.out) == (None, None, None, None)
    assert _plan(template) == _plan(first)
    assert first.grad is g and first.inp is x and first.target is t and first.out.shape == (64, 33)


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="CPython's dict layouts")
def test_a_replayed_executor_gets_a_combined_dict_which_cpython_specialises_loads_on() -> None:
    """A split dict (what ``vars()`` makes of an instance's inline values) costs every launch of a
    replay 0.2-0.3 us (Executor.bind); a dict built anew is combined, and larger by its own keys."""
    g, x, t = torch.randn(()), torch.randn(64, 33), torch.randn(33)
    mse.get_workspace_size(g, x, t, "mean", None, allocate=True)
    _, again = mse.get_workspace_size(g, x, t, "mean", None, allocate=True)
    assert len(dispatch._plans) == 1  # a replay
    assert sys.getsizeof(vars(again)) == sys.getsizeof({**vars(again)})
    fresh = dataclasses.replace(again)  # inline values; vars() makes them a split dict
    assert sys.getsizeof(vars(fresh)) < sys.getsizeof({**vars(fresh)})  # the check can tell them apart


def _mse_key(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> tuple[object, ...] | None:
    return dispatch.plan_key(mse._call("sum"), g, x, t, None, None, None, True)


def test_writing_a_frozen_table_drops_older_plans() -> None:
    g, x, t = torch.randn(11), torch.randn(11), torch.randn(11)
    key = _mse_key(g, x, t)
    kernels.mse_loss_backward(g, x, t, "sum")
    assert dispatch.replay(key, g, x, t, None) is not None
    assert dispatch.run_cached(key, g, x, t, None) is not None
    frozen.reset()  # what tuner.freeze does after writing a table
    assert not dispatch._plans
    assert dispatch.replay(key, g, x, t, None) is None and dispatch.run_cached(key, g, x, t, None) is None
    kernels.mse_loss_backward(g, x, t, "sum")  # the full path plans again, from the table read anew
    new_key = _mse_key(g, x, t)
    assert dispatch.replay(new_key, g, x, t, None) is not None
    assert new_key != key and dispatch.replay(key, g, x, t, None) is None  # keys from before the write are retired


def test_a_plan_made_across_a_table_write_is_never_replayed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread's tuner.freeze lands between this call's table lookup and its remember, so
    its plan holds the old table's config. Played on one thread: the reset runs inside the lookup."""
    g, x, t = torch.randn(13), torch.randn(13), torch.randn(13)
    lookup = frozen.lookup

    def lookup_then_reset(*args: object, **kwargs: object) -> object:
        found = lookup(*args, **kwargs)
        monkeypatch.setattr(frozen, "lookup", lookup)  # once
        frozen.reset()
        return found

    monkeypatch.setattr(frozen, "lookup", lookup_then_reset)
    stale = kernels.mse_loss_backward(g, x, t, "sum")
    assert frozen.lookup is lookup  # the reset did land mid-call
    builds: list[Executor] = []
    build = dispatch.build

    def counted(*args: object, **kwargs: object) -> Executor:
        builds.append(build(*args, **kwargs))  # type: ignore[arg-type]
        return builds[-1]

    monkeypatch.setattr(dispatch, "build", counted)
    again = kernels.mse_loss_backward(g, x, t, "sum")
    assert len(builds) == 1  # planned anew from the table as it is now, not replayed from the old one
    kernels.mse_loss_backward(g, x, t, "sum")
    assert len(builds) == 1  # and that plan is replayed
    assert torch.equal(again, stale)
    assert_within(again, mse.reference(g, x, t, "sum"), ulps_for(torch.float32))


def test_a_cached_public_call_launches_the_plans_launcher_without_binding_an_executor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g, x, t = torch.randn(4096), torch.randn(4096), torch.rand(4096)
    first = kernels.kl_div_backward(g, x, t, "mean")
    ((template, _),) = dispatch._plans.values()
    assert template.launcher is not None  # a contiguous CPU plan

    def no_bind(*_: object) -> Executor:
        raise AssertionError("the public call's replay bound an executor")

    monkeypatch.setattr(Executor, "bind", no_bind)
    g2, t2 = torch.randn(4096), torch.rand(4096)
    second = kernels.kl_div_backward(g2, x, t2, "mean")
    assert second is not first and second.shape == (4096,)
    assert_within(second, kl_div.reference(g2, x, t2, "mean"), ulps_for(torch.float32))
    out = torch.empty(4096)
    assert kernels.kl_div_backward(g, x, t, "mean", out=out) is out  # another key: planned, then replayed
    assert kernels.kl_div_backward(g2, x, t2, "mean", out=out) is out
    assert_within(out, kl_div.reference(g2, x, t2, "mean"), ulps_for(torch.float32))
    assert len(dispatch._plans) == 2


def test_a_cached_public_call_of_a_walk_binds_and_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    t = torch.randn(40, 30)
    transposed = torch.randn(30, 40).t()
    kernels.l1_loss_backward(torch.randn(40, 30), transposed, t, "sum")
    ((template, _),) = dispatch._plans.values()
    assert template.launcher is None  # the strided walk reads more of its plan on each launch

    def no_build(*_: object, **__: object) -> Executor:
        raise AssertionError("the cached call planned again")

    bound: list[Executor] = []
    bind = Executor.bind

    def counted(self: Executor, *tensors: torch.Tensor) -> Executor:
        bound.append(self)
        return bind(self, *tensors)

    monkeypatch.setattr(dispatch, "build", no_build)
    monkeypatch.setattr(Executor, "bind", counted)
    g2, x2 = torch.randn(40, 30), torch.randn(30, 40).t()
    again = kernels.l1_loss_backward(g2, x2, t, "sum")
    assert bound == [template]  # the cache's template, bound once: the replay, not the full path
    assert_within(again, l1.reference(g2, x2, t, "sum"), ulps_for(torch.float32))


def test_tensor_subclasses_are_keyed_and_anything_else_takes_the_full_path() -> None:
    p = torch.nn.Parameter(torch.randn(6))
    g, t = torch.randn(6), torch.randn(6)
    key = dispatch.plan_key(mse._call("sum"), g, p, t, None, None, None, True)
    assert key is not None and key == dispatch.plan_key(mse._call("sum"), g, p.detach(), t, None, None, None, True)
    assert dispatch.plan_key(mse._call("sum"), g, p.tolist(), t, None, None, None, True) is None
    assert dispatch.plan_key(mse._call("sum"), g, p, t, [0.0] * 6, None, None, True) is None
    with pytest.raises(AclnnError) as err:
        kernels.mse_loss_backward(g, p.tolist(), t, "sum")
    assert err.value.code == 161002 and "input" in str(err.value)
