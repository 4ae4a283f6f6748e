"""asv suite: every op x dtype x shape case x {tuned, default, vendor}, on every backend that loads.

Device time comes from ``kernels.timing.measure`` (the tuner's and ``losstune bench``'s timing
function), reported by ``track_`` benchmarks with units, with GB/s and % of the copy roofline (as a ratio of
medians, and paired round by round as ``losstune bench --report`` takes it).

Why the measuring happens in ``setup_cache``: asv starts a fresh process per benchmark x parameter
combination, and each would pay for importing torch and JIT-compiling the kernels (seconds) to
time a few milliseconds of work. ``setup_cache`` runs once per asv run, in its own process, and
measures every case with tuned, default, vendor and the roofline's copy interleaved round by
round, so drift on a shared host hits the four alike and their ratios are from one run. The
``track_`` benchmarks report its numbers. A correctness check against the float64 reference runs before any case is
timed, and ``setup`` refuses (fails the benchmark) a case whose kernel was wrong, so a wrong kernel
cannot post a fast number. The full timing (median, p20, p80, runs) and the accelerator's identity,
which asv's result files have no field for, are written beside the run under
``results/asv-meta/<machine>/<commit>.json``.

This module imports nothing heavy at import time: asv imports it in every one of those processes.
"""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import statistics
import subprocess
import time
from pathlib import Path


def _env_list(name: str, default: list[str]) -> list[str]:
    """A subset of the suite from the environment (e.g. for a quick pre-merge gate); asv passes the
    environment through to discovery and to every benchmark process alike."""
    value = os.environ.get(name)
    return [v.strip() for v in value.split(",") if v.strip()] if value else default


OPS = _env_list("LOSSTUNE_ASV_OPS", ["mse", "l1", "kl_div", "kl_div-log"])  # kl_div-log: log_target=True
DTYPES = _env_list("LOSSTUNE_ASV_DTYPES", ["float32", "float16", "bfloat16"])
# "<numel> <reduction>": none sends a full gradient; mean sends the 0-d gradient autograd produces.
SHAPES = _env_list("LOSSTUNE_ASV_SHAPES", ["2^16 none", "2^22 none", "2^22 mean"])
CONFIGS = _env_list("LOSSTUNE_ASV_CONFIGS", ["tuned", "default", "vendor"])

ROUNDS = 3  # interleaved rounds per case
MIN_TIME_S = 0.05  # per config per round
VENDOR_SLACK = 4.0


def _backends() -> list[str]:
    """Backends worth trying here, decided without importing torch (see the module docstring).

    ``setup_cache`` then loads each for real; one that does not load has its benchmarks skipped.
    The Triton interpreter is a correctness backend and is never timed.
    """
    forced = os.environ.get("LOSSTUNE_ASV_BACKENDS")
    if forced:
        return [b.strip() for b in forced.split(",") if b.strip()]
    found = ["cpu"]
    if os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi"):
        found.append("cuda")
    if importlib.util.find_spec("torch_npu") is not None:
        found.append("npu")
    return found


BACKENDS = _backends()


def key(backend: str, op: str, dtype: str, shape: str, config: str) -> str:
    return "|".join((backend, op, dtype, shape, config))


def _case(op: str, dtype: str, shape: str):  # -> tuner.problems.Case
    from tuner.problems import build_cases

    numel, reduction = shape.split()
    (case,) = build_cases((op,), (dtype,), (numel,), (reduction,))
    return case


def _copy_probe(timing, device_name: str, nbytes: int) -> tuple[object | None, int]:
    """``timing.copy_probe``'s (run, bytes) for a working set of ``nbytes``, or (None, 0) on a
    commit whose timing module predates it."""
    probe = getattr(timing, "copy_probe", None)
    return probe(device_name, nbytes) if probe is not None else (None, 0)


