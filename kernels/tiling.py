"""Tiling configs and spaces as data: knobs with their values, named constraints, a default, a hash.

A space is built from device facts passed in as arguments (never read from a device here), so
every space of every backend can be built and tested on a machine without that device.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kernels.modes import Variant

UB_BLOCK_BYTES = 32  # the Unified Buffer is addressed in 32-byte blocks
NPU_MAX_GRID = 65535


# Tiling's field annotations (strings, under ``from __future__ import annotations``) as the types
# Tiling.check_types holds each knob to.
_KNOB_TYPES: dict[str, type] = {"int": int, "bool": bool, "Variant": Variant}


@dataclass(frozen=True)
class Tiling:
    """One kernel configuration. Knobs a backend does not have keep their neutral value."""

    tile: int  # elements per step of a block (BLOCK in Triton)
    cores: int  # worker threads (cpu), persistent programs (cuda), vector cores (npu)
    variant: Variant = Variant.FLAT
    num_warps: int = 0  # cuda only
    sub_tile: int = 0  # npu only: the per-step piece that lives in the Unified Buffer
    multibuffer: bool = False  # npu only: double-buffer the UB so copy-in overlaps compute
    prefetch: int = 0  # cpu only: a block prefetches the input lines this many tiles ahead (0: none)
    stream: bool = False  # cpu only: out is stored through an L1 buffer as whole non-temporal lines
    # cpu only, the transposed walk: bytes per row of its register transposes (0: the host's vector)
    transpose_row: int = 0
    # cpu only, the transposed walk: the target through the transposes first, then the formula
    # along out's rows (cpu_loops.transposed_in; offered where the formula reads the target alone)
    transpose_in: bool = False
    # cpu only, the transposed walk: out's lines of one tile stored during the next tile's formula
    # pass (cpu_loops.transposed_deferred; offered for 16-bit outs where cpu_loops.DEFERRED)
    defer_out: bool = False
    # cpu only, the transposed walk: the formula's form (Formula.fused_form: KL's negated scale,
    # mse's scaled difference) applied inside the register transposes, straight from the inputs
    # into out (cpu_loops.FUSED_WALKS; offered for formulas with a form where cpu_loops.FUSED)
    fused: bool = False
    # cpu only, the fused walk with half-line rows: both stacked blocks' rows side by side in one
    # whole-line register, each column a whole line of out (offered where cpu_loops.PAIRED, for
    # 16-bit outs of the fused walks that convert rows: cpu.CpuBackend.space)
    paired: bool = False

    def to_dict(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "variant": self.variant.value}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Tiling:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"config: unknown knobs {sorted(unknown)}, expected some of {sorted(fields)}")
        values = dict(data)
        values["variant"] = Variant(values.get("variant", Variant.FLAT.value))
        config = cls(**values)  # type: ignore[arg-type]
        config.check_types()
        return config

    def check_types(self) -> None:
        """Each knob of its field's type: a whole number (not a bool) for the counts and sizes, a
        bool for the switches, a Variant. A space's membership test compares by value, where
        4096.0 == 4096 and True == 1, so a float tile passed phase one and stopped numba's compile
        in phase two, and ``cores=True`` ran as one core. Raises TypeError naming the knob."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            want = _KNOB_TYPES[str(field.type)]
            if not isinstance(value, want) or (want is int and isinstance(value, bool)):
                raise TypeError(f"knob {field.name!r}: expected {want.__name__}, got {value!r}")

    def short(self) -> str:
        parts = [f"{self.variant.value}", f"tile={self.tile}", f"cores={self.cores}"]
        if self.num_warps:
            parts.append(f"warps={self.num_warps}")
        if self.sub_tile:
            parts.append(f"sub={self.sub_tile}")
        if self.multibuffer:
            parts.append("multibuffer")
        if self.prefetch:
            parts.append(f"prefetch={self.prefetch}")
        if self.stream:
            parts.append("stream")
        if self.transpose_row:
            parts.append(f"row={self.transpose_row}B")
        if self.transpose_in:
            parts.append("inputs-first")
        if self.defer_out:
            parts.append("deferred")
        if self.fused:
            parts.append("fused")
        if self.paired:
            parts.append("paired")
        return " ".join(parts)


