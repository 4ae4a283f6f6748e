"""The CPU backend: numba-compiled parallel loops (kernels/backends/cpu_loops.py)."""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import platform
from collections.abc import Callable, Mapping
from functools import lru_cache
from types import ModuleType

import numpy as np
import torch

from kernels.backends import cpu_loops, jit_cache, numba_patches, slug, switch_tag
from kernels.executor import Executor, Formula, Launcher
from kernels.modes import FusedForm, GradKind, Layout, Variant
from kernels.plan import Geometry
from kernels.tiling import DeviceFacts, Space, cpu_space, cpu_transposed_space

# numba's copy propagation without its quadratic deepcopies, before any of the backend's loops
# compiles: the same code, compiled in 0.6x the time for the largest walks (numba_patches).
numba_patches.install()

# Empty arrays whose element type tells a loop how to read an operand's address (cpu_loops._view):
# int16 carries float16 bits, uint16 bfloat16 bits.
TAGS: dict[torch.dtype, np.ndarray] = {
    torch.float32: np.empty(0, np.float32),
    torch.float16: np.empty(0, np.int16),
    torch.bfloat16: np.empty(0, np.uint16),
}


def _nothing(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor, o: torch.Tensor) -> None:
    """The launch of an empty problem."""


def span(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Elements from a view's first element to its last, through its strides (never negative here)."""
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True))


@lru_cache(maxsize=256)
def _walk_arrays(geo: Geometry, x_axis: int) -> tuple[np.ndarray, ...]:
    """The strided/reduce loops' shape, stride and span arrays: per geometry, not per launch."""
    strides = np.array(geo.strides, dtype=np.int64)
    strides[1] = strides[x_axis]
    if geo.layout is not Layout.REDUCE:
        spans = np.array([span(geo.shape, s) for s in strides.tolist()], np.int64)
        return spans, np.array(geo.shape, np.int64), strides
    rstrides = np.array(geo.rstrides, dtype=np.int64)
    rstrides[1] = rstrides[x_axis]
    # A reduced operand's span also covers the summed dims.
    spans = [
        span(geo.shape, k) + span(geo.rshape, r) - 1
        for k, r in zip(strides.tolist()[:3], rstrides.tolist(), strict=True)
    ]
    spans.append(span(geo.shape, strides.tolist()[3]))
    return np.array(spans, np.int64), np.array(geo.shape, np.int64), strides, np.array(geo.rshape, np.int64), rstrides


@lru_cache(maxsize=256)
def _run_kind(geo: Geometry, x_axis: int) -> cpu_loops.StridedRun:
    """The kind of run this geometry's walk takes, which picks its build, once per geometry: the
    deferred transposed walk's pass (a) (cpu_loops.transposed_run) or the strided walk's
    (cpu_loops.strided_run)."""
    kind_of = cpu_loops.transposed_run if geo.layout is Layout.TRANSPOSED else cpu_loops.strided_run
    return kind_of(_walk_arrays(geo, x_axis)[2])


@lru_cache(maxsize=256)
def _reduce_build(geo: Geometry, x_axis: int) -> tuple[bool, cpu_loops.StridedRun | bool]:
    """Which build of which reduce walk a reduce geometry takes, once per geometry: (True, whether
    the gradient is at stride 0 along the summed run) for the walk along its summed dims
    (cpu_loops.reduce_along), else (False, the kind of its lanes: cpu_loops.reduce_run)."""
    _, _, kstrides, rshape, rstrides = _walk_arrays(geo, x_axis)
    if cpu_loops.reduce_along(rshape, rstrides):
        return True, bool(rstrides[0, -1] == 0)
    return False, cpu_loops.reduce_run(kstrides)


# The table walk (cpu_loops.TABLE_WALK) trades the formula's arithmetic for one gather per element,
# after 2^16 evaluations that build the table (83-117 us measured on the 2-thread host): offered to
# the formulas whose arithmetic bounds them (KL log_target's exp) from 64 tables' worth of elements
# on, where the walk was 1.24x the scalar_grad loop at 2^23 bfloat16. The tuner decides where it
# pays (results/performance.md, section 22).
TABLE_MIN_NUMEL = cpu_loops.TABLE_ENTRIES * 64
_PATTERNS = np.arange(cpu_loops.TABLE_ENTRIES, dtype=np.uint16)  # every 16-bit target, read via its tag


def host_isa() -> str:
    """The x86 vector tier numba builds these loops for on this host: "avx512", "avx2" (with FMA),
    or "" for anything else (another architecture, or an older x86).

    It is part of the device name the frozen configs and the studies are kept under: the loops
    differ by it (the register transposes' width, the gather's lanes, the ldexp), and so do the
    best configs, since the vector width sets how much arithmetic a tile's bytes carry (the
    exp-bound KL log_target loops run the three-powers ldexp without AVX-512). A config tuned on
    one tier says nothing about the other; results/performance.md, section 29. The features numba
    compiles for (cpu_loops.target_features: the host's, or a NUMBA_CPU_FEATURES cross-compile's),
    not the LOSSTUNE_CPU_* switches: those are for testing the portable builds, not for naming a
    machine."""
    features = cpu_loops.target_features()
    if features.get("avx512f", False):
        return "avx512"
    if features.get("avx2", False) and features.get("fma", False):
        return "avx2"
    return ""


def microarch() -> str:
    """The CPU's microarchitecture as LLVM names it, the one numba compiles the loops for (``znver4``,
    ``sapphirerapids``); empty where LLVM knows it only as ``generic``. Not /proc/cpuinfo's model
    name: a VM often says only ``AMD EPYC`` there, for a Zen 3 and a Zen 4 alike."""
    name = slug(cpu_loops.target_cpu())
    return "" if name == "generic" else name


