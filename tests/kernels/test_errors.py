"""One test per error of SEMANTICS.md: the right code, raised before anything is written."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import kernels

NULL, INVALID = 161001, 161002


def _ok() -> dict[str, torch.Tensor]:
    return {"g": torch.randn(2, 3), "x": torch.randn(2, 3), "t": torch.randn(2, 3), "out": torch.full((2, 3), 9.0)}


PHASE_ONE: dict[str, Callable[..., object]] = {
    "mse": lambda g, x, t, out, red=1: kernels.aclnn.mse_loss_backward_get_workspace_size(g, x, t, red, out),
    "l1": lambda g, x, t, out, red=1: kernels.aclnn.l1_loss_backward_get_workspace_size(g, x, t, red, out),
    "kl_div": lambda g, x, t, out, red=1: kernels.aclnn.kl_div_backward_get_workspace_size(g, x, t, red, False, out),
}


def _raises(code: int, fn: Callable[[], object], out: torch.Tensor | None, match: str) -> None:
    with pytest.raises(kernels.AclnnError, match=match) as e:
        fn()
    assert e.value.code == code
    assert e.value.status == ("ACLNN_ERR_PARAM_NULLPTR" if code == NULL else "ACLNN_ERR_PARAM_INVALID")
    if out is not None:
        assert torch.all(out == 9.0), "out was written before the error"


@pytest.mark.parametrize("op", PHASE_ONE)
@pytest.mark.parametrize("missing", ["g", "x", "t", "out"])
def test_none_tensor_is_nullptr(op: str, missing: str) -> None:
    args = _ok()
    args[missing] = None  # type: ignore[assignment]
    _raises(NULL, lambda: PHASE_ONE[op](**args), args["out"], "expected a tensor, got None")


@pytest.mark.parametrize("op", PHASE_ONE)
@pytest.mark.parametrize("bad", [torch.int32, torch.float64])
@pytest.mark.parametrize("arg", ["g", "x", "t", "out"])
def test_unsupported_dtype(op: str, bad: torch.dtype, arg: str) -> None:
    args = _ok()
    args[arg] = args[arg].to(bad)
    keep = args["out"] if arg != "out" else None
    _raises(INVALID, lambda: PHASE_ONE[op](**args), keep, "float32, float16 or bfloat16|cast to")


@pytest.mark.parametrize("arg", ["g", "t"])
def test_mse_dtype_mismatch(arg: str) -> None:
    args = _ok()
    args[arg] = args[arg].half()
    _raises(INVALID, lambda: PHASE_ONE["mse"](**args), args["out"], "no promotion")


def test_l1_result_not_castable() -> None:
    args = _ok()
    args["out"] = torch.zeros(2, 3, dtype=torch.int32)
    _raises(INVALID, lambda: PHASE_ONE["l1"](**args), None, "compute dtype float32 can be cast to")
    assert torch.all(args["out"] == 0)


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16])
def test_kl_out_dtype_must_be_inputs(out_dtype: torch.dtype) -> None:
    args = _ok()
    args["out"] = args["out"].to(out_dtype)
    _raises(INVALID, lambda: PHASE_ONE["kl_div"](**args), args["out"], "input's")


@pytest.mark.parametrize("op", PHASE_ONE)
def test_shapes_that_do_not_broadcast(op: str) -> None:
    args = _ok()
    args["t"] = torch.randn(4, 3)
    _raises(INVALID, lambda: PHASE_ONE[op](**args), args["out"], "broadcast")


def test_kl_grad_must_broadcast_to_b() -> None:
    args = _ok()
    args["g"] = torch.randn(5, 2, 3)  # broadcasts with B = (2, 3) but is larger than it
    _raises(INVALID, lambda: PHASE_ONE["kl_div"](**args), args["out"], "broadcasts to")


@pytest.mark.parametrize("op", PHASE_ONE)
def test_out_shape_wrong(op: str) -> None:
    args = _ok()
    args["out"] = torch.full((3, 2), 9.0)
    _raises(INVALID, lambda: PHASE_ONE[op](**args), args["out"], "shape")


@pytest.mark.parametrize("op", PHASE_ONE)
@pytest.mark.parametrize("arg", ["g", "x", "t", "out"])
def test_nine_dims(op: str, arg: str) -> None:
    args = _ok()
    args[arg] = torch.full((1,) * 7 + (2, 3), 9.0)
    _raises(INVALID, lambda: PHASE_ONE[op](**args), args["out"], "at most 8 dims")


@pytest.mark.parametrize(
    ("op", "reduction"),
    [
        ("mse", 3),
        ("l1", 3),
        ("kl_div", 4),
        ("mse", -1),
        ("l1", -1),
        ("kl_div", -1),
        ("mse", "avg"),
        ("l1", "avg"),
        ("kl_div", "avg"),
        ("mse", "batchmean"),
    ],
)
def test_reduction_out_of_range(op: str, reduction: object) -> None:
    args = _ok()
    _raises(INVALID, lambda: PHASE_ONE[op](**args, red=reduction), args["out"], "reduction")


def test_batchmean_on_zero_d() -> None:
    out = torch.full((), 9.0)
    _raises(
        INVALID,
        lambda: kernels.kl_div_backward(torch.ones(()), torch.ones(()), torch.ones(()), "batchmean", out=out),
        out,
        "batchmean",
    )


def test_reduction_accepts_enum_int_and_name() -> None:
    g, x, t = torch.randn(3), torch.randn(3), torch.randn(3)
    results = [kernels.mse_loss_backward(g, x, t, r) for r in (kernels.Reduction.SUM, 2, "sum", "SUM")]
    assert all(torch.equal(results[0], r) for r in results)


def test_expanded_out_is_rejected() -> None:
    out = torch.zeros(1, 3).expand(2, 3)
    _raises(
        INVALID,
        lambda: PHASE_ONE["mse"](torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 3), out),
        None,
        "overlapping",
    )


def test_explicit_backend_that_cannot_load_says_why() -> None:
    with pytest.raises(kernels.BackendUnavailable, match="npu.*needs torch_npu"):
        kernels.mse_loss_backward(torch.ones(2), torch.ones(2), torch.ones(2), backend="npu")


def test_backend_for_another_device_is_rejected() -> None:
    with pytest.raises((kernels.AclnnError, kernels.BackendUnavailable), match="backend"):
        kernels.mse_loss_backward(torch.ones(2), torch.ones(2), torch.ones(2), backend="cuda")


def test_unknown_backend_name() -> None:
    with pytest.raises(ValueError, match="expected one of cpu, cuda, npu, triton-interpret"):
        kernels.mse_loss_backward(torch.ones(2), torch.ones(2), torch.ones(2), backend="tpu")


@pytest.mark.parametrize("op", PHASE_ONE)
def test_an_out_whose_strides_fold_elements_together_is_rejected(op: str) -> None:
    """Not only a stride 0: an as_strided view whose steps are smaller than the dims inside them maps
    two elements to one address, where the stores would race."""
    folded = torch.full((65,), 9.0).as_strided((8, 8), (1, 1))
    args = {k: torch.randn(8, 8) for k in ("g", "x", "t")}
    _raises(INVALID, lambda: PHASE_ONE[op](args["g"], args["x"], args["t"], folded), folded, "share addresses")


def test_an_out_of_steps_the_stride_test_cannot_clear_but_apart_is_written_as_a_contiguous_one() -> None:
    """(2, 3) with strides (3, 2): offsets 0 2 4 3 5 7, all apart, though the step of its outer dim is
    not past its inner dim's reach: listed and compared, accepted, and given the contiguous call's values."""
    base = torch.full((8,), 9.0)
    out = base.as_strided((2, 3), (3, 2))
    g, x, t = (torch.randn(2, 3) for _ in range(3))
    want = kernels.mse_loss_backward(g, x, t, "none")
    kernels.mse_loss_backward(g, x, t, "none", out=out)
    assert torch.equal(out, want) and base[[1, 6]].tolist() == [9.0, 9.0]  # the gaps untouched


@pytest.mark.parametrize("size", [None, "0", 1.0, True])
def test_launch_takes_a_whole_workspace_size(size: object) -> None:
    g, x, t, out = (_ok()[k] for k in ("g", "x", "t", "out"))
    ws, ex = kernels.aclnn.mse_loss_backward_get_workspace_size(g, x, t, 1, out)
    _raises(
        INVALID, lambda: kernels.aclnn.mse_loss_backward(None, size, ex), out, "workspace_size: expected a whole number"
    )
    kernels.aclnn.mse_loss_backward(None, ws, ex)  # the size phase one gave still launches
    assert not torch.all(out == 9.0)


@pytest.mark.parametrize(
    ("knobs", "named"),
    [({"tile": 4096.0, "cores": 1}, "'tile': expected int, got 4096.0"), ({"tile": 4096, "cores": True}, "'cores'")],
)
def test_a_config_knob_of_another_type_is_rejected_in_phase_one(knobs: dict[str, object], named: str) -> None:
    """A space compares by value (4096.0 == 4096, True == 1): a float tile passed phase one and stopped
    numba's compile in phase two; cores=True ran as one core. Dict or Tiling, phase one refuses it."""
    g, x, t, out = (_ok()[k] for k in ("g", "x", "t", "out"))
    call = kernels.aclnn.mse_loss_backward_get_workspace_size
    _raises(INVALID, lambda: call(g, x, t, 1, out, backend="cpu", config=knobs), out, named)
    tiling = kernels.Tiling(**{**knobs, "variant": kernels.Variant.SCALAR_GRAD})
    _raises(INVALID, lambda: call(g, x, t, 1, out, backend="cpu", config=tiling), out, named)