@dataclass(frozen=True)
class DeviceFacts:
    """What a space needs to know about a device; read by the backend, passed in here."""

    backend: str
    name: str  # slug naming the device class; the frozen-config file is <backend>/<name>.json
    cores: int  # worker threads / SMs / vector cores
    ub_bytes: int = 0  # NPU Unified Buffer per vector core
    # The frozen tables a lookup reads, most specific first (frozen.lookup); empty: (name,) alone.
    # The CPU reads its microarchitecture's table before its vector tier's (backends/cpu.py).
    tables: tuple[str, ...] = ()

    @property
    def lookup_names(self) -> tuple[str, ...]:
        return self.tables or (self.name,)


@dataclass(frozen=True)
class Constraint:
    name: str
    rule: str  # human-readable, part of the space hash
    check: Callable[[Tiling], bool]


@dataclass(frozen=True)
class Carry:
    """What a config tuned on another problem keeps when the lookup carries it to this space's
    problem (kernels.frozen._carried), beyond the rules every space shares there: on a smaller
    problem the default's core count as a cap, and stores as the default's unless carried up. The
    space names these because they are its loop's: which knobs follow the problem's size, and which
    were chosen together with the stores."""

    # Knobs a config carried to a smaller problem takes from the default. The transposed walk's tile
    # is the width of its column blocks: at a tall tile a smaller problem has fewer blocks for the
    # cores to share (1.05-1.51x the default's time at 2^16 on the Zen 3, performance.md section 78).
    sized: tuple[str, ...] = ()
    # Whether a streamed config that a carry would store ordinarily is not carried at all (the
    # default runs): the contiguous loop's tile and prefetch were chosen with streamed stores, and
    # without them are a point no study measured (1.10-1.36x the default's time, section 77).
    streamed_whole: bool = False

    def __post_init__(self) -> None:
        knobs = {f.name for f in dataclasses.fields(Tiling)}
        bad = [name for name in self.sized if name not in knobs]
        if bad:
            raise ValueError(f"Carry.sized: expected knobs of Tiling ({sorted(knobs)}), got {bad}")