def device_name(machine: str, threads: int, chip: str = "") -> str:
    """The CPU's device-class slug: architecture, vector tier where there is one, the
    microarchitecture ``chip`` if given, threads (``x86_64-avx2-2t``, ``x86_64-avx512-znver4-2t``)."""
    parts = [machine or "cpu", host_isa(), chip, f"{threads}t"]
    return "-".join(p for p in parts if p)


# Which device name the tuner's studies and `freeze` use on this host: "tier" (the default,
# x86_64-avx512-2t: one table per vector tier, whose loops are the same code on every host of it)
# or "microarch" (x86_64-avx512-znver4-2t: a table of this chip's own). Two chips of one tier can
# want other configs: the AVX-512 Xeon's table walk runs 1.16-2.6x the exp loop's time on a Zen 4
# (results/performance.md, section 32), and tuning on the Zen 4 under the tier's name would mix
# its trials into the Xeon's studies. Lookups read both tables whatever the scope (frozen.lookup).
SCOPE_ENV = "LOSSTUNE_CPU_TABLE_SCOPE"
SCOPES = ("tier", "microarch")


def table_scope() -> str:
    scope = os.environ.get(SCOPE_ENV, "tier")
    if scope not in SCOPES:
        raise ValueError(f"{SCOPE_ENV}: expected one of {', '.join(SCOPES)}, got {scope!r}")
    return scope


def cpu_facts(machine: str, threads: int) -> DeviceFacts:
    """This host's facts: named by table_scope(), reading the microarchitecture's table first."""
    tier, chip = device_name(machine, threads), device_name(machine, threads, microarch())
    tables = (chip, tier) if chip != tier else (tier,)
    return DeviceFacts("cpu", chip if table_scope() == "microarch" else tier, threads, tables=tables)


def table_variant(formula: Formula, geometry: Geometry, dtype: torch.dtype) -> bool:
    """Whether the table walk is in the space: a 0-d gradient (the scalar_grad loop), a formula of
    the target alone, a 16-bit out, enough elements, a host with hardware gathers (AVX2 or AVX-512)."""
    return (
        cpu_loops.HAS_GATHER
        and formula.compute_bound
        and not formula.reads_input
        and geometry.variants[0] is Variant.SCALAR_GRAD
        and dtype.itemsize == 2
        and geometry.numel >= TABLE_MIN_NUMEL
    )


def _picked_on(cpus: tuple[str, ...], switch: str) -> bool:
    """Whether a pick measured on ``cpus`` applies here: the CPU numba compiles for (as every
    feature gate reads it) is one of them, unless the environment variable ``switch`` says 1 (yes,
    on any host) or 0 (no); any other value is refused by name."""
    forced = cpu_loops._forced(switch)
    return cpu_loops.target_cpu() in cpus if forced is None else forced


# CPUs where a bfloat16 output of an elementwise walk takes a formula's coarse_value (KL
# log_target's degree-2 exp), measured there: the Zen 5, whose bfloat16 0-d loop is bound by its
# arithmetic and took 0.89x the time with one fma fewer an element (results/performance.md,
# section 90); the Xeon (LLVM's rocketlake), whose walks took 0.93-0.95x the time at 2^22 and
# whose contiguous 0-d loops, through the coarse twin (_CHECKED_BF16_CPUS), 0.88-0.94x at
# 2^20-2^24 (section 104). Elsewhere the loops, and the tables' entries tuned on them, stay the
# narrow ones.
_COARSE_CPUS = ("znver5", "rocketlake")


def coarse_offered() -> bool:
    """Whether this host's bfloat16 outputs take Formula.coarse_value: on the CPUs of _COARSE_CPUS
    (the CPU numba compiles for, as every feature gate reads it); ``LOSSTUNE_CPU_COARSE`` 1 says
    yes on any host, 0 no."""
    return _picked_on(_COARSE_CPUS, "LOSSTUNE_CPU_COARSE")


# CPUs where a bfloat16 output of the contiguous loops takes a formula's checked twin, apart, with
# the raw flag (and so, with a 0-d gradient and AVX512-BF16, normal_run's store without the
# subnormal fix-up), though vscalefps is one instruction there and the other outputs keep the
# formula's own loops: the Xeon (LLVM's rocketlake), whose KL log_target bfloat16 0-d rows took
# 0.79-0.87x the time at 2^22 and 0.89-0.94x at 2^24 with the twin, while its float16 rows took
# 1.19-1.41x under the tier table's tile-256 configs (results/performance.md, section 98; the pick
# alone, section 103: 0.81-0.94x on the 0-d rows). Where the host takes the coarse formula too
# (coarse_offered), the twin is the coarse one's. Its walks with a 0-d gradient take it too
# (section 105: the broadcast walk 0.82-0.88x from 2^18 up). The Zen 4 (LLVM's znver4): its KL
# log_target bfloat16 0-d rows took 0.67x the time at 2^22 and 0.72x at 2^24 (66% -> 92% of the
# copy), its full ones 0.90x and 0.94x, its broadcast 0-d walk 0.68-0.70x at 2^20-2^24, the same
# bits; its transposed 0-d walk 1.00x in the inputs-first order its table gave it, and its table
# now gives the shipped order, 0.65-0.80x that time at 2^20-2^22 (section 112). It keeps the
# narrow formula (no coarse pick there: 0.84-0.93x on the contiguous rows in cache, 0.93-0.96x on
# the 2^22 walks, 1.03-1.11x at 2^24 0-d and 2^26). Where the twin is built for every output
# (cpu_loops.CHECKED_SCALE) this adds nothing.
_CHECKED_BF16_CPUS = ("rocketlake", "znver4")


