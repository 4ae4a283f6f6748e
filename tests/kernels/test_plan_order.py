"""The strided walk's dim order: the innermost dim is the one most operand bytes step through at
unit stride (a transposed input with a contiguous output walks the input, not the output)."""

from __future__ import annotations

import torch

import kernels
from kernels.modes import Layout, Variant
from kernels.plan import elementwise_geometry, reorder


def test_transposed_inputs_walk_their_own_rows() -> None:
    shape, strides = reorder((64, 4096), [(1, 64), (1, 64), (1, 64), (4096, 1)], [4, 4, 4, 4])
    assert shape == (4096, 64) and strides[1] == (64, 1) and strides[3] == (1, 4096)


def test_contiguous_and_broadcast_operands_keep_the_output_order() -> None:
    dense = [(4096, 1)] * 4
    assert reorder((64, 4096), dense, [4] * 4) == ((64, 4096), dense)
    bcast = [(0, 0), (4096, 1), (0, 1), (4096, 1)]  # 0-d grad, a row of target broadcast
    assert reorder((64, 4096), bcast, [4] * 4) == ((64, 4096), bcast)


def test_wider_operands_outvote_narrower_ones() -> None:
    # One float32 output (4 bytes) prefers dim 1, one bfloat16 input (2 bytes) prefers dim 0.
    shape, _ = reorder((8, 16), [(0, 0), (1, 8), (0, 0), (16, 1)], [2, 2, 2, 4])
    assert shape == (8, 16)


def test_reordered_walk_computes_the_same_values() -> None:
    x = torch.randn(300, 64).t()
    t = torch.randn(300, 64).t()
    g = torch.randn(64, 300)
    out = kernels.mse_loss_backward(g, x, t, "none", backend="cpu")
    want = 2 * (x.double() - t.double()) * g.double()
    assert torch.allclose(out.double(), want, rtol=1e-6, atol=1e-6)


def test_transposed_inputs_with_a_contiguous_out_are_their_own_layout() -> None:
    """Layout.TRANSPOSED: the 2-d walk whose out is unit-strided on the outer dim once reorder puts
    the inputs' unit stride inside; a broadcast row or a 3-d transpose stay STRIDED (the generic
    walk). A transposed out too is one dense layout: test_one_dense_layout_shared_by_every_operand..."""
    t = torch.randn(300, 64).t()
    dense = torch.randn(64, 300)
    cases = {
        "transposed inputs": ((t, t, t, torch.empty(64, 300)), Layout.TRANSPOSED),
        # A dense gradient votes with out for out's order (8 bytes a side): the generic walk.
        "dense grad": ((dense, t, t, torch.empty(64, 300)), Layout.STRIDED),
        "0-d grad": ((torch.tensor(1.0), t, t, torch.empty(64, 300)), Layout.TRANSPOSED),
        "broadcast row": ((dense, dense, dense[:1].expand(64, 300), torch.empty(64, 300)), Layout.STRIDED),
        "3-d": (
            (torch.tensor(1.0), *(torch.randn(5, 300, 64).transpose(1, 2),) * 2, torch.empty(5, 64, 300)),
            Layout.STRIDED,
        ),
    }
    for name, ((g, x, tg, out), want) in cases.items():
        geo = elementwise_geometry(g, x, tg, out, tuple(out.shape))
        assert geo.layout is want, name
        assert geo.variants == (Variant.STRIDED,), name


def test_one_dense_layout_shared_by_every_operand_runs_the_contiguous_loops() -> None:
    """Operands that share one dense layout (transposed, channels-last, or apart only by size-1
    dims) are one run of memory each: Layout.CONTIGUOUS, so the flat and scalar_grad loops and the
    contiguous tables serve them, with the same bits as the strided walk over the same call."""
    t2 = torch.randn(300, 64).t()
    nhwc = torch.randn(2, 5, 6, 7).to(memory_format=torch.channels_last)
    cases = {
        "transposed, out too": (torch.randn(300, 64).t(), t2, torch.randn(300, 64).t(), torch.empty(300, 64).t()),
        "0-d grad, transposed": (torch.tensor(0.5), t2, torch.randn(300, 64).t(), torch.empty(300, 64).t()),
        "channels-last": (torch.randn_like(nhwc), nhwc, torch.randn_like(nhwc), torch.empty_like(nhwc)),
        "size-1 dims apart": (
            torch.randn(1, 4096),
            torch.randn(4096),
            torch.randn(1, 1, 4096),
            torch.empty(1, 1, 4096),
        ),
    }
    for name, (g, x, tg, out) in cases.items():
        geo = elementwise_geometry(g, x, tg, out, tuple(out.shape))
        assert geo.layout is Layout.CONTIGUOUS and geo.shape == (out.numel(),), name
        assert geo.variants[1] is Variant.STRIDED, name
        flat = kernels.mse_loss_backward(g, x, tg, "sum", out=out.clone(), backend="cpu")
        walked = kernels.mse_loss_backward(
            g, x, tg, "sum", out=out.clone(), backend="cpu", config={"variant": "strided", "tile": 256, "cores": 1}
        )
        assert torch.equal(flat, walked), name
        want = 2 * (x.double() - tg.double()) * g.double()
        assert torch.allclose(flat.double(), want, rtol=1e-6, atol=1e-6), name
        assert flat.stride() == out.stride(), name


