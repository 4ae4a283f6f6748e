"""The three examples of the CANN documents (SEMANTICS.md), bit for bit, on every backend."""

from __future__ import annotations

import torch

import kernels


def test_mse_doc_example(backend: str, device: str) -> None:
    g = torch.tensor([[0.0, 1.0], [2.0, 3.0]], device=device)
    out = kernels.mse_loss_backward(g, g.clone(), torch.ones(2, 2, device=device), "mean", backend=backend).cpu()
    assert out.tolist() == [[0.0, 0.0], [1.0, 3.0]]
    assert torch.signbit(out[0, 0])  # the first element is -0.0: (0 - 1) * 0.5 * 0


def test_l1_doc_example(backend: str, device: str) -> None:
    g = torch.tensor([[0.0, 1.0], [2.0, 3.0]], device=device)
    out = kernels.l1_loss_backward(g, g.clone(), torch.ones(2, 2, device=device), "mean", backend=backend)
    assert out.cpu().tolist() == [[0.0, 0.0], [0.5, 0.75]]


def test_kl_div_doc_example(backend: str, device: str) -> None:
    a = torch.tensor([[2.0, 3.0], [5.0, 8.0]], device=device)
    out = kernels.kl_div_backward(a, a.clone(), a.clone(), "none", False, backend=backend)
    assert out.cpu().tolist() == [[-4.0, -9.0], [-25.0, -64.0]]


def test_two_phase_form_matches_one_shot(backend: str, device: str) -> None:
    g = torch.randn((), device=device)
    x, t = torch.randn(5, 7, device=device), torch.randn(5, 7, device=device)
    out = torch.empty(5, 7, device=device)
    size, ex = kernels.aclnn.mse_loss_backward_get_workspace_size(g, x, t, kernels.Reduction.MEAN, out, backend=backend)
    assert size == 0 and ex.backend == backend
    assert ex.config_source.startswith(("default", "frozen"))
    assert "scalar_grad" in repr(ex) and backend in repr(ex)
    kernels.aclnn.mse_loss_backward(None, size, ex)
    assert torch.equal(out, kernels.mse_loss_backward(g, x, t, "mean", backend=backend))
    klout = torch.empty(5, 7, device=device)
    size, ex = kernels.aclnn.kl_div_backward_get_workspace_size(g, x, t, "batchmean", True, klout, backend=backend)
    kernels.aclnn.kl_div_backward(None, size, ex)
    assert torch.equal(klout, kernels.kl_div_backward(g, x, t, "batchmean", True, backend=backend))
    l1out = torch.empty(5, 7, device=device)
    size, ex = kernels.aclnn.l1_loss_backward_get_workspace_size(g, x, t, 2, l1out, backend=backend)
    kernels.aclnn.l1_loss_backward(None, size, ex)
    assert torch.equal(l1out, kernels.l1_loss_backward(g, x, t, "sum", backend=backend))