def checked_bf16_offered() -> bool:
    """Whether this host's bfloat16 outputs of the contiguous loops (and of the walks with a 0-d
    gradient: CpuBackend.checked_walks) take the checked twin with the raw flag where its other
    outputs do not: on the CPUs of _CHECKED_BF16_CPUS (the CPU numba
    compiles for); ``LOSSTUNE_CPU_CHECKED_BF16`` 1 says yes on any host, 0 no. With the coarse
    pick (coarse_offered) they are the coarse formula's, through its twin. Those loops are
    built apart and with the raw flag whatever ``LOSSTUNE_CPU_APART`` and ``LOSSTUNE_CPU_RAW_FLAG``
    say (the twin runs only apart): this switch is the one that takes them off."""
    return _picked_on(_CHECKED_BF16_CPUS, "LOSSTUNE_CPU_CHECKED_BF16")


# CPUs where a float32 out of a compute-bound formula with a 0-d gradient (KL log_target's exp) is
# offered the deferred transposed walk (Tiling.defer_out), which cpu_loops.DEFERRED offers 16-bit
# outs alone: the Xeon (LLVM's rocketlake), where its exp leaves pass (a) issue slots for the held
# tile's rows and those rows took 0.90-0.95x the time of the same config undeferred at 2^20-2^22,
# while every other float32 row lost there (1.05-1.16x: the full gradients', and mse's, l1's and
# KL's 0-d ones), as every float32 row had on the Zen 4 (1.04-1.37x; results/performance.md,
# sections 43 and 107). Elsewhere the float32 spaces, and the hashes their entries carry, stay as
# they were.
_DEFERRED_WIDE_CPUS = ("rocketlake",)


def deferred_wide_offered() -> bool:
    """Whether this host offers the deferred transposed walk to a float32 out of a compute-bound
    formula with a 0-d gradient, where it offers the walk at all (cpu_loops.DEFERRED): on the CPUs
    of _DEFERRED_WIDE_CPUS (the CPU numba compiles for); ``LOSSTUNE_CPU_DEFERRED_WIDE`` 1 says yes
    on any host, 0 no."""
    return _picked_on(_DEFERRED_WIDE_CPUS, "LOSSTUNE_CPU_DEFERRED_WIDE")


# CPUs offered the fused transposed walk (Tiling.fused) for KL's negated scale with a 0-d gradient
# alone, where cpu_loops.FUSED (every form, the Zen 5's) is off: the Zen 4, where at 2^22 it took
# 0.84-0.86x the time of the chip table's walk on kl_div's three 0-d rows in 11 interleaved rounds
# (0.75-0.92x in 7), while mse's rows, and kl_div's with a full gradient, took 1.02-2.6x through it
# (results/performance.md, section 112). Elsewhere the spaces, and the hashes their entries carry,
# stay as they were.
_FUSED_0D_CPUS = ("znver4",)


def fused_0d_offered() -> bool:
    """Whether this host offers the fused transposed walk to KL's negated scale with a 0-d gradient
    where it does not offer it to every form (cpu_loops.FUSED): on the CPUs of _FUSED_0D_CPUS (the
    CPU numba compiles for), with F16C (the walk's float16 conversions are LLVM's fpext and
    fptrunc); ``LOSSTUNE_CPU_FUSED_0D`` 1 says yes on any host with F16C, 0 no."""
    return cpu_loops.HAS_F16C and _picked_on(_FUSED_0D_CPUS, "LOSSTUNE_CPU_FUSED_0D")


# The environment variables that change which loops this backend compiles or which walks its spaces
# offer, each over a pick the host makes (the CPU numba compiles for and its features): for testing
# the portable builds on any host and for measuring a pick on a CPU its list lacks. Set, they make a
# process run loops other than the ones this host runs unset, so what such a process measures is not
# this host's: every report and asv run stores them with the host (tuner.machine.describe), a
# study's trials and decisions carry them (tuner.study.Sweep), and a decision taken under them is
# never frozen into a table that processes without them read (tuner.freeze). Not here: the table
# scope (which file a decision is written to, not what ran), the compiled-loop cache and the numba
# patch (the same compiled code either way).
LOOP_SWITCHES = (
    "LOSSTUNE_CPU_F16C",
    "LOSSTUNE_CPU_BF16",
    "LOSSTUNE_CPU_SCALEF",
    "LOSSTUNE_CPU_GATHER",
    "LOSSTUNE_CPU_CHECKED",
    "LOSSTUNE_CPU_APART",
    "LOSSTUNE_CPU_RAW_FLAG",
    "LOSSTUNE_CPU_COARSE",
    "LOSSTUNE_CPU_CHECKED_BF16",
    "LOSSTUNE_CPU_TRANSPOSE_BYTES",
    "LOSSTUNE_CPU_HALF_ROWS",
    "LOSSTUNE_CPU_INPUTS_FIRST",
    "LOSSTUNE_CPU_DEFERRED",
    "LOSSTUNE_CPU_DEFERRED_WIDE",
    "LOSSTUNE_CPU_FUSED",
    "LOSSTUNE_CPU_FUSED_0D",
    "LOSSTUNE_CPU_PAIRED",
)


# The feature switches among them (cpu_loops._host_has) read "0" alone, as a build without the
# instruction, and took any other value as unset: a typo ("off", "no") ran the host's build without
# a word. Each is refused here by name unless 0 or 1, as every other switch is (cpu_loops._forced).
# 1 cannot give a host an instruction it lacks: it leaves the host's pick. Here, not in _host_has:
# cpu_loops.py is what every frozen entry's kernel hash covers, and an edit there stales them all.
FEATURE_SWITCHES = ("LOSSTUNE_CPU_F16C", "LOSSTUNE_CPU_BF16", "LOSSTUNE_CPU_SCALEF", "LOSSTUNE_CPU_GATHER")