def _measure_case(
    backend: str, op: str, dtype: str, shape: str, device_name: str, min_time_s: float, rounds: int
) -> dict[str, dict]:
    from kernels import dispatch, timing
    from kernels.accuracy import mismatch, ulps_for

    case = _case(op, dtype, shape)
    device = timing.backend_device(backend)
    g, x, t = case.inputs(device)
    out = case.out_like(x)
    tuned = case.phase_one(g, x, t, out, backend)
    default = case.phase_one(g, x, t, out, backend, tuned.space.default)
    launch = dispatch.run  # what a public call launches through (a plan's launcher where it has one)
    vendor = case.baseline()
    ref = case.reference(g, x, t)
    described = {
        "tuned": f"{tuned.config.short()} from {tuned.config_source}",
        "default": default.config.short(),
        "vendor": "torch eager (SEMANTICS.md baseline)",
    }
    errors: dict[str, str | None] = {}
    for name, ex in (("tuned", tuned), ("default", default)):
        out.fill_(float("nan"))
        launch(ex)
        errors[name] = mismatch(out, ref)
    # A wrong baseline is no baseline either; torch computes 16-bit cases in 16-bit steps and so
    # rounds a little wider than our kernels' bar (1.1-1.5x seen), hence 4x our bar for it.
    errors["vendor"] = mismatch(vendor(g, x, t).to(case.dtype), ref, VENDOR_SLACK * ulps_for(case.dtype))
    runs = {"tuned": lambda _: launch(tuned), "default": lambda _: launch(default), "vendor": lambda _: vendor(g, x, t)}
    nbytes = timing.bytes_moved(case.read_tensors(g, x, t), out)
    # The roofline is torch's copy at the same working set (half read, half written): these hosts'
    # last-level caches hold the smaller cases whole. Where the commit's timing module has
    # copy_probe, the copy is one more entry in the case's shuffled rounds, so host drift hits the
    # kernels and their yardstick alike (the bench report's rule since results/performance.md,
    # section 25). asv runs this suite against older commits too: before copy_probe the copy is
    # timed once per working set and cached for the process (copy_bandwidth, its old signature).
    copy_run, copy_bytes = _copy_probe(timing, device_name, nbytes)
    if copy_run is not None:
        runs["copy"] = copy_run
    samples: dict[str, list[float]] = {name: [] for name in runs}
    round_medians: dict[str, list[float]] = {name: [] for name in runs}
    order = [name for name in runs if errors.get(name) is None]
    rng = random.Random(0)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            result = timing.measure(runs[name], device, min_time_s=min_time_s)
            samples[name].extend(result.samples)
            round_medians[name].append(result.median_s)
    if copy_run is not None:
        copy_bps = copy_bytes / statistics.median(round_medians["copy"])
    else:
        copy_bps = timing.copy_bandwidth(device_name, max(4096, nbytes // 2))
    results = {}
    for name in ("tuned", "default", "vendor"):
        paired = (
            _paired_pct(nbytes, round_medians[name], copy_bytes, round_medians["copy"])
            if copy_run is not None and errors[name] is None
            else []
        )
        entry: dict[str, object] = {
            "config": described[name],
            "error": errors[name],
            "bytes": nbytes,
            "roofline_gbps": copy_bps / 1e9,
        }
        if errors[name] is None:
            pooled = timing.summarize(samples[name])
            seconds = statistics.median(round_medians[name])
            pct = 100 * nbytes / seconds / copy_bps
            entry.update(
                seconds=seconds,
                p20_s=pooled.p20_s,
                p80_s=pooled.p80_s,
                runs=len(pooled.samples),
                gbps=nbytes / seconds / 1e9,
                roofline_pct=pct,
                # Round by round, as `losstune bench --report` takes it since results/performance.md
                # section 45: each round's kernel over the copy timed in that round, then the median.
                # A commit without copy_probe has one copy for the process: the same as roofline_pct.
                roofline_pct_rounds=paired,
                roofline_paired_pct=statistics.median(paired) if paired else pct,
            )
        results[key(backend, op, dtype, shape, name)] = entry
    return results


def _paired_pct(nbytes: int, kernel_s: list[float], copy_bytes: int, copy_s: list[float]) -> list[float]:
    """Each round's % of the roofline: the kernel's GB/s over the copy's, both timed in that round.

    tuner.bench.bench_case takes the same ratio; it is not imported from there because asv runs this
    suite against older commits, whose tuner.bench has no such function."""
    return [100 * (nbytes / k) / (copy_bytes / c) for k, c in zip(kernel_s, copy_s, strict=True)]


def _root() -> Path:
    """The repository asv runs from (benchmarks run in a temporary directory)."""
    return Path(os.environ.get("ASV_CONF_DIR") or Path(__file__).resolve().parents[1])


def _commit() -> str:
    """asv sets ASV_COMMIT when it builds a commit; with --python=same it does not (asv 0.6), and
    the tree being measured is the checkout's HEAD (set ASV_COMMIT yourself to say otherwise)."""
    commit = os.environ.get("ASV_COMMIT")
    if commit:
        return commit
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=_root(), capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _write_meta(meta: dict, root: Path) -> None:
    """results/asv-meta/<machine>/<commit>.json, written whole or not at all."""
    from tuner.freeze import write_atomic

    write_atomic(root / "results" / "asv-meta" / str(meta["host"]["machine"]) / f"{meta['commit']}.json", meta)


def measure_all(
    ops: list[str] = OPS,
    dtypes: list[str] = DTYPES,
    shapes: list[str] = SHAPES,
    backend_names: list[str] = BACKENDS,
    *,
    min_time_s: float = MIN_TIME_S,
    rounds: int = ROUNDS,
    root: Path | None = None,
) -> dict:
    """Measure every case on every backend that loads; write the meta file; return asv's cache."""
    from kernels import backends, timing
    from tuner import machine

    start = time.time()
    results: dict[str, dict] = {}
    copy: dict[str, dict] = {}
    loaded = []
    for backend in backend_names:
        ok, why = backends.probe(backend)
        if not ok:
            copy[backend] = {"error": why}
            continue
        loaded.append(backend)
        device = str(timing.backend_device(backend))
        copy[backend] = {"device": backends.get(backend).facts().name}
        for op in ops:
            for dtype in dtypes:
                for shape in shapes:
                    results.update(_measure_case(backend, op, dtype, shape, device, min_time_s, rounds))
    meta = {
        "commit": _commit(),
        "env": os.environ.get("ASV_ENV_NAME", "unknown"),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_s": round(time.time() - start, 1),
        "host": machine.describe(),
        "backends": copy,
        "results": results,
    }
    _write_meta(meta, root or _root())
    return {"loaded": loaded, "results": results}


class LossBackward:
    params = (BACKENDS, OPS, DTYPES, SHAPES, CONFIGS)
    param_names = ["backend", "op", "dtype", "shape", "config"]
    timeout = 3600  # setup_cache measures the whole suite

    def setup_cache(self) -> dict:
        return measure_all()

    def setup(self, cache: dict, backend: str, op: str, dtype: str, shape: str, config: str) -> None:
        if backend not in cache["loaded"]:
            raise NotImplementedError(f"backend {backend!r} does not load here")  # asv: skipped
        entry = cache["results"][key(backend, op, dtype, shape, config)]
        if entry["error"] is not None:
            raise AssertionError(f"{config} {op} {dtype} {shape} is wrong: {entry['error']}")
        self.entry = entry

    def track_time(self, cache: dict, *params: str) -> float:
        return self.entry["seconds"]

    track_time.unit = "seconds"

    def track_bandwidth(self, cache: dict, *params: str) -> float:
        return self.entry["gbps"]

    track_bandwidth.unit = "GB/s"

    def track_roofline(self, cache: dict, *params: str) -> float:
        return self.entry["roofline_pct"]

    track_roofline.unit = "%"

    def track_roofline_paired(self, cache: dict, *params: str) -> float:
        """The median of each round's % (kernel over the copy timed beside it). track_roofline, the
        ratio of the two medians, is kept as it was so its series across commits does not step."""
        return self.entry["roofline_paired_pct"]

    track_roofline_paired.unit = "%"
