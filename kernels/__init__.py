"""losstune's op package: the CANN loss backwards (MSE, L1, KL divergence) with tunable kernels.

Importing it loads torch and numpy only; numba, Triton, torch_npu and optuna load when a backend
or the tuner first needs them.
"""

from __future__ import annotations

from kernels import aclnn
from kernels.backends import BackendUnavailable
from kernels.errors import AclnnError
from kernels.modes import GradKind, Layout, Op, Reduction, Variant
from kernels.ops.kl_div import kl_div_backward
from kernels.ops.l1 import l1_loss_backward
from kernels.ops.mse import mse_loss_backward
from kernels.tiling import Tiling

__all__ = [
    "AclnnError",
    "BackendUnavailable",
    "GradKind",
    "Layout",
    "Op",
    "Reduction",
    "Tiling",
    "Variant",
    "aclnn",
    "kl_div_backward",
    "l1_loss_backward",
    "mse_loss_backward",
]