def _refuse_feature_typos() -> None:
    for switch in FEATURE_SWITCHES:
        cpu_loops._forced(switch)  # a ValueError naming it, unless unset, 0 or 1


_refuse_feature_typos()


def forced_switches(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The LOOP_SWITCHES set in ``environ`` (default: this process's environment), by name, with
    their values as given, in LOOP_SWITCHES' order; empty where the host's picks stand. Set to the
    value the host picks anyway, a switch is still listed: the process asked for it."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in LOOP_SWITCHES if name in env}


def forced_tag(environ: Mapping[str, str] | None = None) -> str:
    """forced_switches as one string, ``NAME=value`` joined by spaces ("" where none is set): what
    a trial and a decision carry (tuner.study)."""
    return switch_tag(forced_switches(environ))


def _holds_a_row(loops: ModuleType) -> bool:
    """Whether one vector register holds a transpose row of ``loops`` (TRANSPOSE_BYTES): the fused
    walk passes each rounded row through an empty asm that asks for one, and a 64-byte row on a
    host without AVX-512 (LOSSTUNE_CPU_TRANSPOSE_BYTES=64 on AVX2) stops LLVM itself, killing the
    process ("couldn't allocate output register for constraint 'v'")."""
    # The register is the compile's, whatever revision of the loops (tuner.restamp) builds the walk.
    return loops.TRANSPOSE_BYTES <= cpu_loops.vector_bytes()


def _fused_key(key: object) -> str:
    """A fused walk's key in restamp's listing (``built``): (form, 0-d gradient, row) as
    "form,scalar|full,row"; an older revision's (its row alone) as it is."""
    if isinstance(key, tuple):
        form, scalar_g, row = key
        return f"{form.value},{'scalar' if scalar_g else 'full'},{row}"
    return str(key)


def _launched_variant(ex: Executor) -> Variant:
    """The variant ``ex`` runs: its config's, but a table config of a float32 target runs the
    scalar_grad loop the table is built by (a float32 target has no table)."""
    variant = ex.config.variant
    if variant is Variant.TABLE and ex.target.element_size() != 2:
        return Variant.SCALAR_GRAD
    return variant


def _line_aligned(out: torch.Tensor, row_stride: int) -> bool:
    """Whether every output line the transposed walk stores as a whole is line-aligned, as a
    non-temporal vector store needs (to a misaligned address it faults): out starts on a line and
    its rows are a whole number of lines apart."""
    line = cpu_loops.LINE
    return out.data_ptr() % line == 0 and (row_stride * out.element_size()) % line == 0


# The names of a formula's sets of loops (CpuBackend.kernels), as built() lists them.
_SET_NAMES = ("wide", "narrow", "sum", "half", "coarse", "checked_bf16", "checked_coarse")


class CpuBackend:
    name = "cpu"
    device_type = "cpu"
    timed = True

    def __init__(self, loops: ModuleType = cpu_loops) -> None:
        """``loops``: the module the loops are built from; cpu_loops, or another revision of it that
        tuner.restamp compiles beside it (same interface, its own compiled functions)."""
        self._loops = loops
        # by formula name: (value's, narrow_value's, sum_value's, half_value's, coarse_value's,
        # narrow_value's and coarse_value's through their twins for bfloat16 outs), one object where
        # a formula has no other
        self._kernels: dict[str, tuple[cpu_loops.CpuKernels, ...]] = {}
        self.coarse = coarse_offered()  # bfloat16 outputs' pick, read once (_loop_set)
        self.checked_bf16 = checked_bf16_offered()  # the contiguous loops' bfloat16 outputs' (_loop_set)
        # The walks' with a 0-d gradient, with it (_loop_set); apart so that an A/B can hold the
        # contiguous loops' pick while it moves this one (results/performance.md, section 105).
        self.checked_walks = self.checked_bf16
        # Whether those sets' deferred transposed walks take the twin in their whole tiles
        # (cpu_loops.make_cpu_kernels' deferred_twin; section 106): read when a formula's sets are
        # built, at its first launch, so an A/B sets it on a fresh backend before that.
        self.deferred_twin = True
        # Whether a float32 out of a compute-bound formula with a 0-d gradient is offered the
        # deferred walk (deferred_wide_offered): read by every space(), so set it before a lookup.
        self.deferred_wide = deferred_wide_offered()
        # Whether KL's 0-d transposed walk is offered the fused walk where no form is (fused_0d_offered):
        # read by every space(), so set it before a lookup.
        self.fused_0d = fused_0d_offered()
        threads = cpu_loops.max_threads()
        self._facts = cpu_facts(platform.machine(), threads)
        # Compiled loops kept on disk between processes (jit_cache), for this revision's loops only:
        # tuner.restamp reads the IR of another revision's, and cached code shows none. Read once.
        self._cached = loops is cpu_loops and jit_cache.enabled()
        if self._cached:
            jit_cache.attach(fn for _, fn in self._module_walks())

    def built(self) -> list[tuple[str, object]]:
        """Every loop built so far, by (formula name, which of its formulas, field of CpuKernels),
        with its numba dispatcher: what a launch compiled is in their signatures (tuner.restamp)."""
        found = [item for name, sets in self._kernels.items() for item in self._labelled(name, sets)]
        return found + self._module_walks()

    @staticmethod
    def _labelled(name: str, sets: tuple[cpu_loops.CpuKernels, ...]) -> list[tuple[str, object]]:
        """The dispatchers of one formula's loop sets, labelled as built() lists them."""
        found = []
        for i, (which, kernels) in enumerate(zip(_SET_NAMES, sets, strict=True)):
            if any(kernels is other for other in sets[:i]):  # a formula's stand-in: listed once
                continue
            for field in dataclasses.fields(kernels):
                value = getattr(kernels, field.name)
                if value is None:  # a field an old revision's loops lack (tuner.restamp.as_launched_today)
                    continue
                items = value.items() if isinstance(value, dict) else [("", value)]
                for tile, fns in items:
                    for build, fn in zip(("serial", "parallel"), fns, strict=True):
                        found.append((f"{name} {which} {field.name}{tile and f'[{tile}]'} {build}", fn))
        return found

    def _module_walks(self) -> list[tuple[str, object]]:
        """The walks the loops' module builds once for every formula (the table and fused walks)."""
        found = [
            (f"TABLE_WALK {build}", fn)
            for build, fn in zip(("serial", "parallel"), self._loops.TABLE_WALK, strict=True)
        ]
        found.extend(  # an older revision's loops (tuner.restamp) may have none
            (f"{kind}_WALK[{_fused_key(key)}] {build}", fn)
            for kind in ("FUSED", "PAIRED")
            for key, fns in getattr(self._loops, f"{kind}_WALKS", {}).items()
            for build, fn in zip(("serial", "parallel"), fns, strict=True)
        )
        return found

    def facts(self) -> DeviceFacts:
        return self._facts

    def space(self, formula: Formula, geometry: Geometry, dtype: torch.dtype) -> Space:
        if geometry.layout is Layout.TRANSPOSED:
            out_bytes = geometry.n_out * dtype.itemsize
            loops = self._loops
            # The inputs-first order transposes the target alone: offered where nothing else is read
            # per element (an older revision's loops, for tuner.restamp, have no such walk).
            first = (
                getattr(loops, "INPUTS_FIRST", False)
                and not formula.reads_input
                and geometry.grad_kind is GradKind.SCALAR
            )
            # Deferring out's stores gained on 16-bit outs (float32's pieces are half as long); a
            # float32 out only where pass (a)'s exp has slots to hide them in (deferred_wide_offered).
            wide = self.deferred_wide and formula.compute_bound and geometry.grad_kind is GradKind.SCALAR
            deferred = getattr(loops, "DEFERRED", False) and (dtype.itemsize == 2 or wide)
            # The fused walk applies the formula's form inside its transposes, converting each
            # dtype as the loops do, where a register holds a transpose row (_holds_a_row).
            # On the Zen 4 for KL's negated scale with a 0-d gradient alone (fused_0d_offered); an older
            # revision's loops (tuner.restamp) without the fused walks offer it nowhere.
            zero_d = (
                self.fused_0d
                and formula.fused_form is FusedForm.NEGATED_SCALE
                and geometry.grad_kind is GradKind.SCALAR
                and hasattr(loops, "FUSED_WALKS")
            )
            offered = getattr(loops, "FUSED", False) or zero_d
            fused = offered and formula.fused_form is not None and _holds_a_row(loops)
            # ... and with half rows in whole-line registers, two blocks a register (cpu_loops.PAIRED),
            # for 16-bit outs: float32's paired build let LLVM commute a multiply, so where a NaN
            # gradient met a NaN target it kept the other operand's NaN, not the one the loops keep.
            paired = fused and getattr(loops, "PAIRED", False) and dtype.itemsize == 2
            # Only where the walk converts rows (cpu_loops._paired_walks); an older revision's loops
            # (tuner.restamp) without fused_by_rows paired every form.
            by_rows = getattr(loops, "fused_by_rows", lambda form, full: True)
            paired = paired and by_rows(formula.fused_form, geometry.grad_kind is GradKind.FULL)
            paired_row = loops.LINE // 2 if paired else 0
            return cpu_transposed_space(
                self._facts,
                geometry.numel,
                out_bytes,
                loops.TRANSPOSED_TILES,
                loops.TRANSPOSE_ROWS,
                first,
                deferred,
                fused,
                paired_row,
            )
        table = (Variant.TABLE,) if table_variant(formula, geometry, dtype) else ()
        return cpu_space(self._facts, geometry.variants + table, geometry.numel)

    def kernels(
        self,
        formula: Formula,
        narrow: bool = False,
        *,
        summed: bool = False,
        half: bool = False,
        coarse: bool = False,
        checked_bf16: bool = False,
    ) -> cpu_loops.CpuKernels:
        """The loops of ``formula``; ``narrow``: those of its narrow_value where it has one (16-bit
        outputs of the elementwise walks); ``half`` (with ``narrow``): those of its half_value where
        it has one and these loops scale by 2^k in more than one instruction (a float16 output of
        a float16 gradient); ``coarse`` (with ``narrow``): those of its coarse_value where it has
        one (a bfloat16 output, where the host takes it: _loop_set); ``summed``: those of its
        sum_value where it has one (the reduce walks), or with ``narrow`` those of its
        narrow_value (a 16-bit output of a sum whose terms share one sign: _loop_set);
        ``checked_bf16`` (with ``narrow``): those of its narrow_value through its narrow twin,
        apart, with the raw flag (a bfloat16 output of the contiguous loops, where the host takes
        them: _loop_set), or the narrow ones where those are built with the twin already; with
        ``coarse`` too, those of its coarse_value through its coarse twin alike, or the coarse ones
        where those are built with the twin already. All are built on first use: numba compiles
        lazily."""
        sets = self._kernels.get(formula.name)
        if sets is None:
            loops = self._loops
            # Checked twins only where the loops say (cpu_loops.CHECKED_SCALE); an older revision of
            # the loops (tuner.restamp) has none and takes no third argument.
            checked = getattr(loops, "CHECKED_SCALE", False)
            # Where vscalefps is one instruction and the twin is taken anyway (cpu_loops._CHECKED_CPUS:
            # the Zen 5), the float32 outputs' loops stay the formula's own, inline: the tier table
            # the host also reads holds float32 configs tuned on those loops (tile 256, streamed),
            # which took 2.4-3.0x the time through the twin's loops apart at 2^24 (section 68).
            wide_inline = checked and getattr(loops, "HAS_SCALEF", False)
            # What this revision's make_cpu_kernels takes: an older one (tuner.restamp) lacks the
            # later keywords (normal_low, raw_flag, deferred_twin).
            takes = inspect.signature(loops.make_cpu_kernels).parameters

            def make(
                value: Callable[..., float], twin: Callable[..., tuple[float, bool]] | None = None
            ) -> cpu_loops.CpuKernels:
                if checked and twin is not None:
                    # An older revision of the loops (tuner.restamp) has no raw flag and takes no
                    # checked_range.
                    if getattr(loops, "RAW_FLAG", False) and formula.checked_range is not None:
                        ranges = {"checked_range": formula.checked_range}
                        # An older revision of the loops takes no normal_low either.
                        if "normal_low" in takes:
                            ranges["normal_low"] = formula.normal_low
                        return loops.make_cpu_kernels(value, formula.compute_bound, twin, **ranges)
                    return loops.make_cpu_kernels(value, formula.compute_bound, twin)
                return loops.make_cpu_kernels(value, formula.compute_bound)

            if wide_inline:
                wide = loops.make_cpu_kernels(formula.value, formula.compute_bound, apart=False)
            else:
                wide = make(formula.value, formula.checked_value)
            narrow_set = (
                wide if formula.narrow_value is None else make(formula.narrow_value, formula.narrow_checked_value)
            )
            summed_set = wide if formula.sum_value is None else make(formula.sum_value, formula.sum_checked_value)
            # An older revision of the loops (tuner.restamp) has no ldexp_half: its narrow loops.
            half_value = formula.half_value if getattr(self._loops, "HALF_SCALE", False) else None
            half_set = narrow_set if half_value is None else make(half_value)
            # Formulas of an older op module (tuner.restamp) have no coarse value: the narrow loops.
            coarse_value = getattr(formula, "coarse_value", None)
            coarse_set = narrow_set if coarse_value is None else make(coarse_value, formula.coarse_checked_value)
            # The checked_bf16 pick's: built whatever the host's pick (_loop_set reads it, as it
            # reads the coarse one), and compiled at its first call only. Where every output takes
            # the twin (checked) they are the narrow and the coarse sets; an older revision of the
            # loops (tuner.restamp) takes no raw_flag: the same.
            raw = not checked and "raw_flag" in takes and formula.checked_range is not None

            # An older revision of the loops (tuner.restamp) has no twin in the deferred walk.
            whole = {"deferred_twin": self.deferred_twin} if "deferred_twin" in takes else {}

            def raw_twin(value: Callable[..., float], twin: Callable[..., tuple[float, bool]]) -> cpu_loops.CpuKernels:
                return loops.make_cpu_kernels(
                    value,
                    formula.compute_bound,
                    twin,
                    apart=True,  # the twin runs in the loops apart only (and inline in the deferred walk's whole tiles)
                    checked_range=formula.checked_range,
                    normal_low=formula.normal_low,
                    raw_flag=True,
                    **whole,
                )

            twin16 = formula.narrow_checked_value
            checked_bf16_set = raw_twin(formula.narrow_value, twin16) if raw and twin16 is not None else narrow_set
            # Without a coarse formula the coarse pick adds nothing: the narrow twin's.
            coarse_twin = getattr(formula, "coarse_checked_value", None)
            if coarse_value is None:
                checked_coarse_set = checked_bf16_set
            elif raw and coarse_twin is not None:
                checked_coarse_set = raw_twin(coarse_value, coarse_twin)
            else:
                checked_coarse_set = coarse_set
            sets = (wide, narrow_set, summed_set, half_set, coarse_set, checked_bf16_set, checked_coarse_set)
            self._kernels[formula.name] = sets
            if self._cached:
                jit_cache.attach(fn for _, fn in self._labelled(formula.name, sets))
        if summed:
            return sets[1] if narrow else sets[2]
        if narrow and coarse:
            return sets[6] if checked_bf16 else sets[4]
        if narrow and checked_bf16:
            return sets[5]
        return sets[3] if narrow and half else sets[narrow]

    def _loop_set(self, ex: Executor) -> tuple[cpu_loops.CpuKernels, int]:
        """The loops ``ex`` launches from, and which build of each: 1 parallel, 0 serial."""
        # A 16-bit output of an elementwise walk is one rounding of one value: the narrow formula
        # suffices. A broadcast sum's float32 terms add up before that rounding, and a sum that
        # cancels keeps their relative error (SEMANTICS: relative 1e-5 of the magnitudes), so its
        # terms take the sum formula, accurate to about 1e-6. Where the gradient is one value (0-d,
        # as mean and sum send it), KL log_target's terms -exp(t) * g * cof (cof > 0) all have its
        # sign (or are the formula's NaN or 0), so nothing cancels: the sum keeps its terms'
        # relative error, and the narrow exp's 1.04e-4 puts a 16-bit output under 0.72 ulp from the
        # exact sum (a float16 ulp is over 2^-11 of the value, so 1.04e-4 of it is under 0.22 ulp,
        # then the rounding's half; bfloat16 0.53). It holds where the formula's terms cannot take
        # two signs for one gradient, as exp(t)'s cannot (Formula.log_target; a plain target's -t
        # can), and inherits the formula's own limits (|g| >= 2^-123, float32 subnormal terms
        # exact to 2^-150 only). The choice of formula reads the formula, the dtypes and the
        # gradient's size, never the config: a problem's bits stay the same on every config. (The
        # config decides only whether a bfloat16 out takes the checked twin, below, whose bits are
        # the formula's. tuner.restamp builds an older revision's loops through this pick too; no
        # table holds a reduce entry.)
        summed = ex.config.variant is Variant.REDUCE
        one_sign = ex.formula.log_target and ex.grad.numel() == 1
        narrow = ex.out.dtype is not torch.float32 and (not summed or one_sign)
        half = ex.out.dtype is torch.float16 and ex.grad.dtype is torch.float16  # kernels() ignores it for sums
        # A bfloat16 output's one rounding into 8 bits: the coarse formula where the host takes it
        # (coarse_offered); a sum's terms keep the narrow one (kernels() ignores coarse for sums).
        coarse = self.coarse and ex.out.dtype is torch.bfloat16
        # Its contiguous loops through the twin (the coarse one, with the coarse formula) where the
        # host takes them for bfloat16 alone (checked_bf16_offered), and its strided and transposed
        # walks with a 0-d gradient (checked_walks): their unit-stride runs of _APART_RUN and more
        # go apart through the twin with the raw flag, and with normal_run's store. On the Xeon the
        # broadcast 0-d walk of KL log_target bfloat16 took 0.82-0.88x the time from 2^18 to 2^24
        # elements, the transposed walk's shipped order 0.78-0.85x, its deferred one (inline, no
        # run apart) 0.95-1.01x (section 105); on the Zen 4 the broadcast walk 0.68-0.70x from 2^20
        # to 2^24, the transposed one in its inputs-first order 1.00x (section 112). Walks with a
        # full gradient keep their loops: the broadcast one took 1.05x at 2^12 and 2^16 and
        # 0.99-1.10x from 2^18 up through the twin. The table walk keeps its (unmeasured).
        launched = _launched_variant(ex)
        contiguous = launched is Variant.FLAT or launched is Variant.SCALAR_GRAD
        walk_0d = launched is Variant.STRIDED and ex.geometry.grad_kind is GradKind.SCALAR and self.checked_walks
        checked_bf16 = self.checked_bf16 and (contiguous or walk_0d) and ex.out.dtype is torch.bfloat16
        loops = self.kernels(ex.formula, narrow, summed=summed, half=half, coarse=coarse, checked_bf16=checked_bf16)
        return loops, int(ex.config.cores > 1)

    def launcher(self, ex: Executor) -> Launcher | None:
        """``ex``'s contiguous launch (flat and scalar_grad loops) over any four tensors of its
        metadata, with the loop, its build and every argument but the four addresses decided here,
        once per plan (Executor.launcher), instead of on every launch. Reading them off the plan
        took 4-5 us a launch on the Zen 3, against 1.8 us for the whole loop at 2^10
        (results/performance.md, section 75). None for the walks, whose launch reads more of the
        plan (``launch``)."""
        if ex.empty:
            return _nothing
        cfg = ex.config
        variant = _launched_variant(ex)
        if variant is not Variant.FLAT and variant is not Variant.SCALAR_GRAD:
            return None
        kernels, pick = self._loop_set(ex)
        fn = (kernels.flat if variant is Variant.FLAT else kernels.scalar_grad)[pick]
        # The input operand is not read by every formula (KL never reads self): then the target
        # stands in for it, so no memory of self is touched.
        reads = ex.formula.reads_input
        tg, tx, tt, to = (TAGS[v.dtype] for v in (ex.grad, ex.inp if reads else ex.target, ex.target, ex.out))
        n, cof, cores, stream = ex.geometry.numel, ex.cof, cfg.cores, cfg.stream
        tile, ahead = cfg.tile, cfg.tile * cfg.prefetch
        set_threads = self._loops.set_threads

        # Closure cells, one call with every argument spelled out: no tuple built or unpacked.
        def go(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor, o: torch.Tensor) -> None:
            if pick:
                set_threads(cores)
            xp = (x if reads else t).data_ptr()
            fn(g.data_ptr(), xp, t.data_ptr(), o.data_ptr(), tg, tx, tt, to, n, cof, tile, ahead, cores, stream)

        return go

    def launch(self, ex: Executor) -> None:
        """Read the plan and launch it: every launch of an executor without a launcher of this
        backend's own (dispatch.run takes the executor's where it has one)."""
        go = self.launcher(ex)
        if go is not None:
            go(ex.grad, ex.inp, ex.target, ex.out)
            return
        cfg, geo = ex.config, ex.geometry
        kernels, pick = self._loop_set(ex)
        if pick:
            self._loops.set_threads(cfg.cores)
        if cfg.variant is Variant.TABLE:  # a 16-bit target's (the launcher took the others)
            self._look_up(kernels, ex, pick)
            return
        x, x_axis = (ex.inp, 1) if ex.formula.reads_input else (ex.target, 2)
        g, t, o = ex.grad, ex.target, ex.out
        operands = (
            g.data_ptr(),
            x.data_ptr(),
            t.data_ptr(),
            o.data_ptr(),
            TAGS[g.dtype],
            TAGS[x.dtype],
            TAGS[t.dtype],
            TAGS[o.dtype],
        )
        if cfg.variant is Variant.STRIDED:
            arrays = _walk_arrays(geo, x_axis)
            walk_args = (*operands, *arrays, geo.numel, ex.cof, cfg.tile, cfg.cores)
            if geo.layout is Layout.TRANSPOSED and cfg.fused:
                scalar_g = geo.grad_kind is GradKind.SCALAR
                g0 = g.item() if scalar_g else 0.0
                if self._fused(ex, arrays, g0):
                    spans, shape, strides = arrays
                    walks = self._loops.PAIRED_WALKS if cfg.paired else self._loops.FUSED_WALKS
                    walk = walks[ex.formula.fused_form, scalar_g, cfg.transpose_row][pick]
                    stream = cfg.stream and _line_aligned(o, geo.strides[3][1])
                    rows, cols = shape.tolist()
                    walk(
                        *operands,
                        *spans.tolist(),
                        rows,
                        cols,
                        strides[2][0],
                        strides[3][1],
                        g0,
                        ex.cof,
                        cfg.cores,
                        stream,
                    )
                    return
            if geo.layout is Layout.TRANSPOSED:
                # The inputs own the inner dim, out the outer one: the tiled walk that transposes
                # through a buffer of its tile (cpu_loops.transposed).
                if cfg.defer_out:
                    walk = kernels.transposed_deferred[cfg.tile, cfg.transpose_row, _run_kind(geo, x_axis)][pick]
                else:
                    walks = kernels.transposed_in if cfg.transpose_in else kernels.transposed
                    walk = walks[cfg.tile, cfg.transpose_row][pick]
                walk(*walk_args, cfg.stream and _line_aligned(o, geo.strides[3][1]))
            else:
                kernels.strided[_run_kind(geo, x_axis)][pick](*walk_args)
            return
        along, build = _reduce_build(geo, x_axis)
        reduce = (kernels.reduce_along if along else kernels.reduce)[build][pick]
        reduce(*operands, *_walk_arrays(geo, x_axis), geo.n_out, ex.cof, cfg.tile, cfg.cores)

    def _fused(self, ex: Executor, arrays: tuple[np.ndarray, ...], g: float) -> bool:
        """Whether a fused config's launch takes the fused walk: cpu_loops.fused_fits over the
        operands the formula's form reads (the target, self where it reads it, a full gradient),
        each of out's dtype, and a 0-d gradient's value ``g`` not NaN; elsewhere the config's own
        walk runs, the same bits. A NaN 0-d gradient makes every value NaN, and where the target is
        NaN too the product's NaN is whichever operand the multiply's instruction takes first, an
        order LLVM picks per loop: the fused walk's half-row float32 build returned the target's,
        the loops the gradient's. With a full gradient the fused walks and the loops keep the same
        operand's NaN, a negative one of its own payload in the gradient included (tests:
        test_fused_walk)."""
        _, shape, strides = arrays
        full = ex.geometry.grad_kind is GradKind.FULL
        # (operand, its row in the walk's stride array), the target's first as fused_fits wants
        read = [(ex.target, 2)] + [(ex.inp, 1)] * ex.formula.reads_input + [(ex.grad, 0)] * full
        return (
            all(v.dtype == ex.out.dtype for v, _ in read)
            and not math.isnan(g)
            and self._loops.fused_fits(
                tuple(shape.tolist()),
                tuple(tuple(strides[k].tolist()) for _, k in read),
                ex.config.transpose_row,
                ex.out.element_size(),
            )
        )

    def _look_up(self, kernels: cpu_loops.CpuKernels, ex: Executor, pick: int) -> None:
        """The table walk: the scalar_grad loop stores the formula's value at every 16-bit target
        (self unread, so the patterns stand in for it too) into the table, then the gather walk."""
        cfg, g, t, o = ex.config, ex.grad, ex.target, ex.out
        tt, to = TAGS[t.dtype], TAGS[o.dtype]
        table = np.empty(cpu_loops.TABLE_ENTRIES + cpu_loops.TABLE_PAD, to.dtype)
        table[cpu_loops.TABLE_ENTRIES :] = 0  # never an entry, only the upper half of the last gather
        patterns, address, entries = _PATTERNS.ctypes.data, table.ctypes.data, cpu_loops.TABLE_ENTRIES
        build = kernels.scalar_grad[pick]  # one untuned pass: whole tiles, no prefetch, ordinary stores
        build(
            g.data_ptr(),
            patterns,
            patterns,
            address,
            TAGS[g.dtype],
            tt,
            tt,
            to,
            entries,
            ex.cof,
            4096,
            0,
            cfg.cores,
            False,
        )
        walk = self._loops.TABLE_WALK[pick]
        walk(t.data_ptr(), tt, address, o.data_ptr(), to, ex.geometry.numel, cfg.tile, cfg.cores, cfg.stream)

    def picks(self) -> dict[str, str]:
        """What each of LOOP_SWITCHES picked in this process, by its name less ``LOSSTUNE_CPU_``:
        "on" or "off", or the number it chose (the gather's lanes, the transpose rows' bytes). Read
        off the loops module and this backend as they were built, so it is what runs."""
        loops = self._loops

        def said(flag: bool) -> str:
            return "on" if flag else "off"

        return {
            "F16C": said(loops.HAS_F16C),
            "BF16": said(loops.HAS_BF16),
            "SCALEF": said(loops.HAS_SCALEF),
            "GATHER": str(loops.GATHER_LANES),
            "CHECKED": said(loops.CHECKED_SCALE),
            "APART": said(loops.TILES_APART),
            "RAW_FLAG": said(loops.RAW_FLAG),
            "COARSE": said(self.coarse),
            "CHECKED_BF16": said(self.checked_bf16),
            "TRANSPOSE_BYTES": str(loops.TRANSPOSE_BYTES),
            "HALF_ROWS": said(loops.LINE // 2 in loops.TRANSPOSE_ROWS),
            "INPUTS_FIRST": said(loops.INPUTS_FIRST),
            "DEFERRED": said(loops.DEFERRED),
            "DEFERRED_WIDE": said(self.deferred_wide),
            "FUSED": said(loops.FUSED),
            "FUSED_0D": said(self.fused_0d),
            "PAIRED": said(loops.PAIRED),
        }

    def synchronize(self) -> None:
        """numba calls return when the work is done."""


BACKEND = CpuBackend()
