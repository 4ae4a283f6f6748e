"""The Triton source of all three ops: one source for CUDA, Ascend NPU (triton-ascend) and the interpreter.

The three ops are the same loop with a different scalar formula (``_value``, picked at compile time
by the OP constexpr), so the loops exist once. Grids are persistent: ``programs`` programs, each
owning one contiguous share of the elements (an AI core's blockDim share on NPU), walked BLOCK
elements per step in SUB-element pieces (SUB is the Unified-Buffer-sized piece on NPU; SUB == BLOCK
on CUDA). 16-bit operands are loaded as they are, computed in float32 and rounded once on store.

Imported only by the Triton backends; importing it imports triton.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernels.executor import Executor
from kernels.modes import Variant


@triton.jit
def _pow2(h):
    return ((h + 127) << 23).to(tl.float32, bitcast=True)  # a normal power of two: h in [-126, 127]


@triton.jit
def _kl_log(g, t, cof):
    # (-exp(t) * g) * cof to ~1.5 ulp of exp on every target: tl.exp is exp2(t * log2e) on GPUs
    # (error grows with |t|) and numpy's vectorised expf under the interpreter; SEMANTICS holds
    # float32 results to 4 ulp. The CPU formula's algorithm (kernels/ops/kl_div.py, _log_value):
    # Cody-Waite reduction t = k ln2 + r, degree-7 Taylor halved, the product's mantissa p/2 * g * m
    # (m: cof's mantissa in [0.5, 1)), and the scale by 2^(k + 1 + cof's exponent) last, in three
    # normal powers of two of that exponent's sign: exp(t) alone overflows float32 past t = 88.72,
    # where the float64 formula times a small g * cof is finite. t is clamped for k only, so t = +inf
    # gives p = inf and g = 0 gives NaN; a NaN t is restored at the end (GPU min/max drop NaN).
    tl_ = tl.maximum(t, -194.0)
    k = tl.floor(tl.minimum(tl_, 237.0) * 1.4426950408889634 + 0.5)
    r = tl_ - k * 0.693145751953125  # ln2's high part: k * it is exact
    r = r - k * 1.428606765330187e-06
    p = 0.5 + r * (
        0.5 + r * (0.25 + r * (0.5 / 6 + r * (0.5 / 24 + r * (0.5 / 120 + r * (0.5 / 720 + r * (0.5 / 5040))))))
    )
    p = tl.where(t <= -745.13324, 0.0, p)  # float64's exp is 0 there: 0 * g, NaN for g = +-inf
    bits = tl.cast(cof, tl.float32).to(tl.int32, bitcast=True)  # cof: a Python float under the interpreter
    m = ((bits & -0x7F800001) | 0x3F000000).to(tl.float32, bitcast=True)  # -0x7F800001: 0x807FFFFF in int32
    e = k.to(tl.int32) + ((bits >> 23) & 0xFF) - 125  # k + 1 + (cof's exponent - 126)
    h1 = tl.minimum(tl.maximum(e, -126), 127)
    h2 = tl.minimum(tl.maximum(e - h1, -126), 127)
    v = ((p * (g * -m)) * _pow2(h1)) * _pow2(h2) * _pow2(e - h1 - h2)
    return tl.where(t != t, t, v)


@triton.jit
def _kl_log_narrow(g, t, cof):
    # (-exp(t) * g) * cof for 16-bit outputs (SEMANTICS: 1 ulp of 16 bits, a half ulp at least 2^-12
    # of the value) on devices whose exp2 is the hardware's approximation (NVIDIA's ex2.approx, a
    # relative 2^-22): 11 operations where _kl_log takes ~37, which bound kl_div-log's 16-bit loops
    # on a GPU (results/performance.md, section 61). exp(t) * cof = q^3, q = 2^w, w = (t log2e +
    # log2 cof) / 3 clamped to [-126, 127]: q is normal, so a flush-to-zero exp2 and an exact one
    # agree, and ((-g * q) * q) * q rounds once per step in float32, subnormals kept, growing or
    # shrinking monotonically, so no step overflows or underflows where the result does not. Past
    # the clamp every product is 0 or inf in float32 (|g| <= 2^128, 2^-149 <= |g| * 2^-378... 2^381),
    # as the float64 formula's. w's rounding (half an ulp of 127 is 2^-18) and the constants' put
    # q^3 within ~2e-5 of exp(t) * cof: a tenth of float16's half ulp. The extremes are the float64
    # reference's: exp(t) = 0 from t = -745.13324 down (0 * inf = NaN), inf from 709.7827 up (an
    # exact 0 * inf = NaN for g = 0, where _kl_log gives -0). The clamp keeps NaN: a NaN t or g
    # gives NaN.
    lc3 = tl.log2(tl.cast(cof, tl.float32)) * 0.3333333432674408  # cof: a Python float under the interpreter
    w = t * 0.48089835 + lc3  # log2(e) / 3
    q = tl.exp2(tl.clamp(w, -126.0, 127.0, propagate_nan=tl.PropagateNan.ALL))
    q = tl.where(t <= -745.13324, 0.0, tl.where(t >= 709.7827, float("inf"), q))
    return ((g * (q * -1.0)) * q) * q  # not -q: Triton negates as 0 - q on a GPU, +0 for q = +0


@triton.jit
def _value(g, x, t, cof, OP: tl.constexpr, NARROW: tl.constexpr = False):
    if OP == 0:  # mse
        return ((x - t) * cof) * g
    elif OP == 1:  # l1; NaN compares false both ways, so sign(NaN) = 0
        d = x - t
        s = tl.where(d > 0, 1.0, tl.where(d < 0, -1.0, 0.0))
        return s * (g * cof)
    elif OP == 2:  # kl_div
        return (-t * g) * cof
    elif NARROW:  # kl_div, log_target, into a 16-bit out through the device's exp2
        return _kl_log_narrow(g, t, cof)
    else:  # kl_div, log_target
        return _kl_log(g, t, cof)


@triton.jit
def _store_rounded(ptr, offs, v, mask, RNE: tl.constexpr):
    # Round once to nearest-even into the output dtype. bfloat16 is rounded with integer ops unless
    # RNE says the device's cast does it (CUDA's cvt.rn.bf16.f32, one F2FP for two values on sm_80
    # and up, where the integer rounding is ~8 operations an element): the interpreter's float32 ->
    # bfloat16 cast truncates (and its "rtne" mode rounds half up without carrying into the
    # exponent), and integer rounding is exact on every target.
    if ptr.dtype.element_ty == tl.float32:
        tl.store(ptr + offs, v, mask=mask)
    elif ptr.dtype.element_ty == tl.bfloat16 and not RNE:
        u = v.to(tl.uint32, bitcast=True)
        rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        quiet_nan = (u >> 16) | 0x40
        bits = tl.where((u & 0x7FFFFFFF) > 0x7F800000, quiet_nan, rounded)
        tl.store(ptr + offs, bits.to(tl.uint16).to(tl.bfloat16, bitcast=True), mask=mask)
    else:
        tl.store(ptr + offs, v.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _loss_bwd_flat_kernel(
    g_ptr,  # [n] one run of memory (Layout.CONTIGUOUS), or [1] with SCALAR_GRAD
    x_ptr,  # [n] one run of memory, in the same element order as out's
    t_ptr,  # [n] the same
    out_ptr,  # [n] the same
    n,
    cof,
    programs,
    OP: tl.constexpr,
    NARROW: tl.constexpr,  # kl_div-log into a 16-bit out through the device's exp2 (_kl_log_narrow)
    RNE: tl.constexpr,  # the device's float32 -> bfloat16 cast rounds to nearest even (_store_rounded)
    SCALAR_GRAD: tl.constexpr,
    BLOCK: tl.constexpr,
    SUB: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    chunk = tl.cdiv(tl.cdiv(n, programs), BLOCK) * BLOCK
    start = pid * chunk
    end = tl.minimum(start + chunk, n)
    if SCALAR_GRAD:
        g0 = tl.load(g_ptr).to(tl.float32)  # read once, not n times
    for s in range(start, end, BLOCK):
        for j in range(0, BLOCK, SUB):
            offs = s + j + tl.arange(0, SUB)
            m = offs < end
            x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
            t = tl.load(t_ptr + offs, mask=m).to(tl.float32)
            if SCALAR_GRAD:
                g = g0
            else:
                g = tl.load(g_ptr + offs, mask=m).to(tl.float32)
            v = _value(g, x, t, cof, OP, NARROW)
            _store_rounded(out_ptr, offs, v, m, RNE)


@triton.jit
def _unravel(flat, meta_ptr, NDIM: tl.constexpr, SUB: tl.constexpr):
    """The element offsets of g, x, t and out at the row-major indices ``flat`` (SUB of them) of
    meta's shape: meta is int64 [5, NDIM], the shape, then each operand's element strides."""
    rem = flat
    og = tl.zeros([SUB], dtype=tl.int64)
    ox = tl.zeros([SUB], dtype=tl.int64)
    ot = tl.zeros([SUB], dtype=tl.int64)
    oo = tl.zeros([SUB], dtype=tl.int64)
    for k in tl.static_range(NDIM):
        d = NDIM - 1 - k
        size = tl.load(meta_ptr + d)
        q = rem % size
        rem = rem // size
        og += q * tl.load(meta_ptr + NDIM + d)
        ox += q * tl.load(meta_ptr + 2 * NDIM + d)
        ot += q * tl.load(meta_ptr + 3 * NDIM + d)
        oo += q * tl.load(meta_ptr + 4 * NDIM + d)
    return og, ox, ot, oo


@triton.jit
def _loss_bwd_strided_kernel(
    g_ptr,
    x_ptr,
    t_ptr,
    out_ptr,
    meta_ptr,  # int64 [5, NDIM]: shape, then element strides of g, x, t, out (0 where broadcast)
    n,
    cof,
    programs,
    OP: tl.constexpr,
    NARROW: tl.constexpr,  # kl_div-log into a 16-bit out through the device's exp2 (_kl_log_narrow)
    RNE: tl.constexpr,  # the device's float32 -> bfloat16 cast rounds to nearest even (_store_rounded)
    NDIM: tl.constexpr,
    BLOCK: tl.constexpr,
    SUB: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    chunk = tl.cdiv(tl.cdiv(n, programs), BLOCK) * BLOCK
    start = pid * chunk
    end = tl.minimum(start + chunk, n)
    for s in range(start, end, BLOCK):
        for j in range(0, BLOCK, SUB):
            offs = s + j + tl.arange(0, SUB)
            m = offs < end
            og, ox, ot, oo = _unravel(offs, meta_ptr, NDIM, SUB)
            g = tl.load(g_ptr + og, mask=m).to(tl.float32)
            x = tl.load(x_ptr + ox, mask=m).to(tl.float32)
            t = tl.load(t_ptr + ot, mask=m).to(tl.float32)
            v = _value(g, x, t, cof, OP, NARROW)
            _store_rounded(out_ptr, oo, v, m, RNE)


@triton.jit
def _loss_bwd_strided2d_kernel(
    g_ptr,
    x_ptr,
    t_ptr,
    out_ptr,
    rows,  # the coalesced, reordered walk's outer dim
    cols,  # its inner dim: the inputs' unit stride where reorder found one
    sg0,  # element strides of g, x, t, out over (rows, cols); 0 where broadcast. Passed as
    sg1,  # integers, not a meta tensor, so Triton specializes a stride of 1 and can prove a
    sx0,  # run contiguous: each operand is then loaded (and out stored) in 16-byte vectors along
    sx1,  # its own unit-stride dim, and where those dims differ (transposed inputs, contiguous
    st0,  # out) Triton exchanges the tile through shared memory instead of letting a warp touch
    st1,  # 32 cache lines per access. That needs BM > 1: tile_2d keeps the inner dim whole up
    so0,  # to the tile, so an inner dim of a tile or more (a square transpose) gets one-row
    so1,  # tiles, and out's stores go one element per line (not measured; the report's are 64).
    cof,
    programs,
    OP: tl.constexpr,
    NARROW: tl.constexpr,  # kl_div-log into a 16-bit out through the device's exp2 (_kl_log_narrow)
    RNE: tl.constexpr,  # the device's float32 -> bfloat16 cast rounds to nearest even (_store_rounded)
    BM: tl.constexpr,
    BN: tl.constexpr,
):
    # 2-d tiles of BM x BN walk elements, a persistent grid striding over the tiles: no division
    # per element (the N-d walk's unravel is an int64 div and mod per dim and element).
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(cols, BN)
    tiles = tl.cdiv(rows, BM) * tiles_n
    for tile in range(pid, tiles, programs):
        i = (tile // tiles_n).to(tl.int64) * BM + tl.arange(0, BM)[:, None]
        j = (tile % tiles_n).to(tl.int64) * BN + tl.arange(0, BN)[None, :]
        m = (i < rows) & (j < cols)
        g = tl.load(g_ptr + (i * sg0 + j * sg1), mask=m).to(tl.float32)
        x = tl.load(x_ptr + (i * sx0 + j * sx1), mask=m).to(tl.float32)
        t = tl.load(t_ptr + (i * st0 + j * st1), mask=m).to(tl.float32)
        v = _value(g, x, t, cof, OP, NARROW)
        _store_rounded(out_ptr, i * so0 + j * so1, v, m, RNE)


@triton.jit
def _term(g_ptr, x_ptr, t_ptr, bg, bx, bt, r, rmeta_ptr, m, cof, OP: tl.constexpr, NR: tl.constexpr):
    """Terms ``r`` (RB flat indices of the summed dims, one per lane row) of BO outputs' sums, whose
    kept-dim offsets are bg, bx, bt: an [RB, BO] tile. rmeta: int64 [4, NR], the summed dims' shape,
    then the strides of g, x, t."""
    rrem = r
    rg = tl.zeros_like(r).to(tl.int64)
    rx = rg
    rt = rg
    for k in tl.static_range(NR):
        d = NR - 1 - k
        if k == NR - 1:
            q = rrem  # r < n_red (dead lanes' r clamped): the outermost index needs no modulo
        else:
            size = tl.load(rmeta_ptr + d)
            q = rrem % size
            rrem = rrem // size
        rg += q * tl.load(rmeta_ptr + NR + d)
        rx += q * tl.load(rmeta_ptr + 2 * NR + d)
        rt += q * tl.load(rmeta_ptr + 3 * NR + d)
    g = tl.load(g_ptr + (bg[None, :] + rg[:, None]), mask=m).to(tl.float32)
    x = tl.load(x_ptr + (bx[None, :] + rx[:, None]), mask=m).to(tl.float32)
    t = tl.load(t_ptr + (bt[None, :] + rt[:, None]), mask=m).to(tl.float32)
    return _value(g, x, t, cof, OP)


@triton.jit
def _live_term(g_ptr, x_ptr, t_ptr, bg, bx, bt, r, n_red, rmeta_ptr, m, cof, OP: tl.constexpr, NR: tl.constexpr):
    """_term for lanes' indices r, and which lanes are live (r < n_red, as [RB, 1]). Dead lanes'
    terms are masked and their indices clamped to the last term: no address past the operands'
    ends is formed, whatever a backend does with masked lanes."""
    live = (r < n_red)[:, None]
    v = _term(g_ptr, x_ptr, t_ptr, bg, bx, bt, tl.minimum(r, n_red - 1), rmeta_ptr, live & m[None, :], cof, OP, NR)
    return v, live


@triton.jit
def _kahan(acc, comp, v):
    # Once the sum is infinite (or NaN) its compensation is 0, not inf - inf = NaN: an infinite
    # term followed by finite ones stays infinite, as the formula's sum is (the NaN turned it NaN).
    y = v - comp
    tot = acc + y
    return tot, tl.where(tl.abs(tot) < float("inf"), (tot - acc) - y, 0.0)


@triton.jit
def _kahan_where(acc, comp, v, live):
    # A lane whose term is past the sum's end keeps its state: adding a 0 applies its compensation,
    # which changes the sum at a rounding tie.
    tot, c = _kahan(acc, comp, v)
    return tl.where(live, tot, acc), tl.where(live, c, comp)


@triton.jit
def _loss_bwd_reduce_kernel(
    g_ptr,
    x_ptr,
    t_ptr,
    out_ptr,
    kmeta_ptr,  # int64 [5, NK]: kept (output) dims: shape, strides of g, x, t, out
    rmeta_ptr,  # int64 [4, NR]: summed dims: shape, strides of g, x, t
    n_out,
    n_red,
    cof,
    programs,
    OP: tl.constexpr,
    RNE: tl.constexpr,  # the device's float32 -> bfloat16 cast rounds to nearest even (_store_rounded)
    NK: tl.constexpr,
    NR: tl.constexpr,
    RB: tl.constexpr,  # lanes each sum is split over: reduce_lanes(n_red), from the geometry alone
    BLOCK: tl.constexpr,
    SUB: tl.constexpr,
):
    # Each output's sum is split over RB lanes (rows of an [RB, SUB // RB] tile): lane k sums terms
    # k, k + RB, k + 2 RB, ... in ascending order with Kahan compensation, and the lanes' sums are
    # then added in lane order, one Kahan step each. RB comes from the geometry alone, so every
    # config gives bitwise the same result, and RB = 1 is the plain ascending Kahan sum. One lane
    # per output gave KL's summed case on the H200 (65536 outputs of 64 terms at 2^22, the default
    # config) 64 programs, one 4-warp block on each of 64 of its 132 SMs, and 16 memory latencies
    # in a row (results/performance.md, section 67).
    # Terms are loaded four at a time before any is added (same order, same bits): a lane's loads
    # do not wait on its sum.
    BO: tl.constexpr = SUB // RB
    pid = tl.program_id(0).to(tl.int64)
    chunk = tl.cdiv(tl.cdiv(n_out, programs), BLOCK // RB) * (BLOCK // RB)
    start = pid * chunk
    end = tl.minimum(start + chunk, n_out)
    lanes = tl.arange(0, RB)
    per_lane = (n_red - 1) // RB + 1  # tl.cdiv's n_red + RB - 1 would wrap an int32 n_red near 2^31
    for s in range(start, end, BLOCK // RB):
        for j in range(0, BLOCK // RB, BO):
            offs = s + j + tl.arange(0, BO)
            m = offs < end
            bg, bx, bt, bo = _unravel(offs, kmeta_ptr, NK, BO)
            acc = tl.zeros([RB, BO], dtype=tl.float32)
            comp = tl.zeros([RB, BO], dtype=tl.float32)
            for i in range(0, per_lane, 4):
                r0 = i * RB + lanes
                v0, live0 = _live_term(g_ptr, x_ptr, t_ptr, bg, bx, bt, r0, n_red, rmeta_ptr, m, cof, OP, NR)
                v1, live1 = _live_term(g_ptr, x_ptr, t_ptr, bg, bx, bt, r0 + RB, n_red, rmeta_ptr, m, cof, OP, NR)
                v2, live2 = _live_term(g_ptr, x_ptr, t_ptr, bg, bx, bt, r0 + 2 * RB, n_red, rmeta_ptr, m, cof, OP, NR)
                v3, live3 = _live_term(g_ptr, x_ptr, t_ptr, bg, bx, bt, r0 + 3 * RB, n_red, rmeta_ptr, m, cof, OP, NR)
                acc, comp = _kahan_where(acc, comp, v0, live0)
                acc, comp = _kahan_where(acc, comp, v1, live1)
                acc, comp = _kahan_where(acc, comp, v2, live2)
                acc, comp = _kahan_where(acc, comp, v3, live3)
            # The lanes' sums in lane order, from lane 0's state: lane k's row picked out exactly
            # (x + -0.0 is x for every x, whatever order tl.sum adds in), its compensation folded
            # in before its sum is added. As the walks end, the last compensation is not applied.
            tot = tl.sum(tl.where(lanes[:, None] == 0, acc, -0.0), axis=0)
            tcomp = tl.sum(tl.where(lanes[:, None] == 0, comp, -0.0), axis=0)
            for k in tl.static_range(1, RB):
                row = lanes[:, None] == k
                tcomp += tl.sum(tl.where(row, comp, -0.0), axis=0)
                tot, tcomp = _kahan(tot, tcomp, tl.sum(tl.where(row, acc, -0.0), axis=0))
            _store_rounded(out_ptr, bo, tot, m, RNE)


# The most lanes a sum is split over (it divides every space's SUB: 8 at least), and the fewest
# terms a lane sums where the sum is split. On the H200, KL's sums of 64 terms over 4 lanes took
# 0.25-0.71x the time of the walk before the split; 2 lanes and 8 took 1.3-1.6x 4 lanes' time, 16
# lanes 2.6-3.5x (a guess, not measured: the lanes' sums are picked out one row at a time, RB^2
# operations an output). Other lengths were not timed (results/performance.md, section 67).
REDUCE_LANES = 4
REDUCE_LANE_TERMS = 16


def reduce_lanes(n_red: int) -> int:
    """Lanes each output's sum of ``n_red`` terms is split over in the reduce walk: the largest power
    of two up to REDUCE_LANES leaving each lane REDUCE_LANE_TERMS terms or more (1 below 32 terms).
    From the geometry alone, never the config: the split decides the order of the additions."""
    lanes = 1
    while lanes * 2 <= REDUCE_LANES and lanes * 2 * REDUCE_LANE_TERMS <= n_red:
        lanes *= 2
    return lanes


def tile_2d(tile: int, cols: int) -> tuple[int, int]:
    """(BM, BN) of the 2-d strided walk for a config's ``tile`` elements: the inner dim whole where
    it fits (a power of two at or above it), the rest as rows. Both powers of two, as tl.arange
    needs: tile is one (kernels.tiling.CUDA_TILES)."""
    bn = min(tile, triton.next_power_of_2(max(1, cols)))
    return tile // bn, bn


@functools.lru_cache(maxsize=256)
def _meta(rows: tuple[tuple[int, ...], ...], device: torch.device) -> torch.Tensor:
    """A geometry's int64 shape-and-strides rows on the device, built once per geometry: a
    host-to-device copy per launch would cost more than a 2^20-element kernel on a GPU."""
    return torch.tensor(rows, dtype=torch.int64).to(device)


def launch(
    ex: Executor,
    *,
    extra: dict[str, object],
    tiles_2d: bool = True,
    approx_exp2: bool = False,
    rne_cast: bool = False,
    split_sums: bool = True,
) -> None:
    """Launch the executor's variant. ``extra`` carries backend launch options (num_warps, multibuffer).

    ``tiles_2d``: a strided walk of one or two coalesced dims takes the 2-d tile kernel (CUDA and
    the interpreter); False keeps the N-d walk's SUB-element pieces (the NPU's Unified Buffer).
    ``approx_exp2``: the device's tl.exp2 is good to a relative 2^-22 (NVIDIA's ex2.approx; the
    interpreter's numpy is exact), so KL log_target's elementwise walks into a 16-bit out take
    _kl_log_narrow. Sums keep _kl_log: a term of one is held to 1e-6, not to 16 bits.
    ``rne_cast``: the device's float32 -> bfloat16 cast rounds to nearest even (CUDA's does; the
    interpreter's truncates), so bfloat16 outs are stored through it.
    ``split_sums``: the reduce walk splits each sum over reduce_lanes(n) lanes; False keeps one
    lane, the ascending order (the NPU's: the split's [RB, SUB / RB] tiles and their combine have
    not run on triton-ascend, nor been fitted to its Unified Buffer)."""
    cfg, geo = ex.config, ex.geometry
    sub = cfg.sub_tile or cfg.tile
    x = ex.inp if ex.formula.reads_input else ex.target  # KL never reads input's values
    op = ex.formula.triton_op
    narrow = approx_exp2 and op == 3 and ex.out.dtype != torch.float32
    rne = rne_cast and ex.out.dtype == torch.bfloat16
    grid = (cfg.cores,)
    if cfg.variant in (Variant.FLAT, Variant.SCALAR_GRAD):
        _loss_bwd_flat_kernel[grid](
            ex.grad,
            x,
            ex.target,
            ex.out,
            geo.numel,
            ex.cof,
            cfg.cores,
            OP=op,
            NARROW=narrow,
            RNE=rne,
            SCALAR_GRAD=cfg.variant is Variant.SCALAR_GRAD,
            BLOCK=cfg.tile,
            SUB=sub,
            **extra,
        )
        return
    x_row = 1 if ex.formula.reads_input else 2
    device = ex.out.device
    if cfg.variant is Variant.STRIDED and tiles_2d and len(geo.shape) <= 2:
        shape = (1, *geo.shape) if len(geo.shape) == 1 else geo.shape
        operands = [geo.strides[0], geo.strides[x_row], geo.strides[2], geo.strides[3]]
        strides = [s for st in operands for s in ((0, *st) if len(st) == 1 else st)]
        bm, bn = tile_2d(cfg.tile, shape[1])
        _loss_bwd_strided2d_kernel[grid](
            ex.grad,
            x,
            ex.target,
            ex.out,
            shape[0],
            shape[1],
            *strides,
            ex.cof,
            cfg.cores,
            OP=op,
            NARROW=narrow,
            RNE=rne,
            BM=bm,
            BN=bn,
            **extra,
        )
        return
    if cfg.variant is Variant.STRIDED:
        rows = (geo.shape, geo.strides[0], geo.strides[x_row], geo.strides[2], geo.strides[3])
        _loss_bwd_strided_kernel[grid](
            ex.grad,
            x,
            ex.target,
            ex.out,
            _meta(rows, device),
            geo.numel,
            ex.cof,
            cfg.cores,
            OP=op,
            NARROW=narrow,
            RNE=rne,
            NDIM=len(geo.shape),
            BLOCK=cfg.tile,
            SUB=sub,
            **extra,
        )
        return
    kmeta = _meta((geo.shape, geo.strides[0], geo.strides[x_row], geo.strides[2], geo.strides[3]), device)
    rmeta = _meta((geo.rshape, geo.rstrides[0], geo.rstrides[x_row], geo.rstrides[2]), device)
    n_red = geo.numel // max(1, geo.n_out)
    _loss_bwd_reduce_kernel[grid](
        ex.grad,
        x,
        ex.target,
        ex.out,
        kmeta,
        rmeta,
        geo.n_out,
        n_red,
        ex.cof,
        cfg.cores,
        OP=op,
        RNE=rne,
        NK=len(geo.shape),
        NR=len(geo.rshape),
        RB=reduce_lanes(n_red) if split_sums else 1,
        BLOCK=cfg.tile,
        SUB=sub,
        **extra,
    )
