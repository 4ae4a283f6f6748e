"""Section 77 of results/performance.md: configs whose streamed stores a carry drops, measured.

A lookup without an exact entry carries the nearest bucket's config (kernels.frozen.lookup), and
``frozen._carried`` gives a problem smaller than the entry's the stores its own default uses. Where
the entry streamed and the default does not, what ran until section 77 was a tile chosen for
streamed stores run without them: a config no study measured. Section 76 found mse float32 at 2^22
so (the 2^23 entry's tile, unstreamed) at 1.03-1.37x the default's time.

For every op x dtype x gradient kind x layout (contiguous, transposed) at every bucket 2^10-2^26
where the lookup as it was before section 77 drops a config's streaming (the nearest step or the
common step), this times in interleaved rounds in one process:

- ``carried``: what that lookup gives (each carry made as every layout's was before section 77,
  tile and all);
- ``kept``: the next entry in the lookup's order whose carry keeps its store mode (a nearer one
  that would drop its streaming passed over), else the common config, else the default: the
  candidate rule not taken;
- ``default``: the space's default, what the contiguous loop runs there since section 77;
- ``control``: the default again, on an out of its own: the ratios' noise floor;

and prints each one's median (us) and its time over the default's, round by round, median
(min-max). Outputs are checked bit for bit against the default's first.

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/carry.py [ROUNDS] [OP...]
    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/carry.py count

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import warnings

import torch

from kernels import dispatch, frozen, timing
from kernels.backends import cpu_loops
from kernels.backends.cpu import CpuBackend
from kernels.executor import Executor
from kernels.modes import Op, Reduction
from kernels.tiling import Carry, Space, Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout
from tuner.study import round_ratios

BACKEND = CpuBackend()
OPS = {"mse": (Op.MSE, False), "l1": (Op.L1, False), "kl_div": (Op.KL_DIV, False), "kl_div-log": (Op.KL_DIV, True)}
BUCKETS = range(10, 27)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def carry(ex: Executor, *, pass_drops: bool, names: tuple[str, ...] | None = None) -> tuple[Tiling, str] | None:
    """The nearest and common steps of the lookup through the tables ``names`` (default: this
    host's), each carry made as every layout's was before section 77 (through the space with no
    loop rule of its own, ``Carry()``: neither section 77's rule nor section 78's); None where a table has an exact
    entry for the problem (no guess). With ``pass_drops``, a carry that would switch a config's
    streaming off is passed over for the next entry in order, then the common config, then the
    default."""
    key, space = ex.key, ex.space
    plain = dataclasses.replace(space, carry=Carry())  # the carry's shared rules alone
    tables = [t for t in (frozen.load("cpu", d) for d in names or BACKEND.facts().lookup_names) if t]
    if any(frozen._matches(e, key, bucket=True) for t in tables for e in t.entries):
        return None

    def carried(config: Tiling, table: str, how: str, larger: bool) -> tuple[Tiling, str] | None:
        made, source = frozen._carried(config, plain, table, how, larger=larger)
        if pass_drops and config.stream and not made.stream:
            return None
        return made, source[source.index("[") :]

    for table in tables:
        for entry in frozen.nearest(table, key):
            config = frozen._usable(table, entry, space, "cpu", same_problem=False)
            if config is not None:
                made = carried(config, table.path.name, f"nearest 2^{entry['bucket']}", entry["bucket"] <= key.bucket)
                if made is not None:
                    return made
    for table in tables:
        common = (table.common or {}).get(frozen.common_name(key.op.value, key.log_target, key.layout.value))
        if isinstance(common, dict):
            config = frozen._usable(table, common, space, "cpu", same_problem=False)
            if config is not None:
                made = carried(config, table.path.name, "best common", False)
                if made is not None:
                    return made
    return space.default, "[default]"


def dropped(ex: Executor, names: tuple[str, ...] | None = None) -> bool:
    """Whether the lookup before section 77 carried a config to ``ex``'s problem with its streaming dropped."""
    found = carry(ex, pass_drops=False, names=names)
    return found is not None and "not streamed" in found[1]


def executor(case: Case, tensors: tuple[torch.Tensor, ...], config: Tiling | None = None) -> Executor:
    g, x, t = tensors
    return case.phase_one(g, x, t, case.out_like(x), "cpu", config=config)


def row(name: str, case: Case, ex: Executor, rounds: int) -> None:
    """One touched problem: carried, kept and the default, and the default again on an out of its
    own (``control``): two outs of one config read 1.05-1.07x apart at 2^10-2^12 in a first run,
    which is the floor a ratio here must clear."""
    found, candidate = carry(ex, pass_drops=False), carry(ex, pass_drops=True)
    assert found is not None and candidate is not None, "an exact entry: no carry"
    (old, old_source), (alt, alt_source) = found, candidate
    space: Space = ex.space
    configs = {"default": space.default, "control": space.default, "carried": old, "kept": alt}
    names = ["default", "control"]
    names += ["carried"] if old != space.default else []
    names += ["kept"] if alt not in (old, space.default) else []
    tensors = case.inputs("cpu")
    exs = {n: executor(case, tensors, configs[n]) for n in names}
    for e in exs.values():
        dispatch.run(e)
    bits = torch.int16 if case.dtype.itemsize == 2 else torch.int32
    for n, e in exs.items():
        assert torch.equal(exs["default"].out.view(bits), e.out.view(bits)), f"{case.label()} {n}: bits differ"
    runs = [lambda _, e=e: dispatch.run(e) for e in exs.values()]
    measured = dict(zip(names, timing.interleaved(runs, rounds=rounds, min_time_s=0.1), strict=True))
    base = measured["default"].medians

    def over(n: str) -> str:
        if n not in measured:
            return "= default"
        ratios = round_ratios(base, measured[n].medians)
        return f"{statistics.median(ratios):.2f} ({spread(ratios, '.2f')})"

    grad = "0-d" if case.reduction is Reduction.MEAN else "full"
    dtype = str(case.dtype).removeprefix("torch.")
    carried = f"{old.short()} {old_source}"
    print(
        f"| {name} | {dtype} | {grad} | {case.layout.value} | 2^{ex.key.bucket} | {carried} {over('carried')} "
        f"| {alt.short()} {alt_source} {over('kept')} | {space.default.short()} "
        f"{measured['default'].median_s * 1e6:.1f} us | {over('control')} |",
        flush=True,
    )


def count() -> None:
    """``count``: no timing. For every CPU table file, through the lookup a host of it makes (a
    chip's table, then its tier's), the carries that drop streaming, by layout and step: the
    problems section 77's rule sends to the default. Through *this* host's spaces, so an entry whose
    knobs this host's space lacks reads as unusable here: a count for the other hosts, not their
    measurement."""
    print(f"# count mode on {cpu_loops.target_cpu()}: this host's spaces; 2^10-2^26, every layout")
    print("| tables read | contiguous drops | transposed drops | broadcast / summed drops |")
    print("|---|---|---|---|")
    names = sorted(p.stem for p in (frozen.CONFIG_DIR / "cpu").glob("*.json"))
    for name in names:
        parts = name.split("-")
        tier = "-".join(p for p in parts if not p.startswith("znver"))
        chain = (name,) if tier == name else (name, tier)
        drops = {lay: 0 for lay in InputLayout}
        for op, log in OPS.values():
            for dtype in DTYPES:
                for reduction in (Reduction.NONE, Reduction.MEAN):
                    for layout in InputLayout:
                        if layout is InputLayout.SUMMED and op is not Op.KL_DIV:
                            continue
                        for b in BUCKETS:
                            case = Case(op, dtype, (1 << b,), reduction, log_target=log, layout=layout)
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore", frozen.FrozenConfigWarning)
                                drops[layout] += dropped(executor(case, case.inputs("cpu", fill=False)), chain)
        other = drops[InputLayout.BROADCAST] + drops[InputLayout.SUMMED]
        print(f"| {', '.join(chain)} | {drops[InputLayout.CONTIGUOUS]} | {drops[InputLayout.TRANSPOSED]} | {other} |")


def main() -> None:
    if sys.argv[1:2] == ["count"]:
        count()
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    ops = sys.argv[2:] or list(OPS)
    print(f"# {cpu_loops.target_cpu()}, {rounds} rounds; time over the default's: median (min-max) of rounds")
    print("| op | dtype | grad | layout | bucket | carried (until section 77) | kept (not taken) | default | control |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ops:
        op, log = OPS[name]
        for dtype in DTYPES:
            for reduction in (Reduction.NONE, Reduction.MEAN):
                for layout in (InputLayout.CONTIGUOUS, InputLayout.TRANSPOSED):
                    for b in BUCKETS:
                        case = Case(op, dtype, (1 << b,), reduction, log_target=log, layout=layout)
                        ex = executor(case, case.inputs("cpu", fill=False))
                        if dropped(ex):
                            row(name, case, ex, rounds)


if __name__ == "__main__":
    main()