def test_layouts_that_are_not_one_run_of_memory_keep_the_strided_walk() -> None:
    dense, t2 = torch.randn(64, 300), torch.randn(300, 64).t()
    cases = {
        "a full grad in another layout": (dense, t2, t2, torch.empty(300, 64).t()),
        "every other column": (dense[:, ::2], dense[:, ::2], dense[:, ::2], torch.empty(64, 300)[:, ::2]),
        "a broadcast row": (dense, dense, dense[:1].expand(64, 300), torch.empty(64, 300)),
    }
    for name, (g, x, tg, out) in cases.items():
        assert elementwise_geometry(g, x, tg, out, tuple(out.shape)).layout is Layout.STRIDED, name


def test_every_backend_runs_a_shared_dense_layout_in_its_flat_kernels(backend: str, device: str) -> None:
    """The same plan on each backend that loads (the CPU and the Triton interpreter in CI): the flat
    kernels are handed the views themselves and index them from their first elements."""
    g, x, t = (torch.randn(300, 64, device=device).t() for _ in range(3))
    out = torch.empty(300, 64, device=device).t()
    _, ex = kernels.aclnn.mse_loss_backward_get_workspace_size(g, x, t, 0, out, backend=backend)
    assert ex.config.variant is Variant.FLAT
    kernels.aclnn.mse_loss_backward(None, 0, ex)
    want = 2 * (x.double() - t.double()) * g.double()
    assert torch.allclose(out.double(), want, rtol=1e-6, atol=1e-6)
    nhwc = torch.randn(2, 5, 6, 7, device=device).to(memory_format=torch.channels_last)
    target, out = torch.rand_like(nhwc), torch.empty_like(nhwc)  # channels-last too
    g0 = torch.tensor(0.3, device=device)
    _, ex = kernels.aclnn.kl_div_backward_get_workspace_size(g0, nhwc, target, 1, True, out, backend=backend)
    assert ex.config.variant is Variant.SCALAR_GRAD
    kernels.aclnn.kl_div_backward(None, 0, ex)
    want = -(target.double().exp() * 0.3) / nhwc.numel()
    assert torch.allclose(out.double(), want, rtol=1e-5, atol=1e-9)


def test_a_shared_dense_layout_gives_the_same_bits_under_every_sampled_config() -> None:
    """The contiguous space's knobs (variant, tile, cores, prefetch, stream) on shared-layout calls:
    an out 4 bytes past a line (streamed stores then start mid-line), a (1, 1) gradient, l1 with
    mixed dtypes, and KL on the CPU. Every sampled config gives the default's bits."""
    rows, cols = 301, 64  # 19264 elements: whole tiles and a ragged one

    def transposed(dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(rows, cols).to(dtype).t()

    x, t = transposed(), transposed()
    out32 = torch.empty(rows * cols + 1)[1:].view(rows, cols).t()  # off a line by one element
    g16, t16 = transposed(torch.float16), transposed(torch.float16)
    xb, tb = transposed(torch.bfloat16), transposed(torch.bfloat16)
    out_b = torch.empty(rows, cols, dtype=torch.bfloat16).t()
    aclnn = kernels.aclnn
    plans = {
        "mse, out off a line, (1, 1) grad": lambda cfg: aclnn.mse_loss_backward_get_workspace_size(
            torch.full((1, 1), 0.75), x, t, 0, out32, backend="cpu", config=cfg
        ),
        "l1, float16 grad and target, float32 input": lambda cfg: aclnn.l1_loss_backward_get_workspace_size(
            g16, x, t16, 2, out32, backend="cpu", config=cfg
        ),
        "kl_div-log, bfloat16": lambda cfg: aclnn.kl_div_backward_get_workspace_size(
            torch.tensor(-0.5).bfloat16(), xb, tb, 1, True, out_b, backend="cpu", config=cfg
        ),
    }
    for name, plan in plans.items():
        _, ex = plan(None)
        assert ex.geometry.layout is Layout.CONTIGUOUS, name
        bits = torch.int32 if ex.out.dtype == torch.float32 else torch.int16
        kernels.dispatch.run(ex)
        want = ex.out.contiguous().view(bits).clone()
        sample = ex.space.sample(12, seed=5)
        assert any(c.stream for c in sample) and any(c.prefetch for c in sample), name
        for cfg in sample:
            ex.out.zero_()
            _, run = plan(cfg)
            kernels.dispatch.run(run)
            assert torch.equal(run.out.contiguous().view(bits), want), (name, cfg.short())
