"""Tuned vs default vs vendor baseline, with GB/s and % of the copy roofline measured in the same run."""

from __future__ import annotations

import dataclasses
import random
import statistics
from dataclasses import dataclass

from kernels import backends, timing
from kernels.accuracy import mismatch
from tuner.problems import Case


@dataclass(frozen=True)
class BenchRow:
    """One long-format result row; the field order is the column order."""

    op: str
    dtype: str
    shape: str
    reduction: str
    numel: int
    backend: str
    device: str
    tuned_config: str
    config_source: str
    tuned_s: float
    tuned_p20_s: float
    tuned_p80_s: float
    default_s: float
    vendor_s: float
    gbps: float
    roofline_pct: float
    copy_gbps: float
    speedup_vs_default: float
    speedup_vs_vendor: float


def bench_case(case: Case, backend: str, *, min_time_s: float = 0.1, rounds: int = 3, seed: int = 0) -> BenchRow:
    device = timing.backend_device(backend)
    g, x, t = case.inputs(device)
    out = case.out_like(x)
    tuned = case.phase_one(g, x, t, out, backend)
    default = case.phase_one(g, x, t, out, backend, tuned.space.default)
    launch = backends.get(backend).launch
    ref = case.reference(g, x, t)
    for ex in (tuned, default):
        launch(ex)
        wrong = mismatch(out, ref)
        if wrong:  # a wrong kernel must not post a fast number
            raise AssertionError(f"{case.label()} {ex.config.short()} is wrong: {wrong}")
    vendor = case.baseline()
    runs = [lambda _: launch(tuned), lambda _: launch(default), lambda _: vendor(g, x, t)]
    samples: list[list[float]] = [[], [], []]
    medians: list[list[float]] = [[], [], []]
    order = [0, 1, 2]
    rng = random.Random(seed)
    for _ in range(rounds):  # interleaved, so drift on a shared host hits all three alike
        rng.shuffle(order)
        for i in order:
            result = timing.measure(runs[i], device, min_time_s=min_time_s)
            samples[i].extend(result.samples)
            medians[i].append(result.median_s)
    tuned_t = timing.summarize(samples[0])
    med = [statistics.median(m) for m in medians]
    nbytes = timing.bytes_moved(case.read_tensors(g, x, t), out)
    copy = timing.copy_bandwidth(str(device))
    gbps = nbytes / med[0] / 1e9
    return BenchRow(
        case.op.value + ("-log" if case.log_target else ""),
        tuned.key.dtype,
        "x".join(map(str, case.shape)) or "0d",
        case.reduction.name.lower(),
        case.numel,
        backend,
        tuned.device,
        tuned.config.short(),
        tuned.config_source,
        med[0],
        tuned_t.p20_s,
        tuned_t.p80_s,
        med[1],
        med[2],
        gbps,
        100 * gbps / (copy / 1e9),
        copy / 1e9,
        med[1] / med[0],
        med[2] / med[0],
    )


def format_table(rows: list[BenchRow]) -> str:
    head = (
        "op",
        "dtype",
        "shape",
        "red",
        "tuned us",
        "p20-p80",
        "default us",
        "vendor us",
        "GB/s",
        "roofline",
        "x default",
        "x vendor",
        "config",
    )
    lines = [head]
    for r in rows:
        lines.append(
            (
                r.op,
                r.dtype,
                r.shape,
                r.reduction,
                f"{r.tuned_s * 1e6:.1f}",
                f"{r.tuned_p20_s * 1e6:.1f}-{r.tuned_p80_s * 1e6:.1f}",
                f"{r.default_s * 1e6:.1f}",
                f"{r.vendor_s * 1e6:.1f}",
                f"{r.gbps:.2f}",
                f"{r.roofline_pct:.0f}%",
                f"{r.speedup_vs_default:.2f}",
                f"{r.speedup_vs_vendor:.2f}",
                r.tuned_config,
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    text = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    if rows:
        text.append(f"roofline: copy bandwidth {rows[0].copy_gbps:.2f} GB/s on {rows[0].backend}/{rows[0].device}")
    return "\n".join(text)


def as_dicts(rows: list[BenchRow]) -> list[dict[str, object]]:
    return [dataclasses.asdict(r) for r in rows]
