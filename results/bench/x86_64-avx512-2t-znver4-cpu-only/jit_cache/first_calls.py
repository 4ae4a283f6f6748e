"""A fresh process's first calls: three ops by three dtypes at 2^16 (mse full and 0-d, KL log_target
full, l1 full, mse through the transposed walk), through the public calls on the CPU backend, timed
from before ``import kernels`` to the last output. Prints the seconds, the compiled-loop cache's hits
and misses on the backend's loops, and a digest of every output's bits (the same digest whatever
the cache did is the point). Run it with LOSSTUNE_JIT_CACHE_DIR set (and LOSSTUNE_JIT_CACHE=0 for
the uncached reference)."""

import hashlib
import time

import torch

start = time.perf_counter()
import kernels  # noqa: E402 - timed from before the import
from kernels.backends import cpu  # noqa: E402

torch.manual_seed(0)
n = 1 << 16
outs = []
for dt in (torch.float32, torch.float16, torch.bfloat16):
    g, x, t = (torch.randn(n).to(dt) for _ in range(3))
    outs.append(kernels.mse_loss_backward(g, x, t, "none", backend="cpu"))
    outs.append(kernels.mse_loss_backward(torch.tensor(1.0).to(dt), x, t, "mean", backend="cpu"))
    outs.append(kernels.kl_div_backward(g, x, t, "none", True, backend="cpu"))
    outs.append(kernels.l1_loss_backward(g, x, t, "none", backend="cpu"))
    xt = torch.randn(256, 256).to(dt).t()
    outs.append(kernels.mse_loss_backward(g.view(256, 256), xt, t.view(256, 256), "none", backend="cpu"))
seconds = time.perf_counter() - start
fns = [fn for _, fn in cpu.BACKEND.built()]
hits = sum(sum(fn._cache_hits.values()) for fn in fns)
misses = sum(sum(fn._cache_misses.values()) for fn in fns)
bits = b"".join(o.contiguous().view(torch.uint8).numpy().tobytes() for o in outs)
print(f"{seconds:.2f} s  hits {hits}  misses {misses}  bits {hashlib.sha256(bits).hexdigest()[:16]}")