@dataclass(frozen=True)
class Space:
    """The tiling space of one (op, backend, device, dtype, legal variants)."""

    backend: str
    knobs: tuple[tuple[str, tuple[object, ...]], ...]
    constraints: tuple[Constraint, ...]
    default: Tiling
    # Points a study measures right after the default, before its sampler draws: where a backend
    # knows which corner of a large space a memory-bound loop wants (cuda_space), a short study
    # starts there instead of at random. Starting points, not members of another kind: not hashed.
    seeds: tuple[Tiling, ...] = ()
    # How a config tuned on another problem is carried here: the lookup's policy, not points of the
    # space, so not hashed either (an entry's space hash is unchanged by it).
    carry: Carry = Carry()

    def violations(self, config: Tiling) -> list[str]:
        """Names of the constraints (and knob ranges) a config breaks; empty when it is a member."""
        broken = [
            f"{name}={getattr(config, name)!r} not in {list(values)}"
            for name, values in self.knobs
            if getattr(config, name) not in values
        ]
        fixed = {f.name for f in dataclasses.fields(Tiling)} - {name for name, _ in self.knobs}
        broken += [
            f"{name} is not a knob of {self.backend}"
            for name in sorted(fixed)
            if getattr(config, name) != getattr(self.default, name)
        ]
        broken += [f"{c.name}: {c.rule}" for c in self.constraints if not c.check(config)]
        return broken

    def __contains__(self, config: object) -> bool:
        return isinstance(config, Tiling) and not self.violations(config)

    def __iter__(self) -> Iterator[Tiling]:
        names = [name for name, _ in self.knobs]
        for values in itertools.product(*(v for _, v in self.knobs)):
            config = dataclasses.replace(self.default, **dict(zip(names, values, strict=True)))
            if all(c.check(config) for c in self.constraints):
                yield config

    @property
    def size(self) -> int:
        return sum(1 for _ in self)

    def sample(self, k: int, seed: int = 0) -> list[Tiling]:
        configs = list(self)
        return random.Random(seed).sample(configs, min(k, len(configs)))

    @property
    def hash(self) -> str:
        """Stable over processes and machines of the same facts: knobs, values and constraint rules."""
        payload = {
            "backend": self.backend,
            "knobs": [
                [name, [v.value if isinstance(v, Variant) else v for v in values]] for name, values in self.knobs
            ],
            "constraints": [[c.name, c.rule] for c in self.constraints],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def _pow2(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(1 << k for k in range(lo.bit_length() - 1, hi.bit_length()))


# ---- cpu: numba threads, each owning a contiguous block -------------------------------------------

CPU_TILES = (256, 1024, 4096, 16384, 65536)
CPU_GRAIN = 32768  # PyTorch's at::internal::GRAIN_SIZE: below it, one thread
# Tiles ahead a block prefetches its inputs: the hardware prefetcher alone left an exp-bound loop's
# loads and arithmetic unoverlapped at 2^24 (results/performance.md, section 14).
CPU_PREFETCH = (0, 1, 2)
_CPU_PREFETCHING = Constraint(  # one object, so that spaces built twice compare equal
    "prefetch_contiguous",
    "prefetch == 0 or variant in (flat, scalar_grad)",  # the loops that prefetch (cpu_loops)
    lambda c: c.prefetch == 0 or c.variant in (Variant.FLAT, Variant.SCALAR_GRAD),
)


# Streamed stores (cpu_loops._stream_out) go through a buffer of one tile, which must stay in L1
# beside the inputs' lines: 4096 float32 are 16 KiB. Whether streaming pays depends on whether out
# still fits the last-level cache and on how many inputs the loop reads (results/performance.md,
# section 20), so it is a knob, not a size rule.
CPU_STREAM_TILE_MAX = 4096
_CPU_STREAMED = (Variant.FLAT, Variant.SCALAR_GRAD, Variant.TABLE)  # the loops that stream
_CPU_STREAMING = Constraint(
    "stream_buffered",
    f"not stream or (variant in (flat, scalar_grad, table) and tile <= {CPU_STREAM_TILE_MAX})",
    lambda c: not c.stream or (c.variant in _CPU_STREAMED and c.tile <= CPU_STREAM_TILE_MAX),
)


_CPU_LOOP_CARRY = Carry(streamed_whole=True)
# The walk's stores carry as the default's whatever the tile: its tile is a column block's width,
# not a buffer sized for streamed stores.
_CPU_WALK_CARRY = Carry(sized=("tile",))


def _cpu_default_cores(facts: DeviceFacts, numel: int) -> int:
    """PyTorch's untuned parallelism: one thread per GRAIN_SIZE elements, up to all threads."""
    return max(1, min(facts.cores, math.ceil(numel / CPU_GRAIN)))


def cpu_space(facts: DeviceFacts, variants: tuple[Variant, ...], numel: int) -> Space:
    """Default: what PyTorch ships untuned, one thread per GRAIN_SIZE elements up to all threads,
    no software prefetch, ordinary stores."""
    cores = tuple(range(1, facts.cores + 1))
    default = Tiling(tile=4096, cores=_cpu_default_cores(facts, numel), variant=variants[0])
    knobs = (
        ("variant", variants),
        ("tile", CPU_TILES),
        ("cores", cores),
        ("prefetch", CPU_PREFETCH),
        ("stream", (False, True)),
    )
    # streamed_whole: a strided or reduce walk (variants without a streaming loop) has no streamed
    # member, so only the contiguous loop's configs meet the rule.
    return Space("cpu", knobs, (_CPU_PREFETCHING, _CPU_STREAMING), default, carry=_CPU_LOOP_CARRY)


# The transposed walk (cpu_loops.transposed) goes in tiles of 16 KiB of out through an L1 buffer by
# default, 64 columns by 64 rows of float32 or 128 of a 16-bit type; on the AVX-512 Xeon 16 to 256
# rows or columns measured no better (results/performance.md, sections 13, 17 and 23), so there
# CPU_TRANSPOSED_TILE (in 4-byte words of the buffer) is the one tile. Where the backend offers more
# (cpu_loops.TRANSPOSED_TILES: 64 and 128 KiB without AVX-512, section 31) the tuner picks.
# Its stores of out's columns are non-temporal where the config says stream: from 16 MiB of out on
# that was 1.3-1.9x faster, while at 8 MiB the sign depends on whether out is still cached from the
# last call and on how many inputs compete (sections 17, 19). So the default keeps that size rule
# and the tuner decides per bucket.
CPU_TRANSPOSED_TILE = 64 * 64
CPU_STREAM_OUT_BYTES = 1 << 24


_CPU_ONE_ORDER = Constraint(  # one object, as _CPU_PREFETCHING
    "one_walk_order", "not (transpose_in and defer_out)", lambda c: not (c.transpose_in and c.defer_out)
)
_CPU_FUSED_ALONE = Constraint(
    "fused_alone",
    "not (fused and (transpose_in or defer_out))",
    lambda c: not (c.fused and (c.transpose_in or c.defer_out)),
)


def _paired_fused(row: int) -> Constraint:
    """Tiling.paired is a form of the fused walk with rows of ``row`` bytes (the half row)."""
    return Constraint(
        "paired_fused",
        f"not paired or (fused and transpose_row == {row})",
        lambda c: not c.paired or (c.fused and c.transpose_row == row),
    )


def cpu_transposed_space(
    facts: DeviceFacts,
    numel: int,
    out_bytes: int,
    tiles: tuple[int, ...] = (CPU_TRANSPOSED_TILE,),
    rows: tuple[int, ...] = (0,),
    inputs_first: bool = False,
    deferred: bool = False,
    fused: bool = False,
    paired_row: int = 0,
) -> Space:
    """The space of a transposed walk: ``tiles`` (the walk's buffer in 4-byte words, the backend's
    list), cores, stream and, where the backend offers more than its own, ``rows`` (the register
    transposes' row in bytes, cpu_loops.TRANSPOSE_ROWS; a single row is no knob, so a host without
    the choice keeps the space, and the hash, it had before there was one). Default:
    CPU_TRANSPOSED_TILE, the cores of cpu_space's default, streamed stores from an out of
    CPU_STREAM_OUT_BYTES on, the host's own rows. The launch stores ordinarily, whatever the config,
    where out's lines are not aligned for non-temporal stores. ``inputs_first`` adds the walk's
    order as a knob (transpose_in: cpu_loops.INPUTS_FIRST, for a formula that reads the target
    alone with a 0-d gradient); without it the space and its hash are as before the knob.
    ``deferred`` adds defer_out (cpu_loops.DEFERRED, for a 16-bit out), a walk of the shipped
    order only: with inputs_first too, a constraint keeps the two apart. Without it, the same: the
    space and its hash are as before. ``fused`` adds the fused walk (Tiling.fused:
    cpu_loops.FUSED, for a formula with a form, Formula.fused_form), a walk of its own: a
    constraint keeps it from the other two. Without it, the same. ``paired_row`` (the half row,
    where cpu_loops.PAIRED; with ``fused``) adds Tiling.paired, a form of the fused walk with that
    row alone: a constraint says so. Without it, the same."""
    cores = tuple(range(1, facts.cores + 1))
    default = Tiling(
        tile=CPU_TRANSPOSED_TILE,
        cores=_cpu_default_cores(facts, numel),
        variant=Variant.STRIDED,
        stream=out_bytes >= CPU_STREAM_OUT_BYTES,
    )
    knobs = (
        ("variant", (Variant.STRIDED,)),
        ("tile", tiles),
        ("cores", cores),
        ("stream", (False, True)),
    ) + ((("transpose_row", rows),) if len(rows) > 1 else ())
    knobs += (("transpose_in", (False, True)),) if inputs_first else ()
    knobs += (("defer_out", (False, True)),) if deferred else ()
    knobs += (("fused", (False, True)),) if fused else ()
    constraints = (_CPU_ONE_ORDER,) if inputs_first and deferred else ()
    constraints += (_CPU_FUSED_ALONE,) if fused and (inputs_first or deferred) else ()
    if fused and paired_row:
        knobs += (("paired", (False, True)),)
        constraints += (_paired_fused(paired_row),)
    return Space("cpu", knobs, constraints, default, carry=_CPU_WALK_CARRY)


# ---- cuda: persistent Triton programs ---------------------------------------------------------------

CUDA_TILES = _pow2(256, 8192)
CUDA_WARPS = (1, 2, 4, 8, 16)
CUDA_WAVES = 8  # at most 8 programs per SM; beyond that a persistent grid buys nothing


# Seeds of a CUDA study: (tile, num_warps), each at CUDA_WAVES programs per SM. The default's
# 4 programs of 1024 elements per SM kept 16 KiB of loads in flight per SM for a 16-bit KL (two
# 2-byte inputs) and reached 42-72% of the copy on an H200 at 2^26, against 88-95% for float32
# MSE's 48 KiB (results/bench/*-nvidia-h200/report.txt); Little's law on HBM3e (about 4 TB/s, a
# microsecond of latency under load) wants 30 KiB or more per SM. Larger steps and more programs
# put more bytes in flight; four random draws of a 1056 x 6 x 5 x 2 space rarely land there.
CUDA_SEEDS = ((4096, 8), (8192, 8), (2048, 4))


def cuda_space(facts: DeviceFacts, variants: tuple[Variant, ...], numel: int) -> Space:
    """Default: Triton tutorial practice, BLOCK 1024, 4 warps, up to 4 programs per SM."""
    programs = tuple(range(1, CUDA_WAVES * facts.cores + 1))
    default = Tiling(
        tile=1024, cores=max(1, min(4 * facts.cores, math.ceil(numel / 1024))), variant=variants[0], num_warps=4
    )
    threads = Constraint("warps_fit_block", "tile >= 32 * num_warps", lambda c: c.tile >= 32 * c.num_warps)
    knobs = (("variant", variants), ("tile", CUDA_TILES), ("cores", programs), ("num_warps", CUDA_WARPS))
    seeds = tuple(
        dict.fromkeys(
            Tiling(
                tile=tile,
                cores=max(1, min(CUDA_WAVES * facts.cores, math.ceil(numel / tile))),
                variant=variants[0],
                num_warps=warps,
            )
            for tile, warps in CUDA_SEEDS
        )
    )
    return Space("cuda", knobs, (threads,), default, tuple(s for s in seeds if s != default))


# ---- npu: Ascend vector cores, the Unified Buffer budget ---------------------------------------------

NPU_TILES = (1024, 2048, 4096, 6144, 8192, 12288, 16384, 24576, 32768)
NPU_SUB_TILES = (512, 1024, 2048, 4096, 6144, 8192, 12288)
NPU_MULTIBUFFER_ABOVE = 65536  # CANN double-buffers above this many elements


def npu_bytes_per_element(dtype_bytes: int) -> int:
    """UB bytes one element of one live buffer costs: the I/O copy, plus a float32 copy for 16-bit I/O."""
    return dtype_bytes if dtype_bytes == 4 else dtype_bytes + 4


def npu_space(
    facts: DeviceFacts, variants: tuple[Variant, ...], numel: int, dtype_bytes: int, live_buffers: int
) -> Space:
    """Default: CANN MseLossGradV2's own tiling.

    max_tile = UB / (bytes_per_element * live_buffers): 12288 for float32 and 8192 for float16/bfloat16
    on a 192 KB UB; double buffering (halving the tile) above 65536 elements; cores = min(AIV, ceil(N / tile)).
    """
    per_element = npu_bytes_per_element(dtype_bytes) * live_buffers
    max_tile = facts.ub_bytes // per_element
    align = UB_BLOCK_BYTES // dtype_bytes
    multibuffer = numel > NPU_MULTIBUFFER_ABOVE
    tile = (max_tile // (2 if multibuffer else 1)) // align * align
    cores = max(1, min(facts.cores, math.ceil(numel / tile)))
    default = Tiling(tile=tile, cores=cores, variant=variants[0], sub_tile=tile, multibuffer=multibuffer)
    # Both CANN tiles (single and double buffered) are always members, so the default is too.
    cann_tiles = {max_tile // align * align, max_tile // 2 // align * align}
    tiles = tuple(sorted(set(NPU_TILES) | cann_tiles))
    subs = tuple(sorted(set(NPU_SUB_TILES) | cann_tiles))
    constraints = (
        Constraint("sub_tile_divides_tile", "tile % sub_tile == 0", lambda c: c.tile % c.sub_tile == 0),
        Constraint(
            "ub_budget",
            f"sub_tile * {per_element} B * (2 if multibuffer else 1) <= {facts.ub_bytes} B",
            lambda c: c.sub_tile * per_element * (2 if c.multibuffer else 1) <= facts.ub_bytes,
        ),
        Constraint(
            "ub_block_aligned",
            f"sub_tile * {dtype_bytes} % {UB_BLOCK_BYTES} == 0",
            lambda c: c.sub_tile * dtype_bytes % UB_BLOCK_BYTES == 0,
        ),
        Constraint(
            "grid_limit",
            f"cores <= min({facts.cores}, {NPU_MAX_GRID})",
            lambda c: c.cores <= min(facts.cores, NPU_MAX_GRID),
        ),
    )
    knobs = (
        ("variant", variants),
        ("tile", tiles),
        ("sub_tile", subs),
        ("cores", tuple(range(1, facts.cores + 1))),
        ("multibuffer", (False, True)),
    )
    return Space("npu", knobs, constraints, default)
