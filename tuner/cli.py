"""The losstune command line: a thin layer over tuner's library API.

Subcommands: tune, show, freeze, bench, doctor, machine, dashboard. ``main(argv) -> int`` parses into the library's
option dataclasses and calls it; every subcommand is tested with argv.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

# the parser's --grain choices and help (torch is loaded with tuner.problems already)
from kernels.timing import Grain
from tuner.goals import LARGE_NUMEL, pow2
from tuner.problems import ALL_OPS, SUITES, Case, build_cases, suite

if TYPE_CHECKING:  # tuner.study loads optuna: imported where a command needs it
    from tuner.study import TuneOptions


def _cases(args: argparse.Namespace) -> list[Case]:
    if args.suite:
        return suite(args.suite)
    shapes = tuple(args.shape or ("2^20",))
    return build_cases(
        tuple(args.op or ALL_OPS),
        tuple(args.dtype or ("float32",)),
        shapes,
        tuple(args.reduction or ("none",)),
        tuple(args.layout or ("contiguous",)),
    )


def _add_case_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", action="append", help="mse, l1, kl_div or kl_div-log (repeatable; default all three)")
    p.add_argument("--dtype", action="append", help="float32, float16, bfloat16 (repeatable; default float32)")
    p.add_argument("--shape", action="append", help="N, 2^K or AxBxC (repeatable; default 2^20)")
    p.add_argument(
        "--reduction",
        action="append",
        help="none (full gradient) or mean/sum (0-d gradient, as autograd sends); repeatable",
    )
    p.add_argument(
        "--layout",
        action="append",
        help=(
            "contiguous, broadcast (target one row over 64), transposed (64-row transposed views) or"
            " summed (KL: input one row against target's 64, its gradient summed back); repeatable,"
            " default contiguous (with --report: the rows the report prints, default all, each layout's"
            " timed beside its contiguous partner)"
        ),
    )
    p.add_argument("--suite", choices=sorted(SUITES), help="a named set of cases instead of the five above")
    p.add_argument("--backend", default="cpu", help="cpu, cuda, npu (default cpu)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")


# bench's rounds, and the table's after `tune --bench` (whose --rounds are the finalists')
BENCH_ROUNDS = 3
# the rounds of the report's rows a goal reads a ratio from (bench --report --goal-rounds)
GOAL_ROUNDS = 7

SKIP_BUSY_HELP = (
    "freeze no decision taken on a busy host (its finalists waited for a CPU 10%% of their run or more,"
    " or a 1-minute load >= CPUs + 1: the one `show` marks): the"
    " table keeps its entry for that problem; each one left out is named in a warning"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="losstune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    tune = sub.add_parser("tune", help="sweep tile sizes and core counts with optuna")
    _add_case_args(tune)
    tune.add_argument("--sampler", default="auto", choices=("auto", "tpe", "random", "grid"))
    tune.add_argument(
        "--trials",
        type=int,
        help=(
            "measured trials per study, shared by all its workers; draws that break a constraint"
            " do not count (default: the whole grid, or 40)"
        ),
    )
    tune.add_argument("--timeout", type=float, help="seconds per study")
    tune.add_argument("--seed", type=int, default=0)
    tune.add_argument("--storage", help="journal file path (default results/tuning/journal.log) or postgresql://...")
    tune.add_argument("--study-name", help="override the derived study name (one case only)")
    tune.add_argument("--min-time", type=float, default=0.05, help="seconds of timed runs per measurement")
    tune.add_argument(
        "--finalists",
        type=int,
        help="best trials timed again beside the default and the table's entry (default 3)",
    )
    tune.add_argument(
        "--rounds",
        type=int,
        help=(
            "interleaved rounds the finalists, and a kept winner's confirmation, are timed in; more"
            " resolve a smaller win on a noisy host, at their cost in time (default 5, at least 3:"
            " the gate never keeps a winner in fewer)"
        ),
    )
    tune.add_argument(
        "--grain",
        choices=[g.value for g in Grain],
        help=(
            "how the finalists' rounds take their samples: run (each run's together) or launch (one"
            f" launch of each run in turn); default: launch on the CPU from {pow2(LARGE_NUMEL)} elements,"
            " where the working sets are out of every cache, run below and on a GPU"
        ),
    )
    tune.add_argument(
        "--resweep",
        action="store_true",
        help=(
            "count none of a resumed study's earlier trials (after an edit neither the kernel nor the"
            " space hash sees); later resumes keep the boundary. Pass it once, with no worker on the"
            " study: workers join, and a run cut short resumes, without it (with it, their trials too"
            " would be history)"
        ),
    )
    tune.add_argument(
        "--freeze", action="store_true", help="freeze this run's winners after tuning (the table keeps its others)"
    )
    tune.add_argument("--skip-busy", action="store_true", help=SKIP_BUSY_HELP)
    tune.add_argument("--config-dir", type=Path, help="frozen-config root (default kernels/configs)")
    tune.add_argument("--bench", action="store_true", help="print the bench table after freezing")
    tune.add_argument("--no-progress", action="store_true")

    show = sub.add_parser("show", help="studies, their best configs and their lead over the default")
    show.add_argument("--storage")
    show.add_argument("--json", action="store_true")

    freeze = sub.add_parser("freeze", help="write winners into kernels/configs/<backend>/<device>.json")
    freeze.add_argument("--storage")
    freeze.add_argument("--backend", default="cpu")
    freeze.add_argument("--device", help="device name (default: the only one in storage)")
    freeze.add_argument("--config-dir", type=Path, help="frozen-config root (default kernels/configs)")
    freeze.add_argument("--skip-busy", action="store_true", help=SKIP_BUSY_HELP)
    freeze.add_argument(
        "--study",
        action="append",
        dest="studies",
        metavar="NAME",
        help="freeze this study alone (repeatable; default: every finished study of the device);"
        " the table keeps its other entries",
    )

    restamp = sub.add_parser(
        "restamp",
        help="carry stale entries over a kernel edit where their kernels compile to the same IR"
        " (CPU: numba's LLVM IR; CUDA: Triton's TTIR, compiled here without a GPU)",
    )
    restamp.add_argument(
        "tables", type=Path, nargs="*", help="CPU or CUDA tables to check (default: the CPU tables this host reads)"
    )
    restamp.add_argument("--dry-run", action="store_true", help="report the verdicts, write nothing")
    restamp.add_argument("--storage", help="tuning storage whose studies follow (default the journal)")
    restamp.add_argument(
        "--target",
        help="compile for this CPU instead of the host (znver3, znver4, sapphirerapids, znver5, rocketlake): restamps"
        " the tables it reads",
    )

    bench = sub.add_parser("bench", help="tuned vs default vs vendor: median, spread, GB/s, %% roofline")
    _add_case_args(bench)
    bench.add_argument("--min-time", type=float, default=0.1)
    bench.add_argument("--rounds", type=int, default=BENCH_ROUNDS)
    bench.add_argument(
        "--report",
        action="store_true",
        help="size sweep 2^10..2^26 (unless --shape), plus broadcast and strided forms at 2^22 (or each --layout-size)",
    )
    bench.add_argument("--out", type=Path, help="with --report: also write the rows as JSON and the table as text")
    bench.add_argument(
        "--layout-size",
        action="append",
        help="with --report: a size (N or 2^K) of the sweep at which the broadcast, transposed and summed rows"
        " are timed (repeatable; default 2^22)",
    )
    bench.add_argument(
        "--goal-rounds",
        "--layout-rounds",  # its name before the 2^24-and-up rows took these rounds too
        dest="goal_rounds",
        type=int,
        help="with --report: rounds of the rows a goal reads a ratio from: the broadcast and transposed rows,"
        " each timed beside its contiguous partner, and the contiguous rows of 2^24 and up, beside the copy"
        f" (default {GOAL_ROUNDS})",
    )

    goals = sub.add_parser("goals", help="the performance goals table and every miss, read off bench --report files")
    goals.add_argument("reports", type=Path, nargs="+", help="report.json files written by bench --report --out")
    goals.add_argument("--json", action="store_true", help="print the misses as JSON")
    goals.add_argument("--fail-on-miss", action="store_true", help="exit 1 when any goal is not met")
    goals.add_argument(
        "--across",
        action="store_true",
        help="the reports are runs of one machine: each goal missed in any of them, with its reading in each",
    )

    sub.add_parser("doctor", help="which backends load here, their device facts, and why not")

    jit = sub.add_parser("cache", help="the CPU backend's compiled-loop cache: where, how big, prune or clear it")
    what = jit.add_mutually_exclusive_group()
    what.add_argument("--prune", action="store_true", help="remove least recently used entries down to the cap")
    what.add_argument("--clear", action="store_true", help="remove every entry")

    dash = sub.add_parser("dashboard", help="build the static dashboard from results/, or serve it on loopback")
    dsub = dash.add_subparsers(dest="action", required=True)
    build = dsub.add_parser("build", help="write the site (default results/dashboard); opens from file://")
    build.add_argument("--results", type=Path, default=Path("results"), help="results folder to read")
    build.add_argument("--out", type=Path, help="site folder (default <results>/dashboard)")
    build.add_argument("--storage", help="tuning storage (default <results>/tuning/journal.log)")
    serve = dsub.add_parser("serve", help="serve the built site over HTTP")
    serve.add_argument("--site", type=Path, default=Path("results/dashboard"))
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    serve.add_argument("--port", type=int, default=8000)

    mach = sub.add_parser("machine", help="the asv machine name (accelerator included) and host facts")
    mach.add_argument("--json", action="store_true", help="print every host fact as JSON")
    mach.add_argument("--register", action="store_true", help="also run `asv machine --yes` under that name")
    return parser


def _elements(text: str, name: str) -> int:
    """A 1-d size, N or B^E elements (tuner.problems.parse_shape), or a ValueError naming ``name``."""
    from tuner.problems import parse_shape

    try:
        shape = parse_shape(text)
    except ValueError:
        shape = ()
    if len(shape) != 1 or shape[0] < 1:
        raise ValueError(f"{name}: expected N or 2^K elements, got {text!r}")
    return shape[0]


def _positive(value: float | int | None, name: str) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{name}: expected a positive number, got {value}")


def _loadable(backend: str) -> None:
    """A backend name the registry knows (else the registry's own error) that loads on this host:
    otherwise the reason, named by --backend, before anything is measured or written."""
    from kernels import backends

    ok, why = backends.probe(backend)
    if not ok:
        raise ValueError(f"--backend: expected a backend that loads here (`losstune doctor` lists them), got {why}")


def _seed(seed: int | None) -> None:
    if seed is not None and not 0 <= seed < 2**32:  # numpy's, which the samplers take
        raise ValueError(f"--seed: expected a whole number from 0 to 2^32 - 1, got {seed}")


def _tune(args: argparse.Namespace) -> int:
    from tuner.study import ALPHA, TuneOptions, fewest_rounds, shared_journals

    _loadable(args.backend)
    _seed(args.seed)
    _positive(args.trials, "--trials")
    _positive(args.timeout, "--timeout")
    _positive(args.min_time, "--min-time")
    _positive(args.finalists, "--finalists")
    if args.rounds is not None and args.rounds < fewest_rounds():
        raise ValueError(
            f"--rounds: expected {fewest_rounds()} or more (in fewer the gate can never keep a winner:"
            f" its chance stays above {ALPHA}), got {args.rounds}"
        )
    cases = _cases(args)
    if args.study_name and len(cases) != 1:
        raise ValueError(f"--study-name: expected exactly one case, got {len(cases)}")
    if args.skip_busy and not args.freeze:
        raise ValueError("--skip-busy: expected with --freeze (it says what a freeze leaves out), got it alone")
    opts = TuneOptions(
        backend=args.backend,
        sampler=args.sampler,
        trials=args.trials,
        timeout_s=args.timeout,
        seed=args.seed,
        storage=args.storage,
        study_name=args.study_name,
        min_time_s=args.min_time,
        resweep=args.resweep,
        grain=None if args.grain is None else Grain(args.grain),
        # the two the tuner times its decision with, where given (TuneOptions holds the defaults)
        **{k: v for k, v in (("finalists", args.finalists), ("rounds", args.rounds)) if v is not None},
    )
    # the studies and the freeze read the journal through one storage (study.shared_journals): its
    # opening replays the whole log, 3.4 s for the committed one, once per study before
    with shared_journals():
        return _tune_cases(args, cases, opts)


def _tune_cases(args: argparse.Namespace, cases: list[Case], opts: TuneOptions) -> int:
    from tuner.study import log, tune_case

    results = []
    bar = None
    redirect: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if not args.no_progress and not args.json:
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        bar = tqdm(unit="trial", file=sys.stderr, dynamic_ncols=True)
        # the tuner's warnings (a busy host, a resume that sweeps again) on lines of their own, not
        # glued to the bar's
        redirect = logging_redirect_tqdm(loggers=[log])
    with redirect:
        for case in cases:
            if bar is not None:
                bar.set_description(case.label())
            results.append(tune_case(case, opts, progress=(bar.update if bar is not None else None)))
    if bar is not None:
        bar.close()
    if args.json:
        print(json.dumps([r.row() for r in results], indent=1, default=str))
    else:
        print(_summary([r.row() for r in results]))
    if args.freeze:
        from kernels import backends
        from tuner.freeze import freeze

        # This host's studies: a shared journal may hold other devices' too (another vector tier).
        device = backends.get(args.backend).facts().name
        # The studies this run decided, and no other: a study in the journal re-swept without
        # --freeze stays out of the table until it is frozen by name.
        path, n = freeze(
            args.storage,
            args.backend,
            device,
            root=args.config_dir,
            skip_busy=args.skip_busy,
            studies=[r.name for r in results],
        )
        print(f"froze {n} entries into {path}")
    if args.bench:
        return _bench(args)
    return 0


def _frozen_as(final: dict[str, object]) -> str:
    """What --freeze writes: the default, a tuned config, or the table's incumbent held because no
    contender beat it beyond the control's chance (tuner.study.settle); "(unconfirmed)" where a
    winner the first rounds kept did not stand in the fresh rounds it was timed in again
    (tuner.study.confirm), so the baseline stayed; "never: loops forced" where it was taken with CPU
    loop switches set (its ``cpu_forced``), which --freeze never writes (tuner.freeze)."""
    from tuner.study import held

    if final.get("cpu_forced"):
        return f"never: loops forced by {final['cpu_forced']}"
    label = "incumbent" if held(final) else "tuned" if final.get("tuned") else "default"
    return label + (" (unconfirmed)" if final.get("confirmed") is False else "")


def _control_spread(final: dict[str, object]) -> str:
    """A decision's control (its baseline's config timed again) over the baseline: the spread of
    its round ratios, the floor the gate read the winner against, and "(launch)" where its rounds
    were timed launch by launch (a spread read so is narrower at the same noise: performance.md,
    section 101); "-" for a decision taken before the gate had one."""
    from tuner.goals import spread

    ratios = final.get("control_ratios")
    if not isinstance(ratios, list) or not ratios:
        return "-"
    return spread(ratios, ".2f") + (" (launch)" if final.get("grain") == "launch" else "")


def _summary(rows: list[dict[str, object]]) -> str:
    from tuner.study import busy_host

    head = (
        "case",
        "trials",
        "failures",
        "best config",
        "x default",
        "noise",
        "control",
        "chance",
        "frozen",
        "x vendor",
    )
    lines = [head]
    for r in rows:
        cand = r.get("best_candidate") or {}
        config = " ".join(f"{k}={v}" for k, v in cand.items() if v not in (0, False)) if isinstance(cand, dict) else ""
        fails = ",".join(f"{k}:{v}" for k, v in (r.get("failures") or {}).items()) or "-"  # type: ignore[union-attr]
        lines.append(
            (
                str(r.get("case")),
                str(r.get("trials")),
                fails,
                config,
                f"{1 / (1 - float(r.get('best_candidate_gain', 0.0))):.2f}",
                f"{float(r.get('noise', 0.0)):.1%}",
                _control_spread(r),
                "-" if r.get("chance") is None else f"{float(r['chance']):.3f}",  # type: ignore[arg-type]
                _frozen_as(r) + (" (busy host)" if busy_host(r) else ""),
                f"{float(r.get('speedup_vs_vendor', 0.0)):.2f}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines)


def _show(args: argparse.Namespace) -> int:
    from tuner.study import study_rows

    rows = study_rows(args.storage)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return 0
    if not rows:
        print("no studies in storage")
        return 0
    summary = []
    for r in rows:
        final = r.get("final") if isinstance(r.get("final"), dict) else {}
        summary.append(
            {"case": f"{r.get('backend')}/{r.get('device')} {r.get('case')}", "trials": r["trials"], **final}
        )
    print(_summary(summary))
    return 0


def _freeze(args: argparse.Namespace) -> int:
    from tuner.freeze import freeze

    path, n = freeze(
        args.storage, args.backend, args.device, root=args.config_dir, skip_busy=args.skip_busy, studies=args.studies
    )
    print(f"froze {n} entries into {path}")
    return 0


def _restamp(args: argparse.Namespace) -> int:
    from kernels import frozen
    from tuner.restamp import (
        Comparer,
        GitHistory,
        Outcome,
        format_outcomes,
        host_tables,
        restamp_table,
        target,
        tree_sources,
    )

    to = target(args.target) if args.target else None
    paths = args.tables or [frozen.config_path("cpu", name) for name in host_tables(to)]
    history = GitHistory()
    tree = tree_sources()
    comparer = Comparer(tree, to)  # the tables share their compiles: the tier's entries are mostly the chip's
    for path in paths:
        if not path.exists():
            if args.tables:
                raise ValueError(f"tables: expected an existing CPU or CUDA table, got {path}")
            continue

        def progress(outcome: Outcome, path: Path = path) -> None:  # a compile pair takes seconds: say which
            print(f"{path.name} {outcome.where}: {outcome.verdict.value} {outcome.label}", file=sys.stderr)

        if path.parent.name == "cuda":  # compiled for its GPU by Triton: its own history, tree and comparer
            outcomes = restamp_table(path, dry_run=args.dry_run, storage=args.storage, progress=progress)
        else:
            outcomes = restamp_table(
                path,
                dry_run=args.dry_run,
                storage=args.storage,
                find_sources=history,
                tree=tree,
                progress=progress,
                to=to,
                comparer=comparer,
            )
        print(format_outcomes(path, outcomes, args.dry_run))
    return 0


def _bench(args: argparse.Namespace) -> int:
    from tuner.bench import as_dicts, bench_case, format_table

    if getattr(args, "report", False):  # `tune --bench` reuses this without the report flags
        return _report(args)
    # the report's own flags are refused without it rather than dropped: a user who named an --out
    # file expects it written
    given = ("--out", "out"), ("--layout-size", "layout_size"), ("--goal-rounds", "goal_rounds")
    for flag, name in given:
        if getattr(args, name, None) is not None:
            raise ValueError(f"{flag}: expected only with --report, got {flag} without it")
    _loadable(args.backend)
    if args.command == "bench":  # tune --bench's were checked by tune
        _positive(args.min_time, "--min-time")
        _positive(args.rounds, "--rounds")
    rows = [
        # tune's --rounds are its finalists'; the table after it takes bench's own default
        bench_case(
            c, args.backend, min_time_s=args.min_time, rounds=args.rounds if args.command == "bench" else BENCH_ROUNDS
        )
        for c in _cases(args)
    ]
    print(json.dumps(as_dicts(rows), indent=1) if args.json else format_table(rows))
    from tuner.study import forced_tag

    if forced := forced_tag(args.backend):  # on stderr: the JSON on stdout stays the rows alone
        print(f"losstune {args.command}: CPU loops forced by {forced}: not this host's own loops", file=sys.stderr)
    return 0


def _report(args: argparse.Namespace) -> int:
    import subprocess
    import time

    from tuner import machine
    from tuner.bench import REPORT_LAYOUT_SIZE, REPORT_SIZES, as_dicts, format_report, report_rows, roofline_grain
    from tuner.freeze import git_commit, write_atomic
    from tuner.problems import InputLayout
    from tuner.study import forced_tag

    _loadable(args.backend)
    _positive(args.min_time, "--min-time")
    _positive(args.rounds, "--rounds")
    if args.goal_rounds is None:
        args.goal_rounds = GOAL_ROUNDS
    _positive(args.goal_rounds, "--goal-rounds")
    if not args.shape and not args.suite:
        args.shape = list(REPORT_SIZES)
    if not args.reduction and not args.suite:
        args.reduction = ["none", "mean"]
    # --layout picks the report's rows; each layout row is timed beside its contiguous partner, so
    # the cases are the contiguous ones whatever it names.
    layouts = tuple(InputLayout.parse(x) for x in args.layout) if args.layout else tuple(InputLayout)
    args.layout = None
    cases = _cases(args)
    # A layout row is timed beside its contiguous partner: a size the sweep lacks has none. The
    # default is no promise of rows: a sweep without 2^22 prints none, as before the flag.
    named = [(x, _elements(x, "--layout-size")) for x in args.layout_size or (REPORT_LAYOUT_SIZE,)]
    layout_numels = list(dict.fromkeys(n for _, n in named))  # a size named twice is timed once
    swept = sorted({c.numel for c in cases})
    absent = [x for x, n in named if n not in swept]
    if args.layout_size and absent:
        raise ValueError(
            f"--layout-size: expected sizes of the report's sweep ({', '.join(pow2(n) for n in swept)}),"
            f" got {', '.join(absent)}: add each with --shape"
        )
    start = time.time()
    rows = report_rows(
        cases,
        args.backend,
        min_time_s=args.min_time,
        rounds=args.rounds,
        goal_rounds=args.goal_rounds,
        layouts=layouts,
        layout_numels=layout_numels,
    )
    commit = git_commit()[:7]
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    host = machine.describe()  # once: the header quotes it, the JSON stores it whole
    # the contiguous rows a goal reads the copy from: timed launch by launch on the CPU (bench.roofline_grain)
    by_launch = ", these timed launch by launch" if roofline_grain(args.backend) is Grain.LAUNCH else ""
    # loops other than this host's own (describe's cpu_forced, kernels.backends.cpu.LOOP_SWITCHES)
    forced = forced_tag(args.backend)
    forced_note = f", CPU loops forced by {forced}" if forced else ""
    header = (
        f"losstune bench --report on {host['machine']} ({host['cpu_model']}), "
        f"backend {args.backend}, commit {commit}{' + local changes' if dirty.stdout.strip() else ''}{forced_note}, "
        f"{time.strftime('%Y-%m-%d')}, {time.time() - start:.0f} s\n"
        "medians of interleaved rounds; roofline = torch copy_ at the same working set (half read, half written);"
        f" roofline % and a layout's x over its contiguous partner: the median (min-max) of each round's ratio,"
        f" {args.rounds} rounds, {args.goal_rounds} for the layout rows (at {', '.join(map(pow2, layout_numels))})"
        f" and those of {pow2(LARGE_NUMEL)} and up{by_launch}; torch's tensors of 2 MiB and up on"
        f" {host['torch_pages']}: the vendor allocates its result every call; x vendor out: over PyTorch's own"
        " kernel into a given out (mse's aten kernel; L1 and KL have none: -)"
    )
    table = format_report(rows)
    if args.json:
        print(json.dumps(as_dicts(rows), indent=1))
    else:
        print(header + "\n" + table)
    if args.out:
        payload = {"header": header, "host": host, "commit": commit, "rows": as_dicts(rows)}
        write_atomic(args.out.with_suffix(".json"), payload)
        write_atomic(args.out.with_suffix(".txt"), header + "\n" + table + "\n")
    return 0


def _goals(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from tuner.goals import across, check_rows, evaluate, format_across, format_goals

    reports = []  # (path, header, rows, machine)
    for path in args.reports:  # every file read and checked before anything is printed
        try:
            data = json.loads(path.read_text())
            rows, header = data["rows"], str(data.get("header", ""))
            check_rows(rows)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, KeyError, ValueError) as e:
            raise ValueError(
                f"reports: expected a report.json written by `losstune bench --report --out`, got {path} ({e})"
            ) from e
        host = data.get("host")
        reports.append((path, header, rows, str(host.get("machine", "?")) if isinstance(host, dict) else "?"))
    if args.across:
        named = sorted({machine for *_, machine in reports})
        if len(reports) < 2 or len(named) > 1:
            got = ", ".join(f"{path} ({machine})" for path, _, _, machine in reports)
            raise ValueError(f"reports: --across expected two or more reports of one machine, got {got}")
        verdicts, met = across([rows for _, _, rows, _ in reports])
        if args.json:
            print(json.dumps({"reports": [str(p) for p in args.reports], "verdicts": [asdict(v) for v in verdicts]}))
        else:
            print(f"{len(reports)} reports of {named[0]}:")
            for i, (path, header, _, _) in enumerate(reports, 1):
                print(f"  {i}. {path}: {header.splitlines()[0] if header else '(no header)'}")
            print(format_across(verdicts, met, len(reports)))
        return 1 if args.fail_on_miss and verdicts else 0
    evaluated = [(path, header, evaluate(rows)) for path, header, rows, _ in reports]
    if args.json:
        print(json.dumps({str(path): [asdict(m) for m in misses] for path, _, (_, misses) in evaluated}, indent=1))
    else:
        for path, header, (table, misses) in evaluated:
            print(f"{path}: {header.splitlines()[0] if header else '(no header)'}\n{format_goals(table, misses)}\n")
    return 1 if args.fail_on_miss and any(misses for _, _, (_, misses) in evaluated) else 0


def _doctor(args: argparse.Namespace) -> int:
    from kernels import backends, frozen

    for entry in backends.REGISTRY:
        ok, why = backends.probe(entry.name)
        if ok:
            facts = backends.get(entry.name).facts()
            extra = f", UB {facts.ub_bytes // 1024} KB" if facts.ub_bytes else ""
            tables = f", frozen tables read: {', '.join(facts.lookup_names)}" if len(facts.lookup_names) > 1 else ""
            print(f"{entry.name:17s} loads: device {facts.name}, {facts.cores} cores{extra}{tables}")
            for name in facts.lookup_names:
                table = frozen.load(entry.name, name)
                if table is not None:
                    stale = frozen.stale_by_source(entry.name, table)
                    hint = " (`losstune restamp` checks them)" if stale and entry.name == "cpu" else ""
                    count = f"{len(table.entries)} entries, {stale} stale by kernel source{hint}"
                    print(f"{'':17s} {table.path.name}: {count}")
            if entry.name == "cpu":
                from kernels.backends import numba_patches

                print(f"{'':17s} {_jit_cache_line()}")
                print(f"{'':17s} compile: {numba_patches.state().why}")
                print(f"{'':17s} {_loops_line()}")
        else:
            print(f"{entry.name:17s} does not load: {why}")
    return 0


def _loops_line() -> str:
    """The CPU loop switches' picks on this host (kernels.backends.cpu.LOOP_SWITCHES, each by its
    name less LOSSTUNE_CPU_), and those the environment set."""
    from kernels.backends import cpu

    picks = " ".join(f"{name}={value}" for name, value in cpu.BACKEND.picks().items())
    forced = cpu.forced_tag()
    said = f"forced by {forced}: not this host's own loops" if forced else "none forced (LOSSTUNE_CPU_*)"
    return f"loops: {picks}; {said}"


def _jit_cache_line() -> str:
    from kernels.backends import jit_cache

    if not jit_cache.enabled():
        return f"compiled-loop cache off ({jit_cache.ENABLE_ENV}=0)"
    root, entries, size = jit_cache.usage()
    try:
        cap = f"capped at {jit_cache.max_bytes() / 2**20:.0f} MiB by {jit_cache.MAX_ENV}"
    except ValueError as bad:
        cap = f"not pruned: {bad}"
    return (
        f"compiled-loop cache {root}: {entries} entries, {size / 2**20:.1f} MiB, {cap} "
        f"({jit_cache.DIR_ENV} moves it, {jit_cache.ENABLE_ENV}=0 turns it off)"
    )


def _cache(args: argparse.Namespace) -> int:
    from kernels.backends import jit_cache

    cap = jit_cache.max_bytes()  # a bad LOSSTUNE_JIT_CACHE_MAX_MB is an error before anything is removed
    if args.prune or args.clear:
        try:
            removed, freed = jit_cache.clear() if args.clear else jit_cache.prune(cap)
        except jit_cache.PruneError as partly:
            print(f"losstune cache: error: {partly}", file=sys.stderr)
            return 1
        print(f"removed {removed} entries, {freed / 2**20:.1f} MiB")
    root, entries, size = jit_cache.usage()
    state = "" if jit_cache.enabled() else f" (off: {jit_cache.ENABLE_ENV}=0)"
    print(f"{root}: {entries} entries, {size / 2**20:.1f} MiB of {cap / 2**20:.0f} MiB{state}")
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    from dashboards import site

    if args.action == "build":
        if not args.results.is_dir():  # an empty site would replace the built one
            raise ValueError(
                f"--results: expected a results folder (asv/, tuning/, bench/), got {args.results} (no such folder)"
            )
        pages = site.build(args.out or args.results / "dashboard", args.results, args.storage)
        print(f"wrote {len(pages)} pages: {pages[0].resolve().as_uri()}")
        return 0
    if not 0 < args.port < 2**16:
        raise ValueError(f"--port: expected a TCP port from 1 to 65535, got {args.port}")
    try:
        server = site.serve(args.site, args.host, args.port)
    except FileNotFoundError as e:
        raise ValueError(str(e)) from None
    except OSError as e:  # a name that does not resolve, an address not on this host, a port in use
        where = f"{args.host}:{args.port}"
        raise ValueError(f"--host/--port: expected an address to serve on here, got {where}: {e}") from None
    print(f"serving {args.site} on http://{args.host}:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _machine(args: argparse.Namespace) -> int:
    import subprocess

    from tuner import machine

    facts = machine.describe()
    print(json.dumps(facts, indent=1) if args.json else facts["machine"])
    if args.register:
        # asv's machine file has no accelerator field; the name carries it (tuner/machine.py).
        cmd = [sys.executable, "-m", "asv", "machine", "--yes", "--machine", str(facts["machine"])]
        done = subprocess.run(cmd, capture_output=True, text=True)  # stdout stays the name alone, for $(...)
        if done.returncode:
            raise ValueError(f"asv machine failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return 0


COMMANDS = {
    "tune": _tune,
    "show": _show,
    "freeze": _freeze,
    "restamp": _restamp,
    "bench": _bench,
    "goals": _goals,
    "doctor": _doctor,
    "cache": _cache,
    "machine": _machine,
    "dashboard": _dashboard,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ValueError as e:
        print(f"losstune {args.command}: error: {e}", file=sys.stderr)
        return 2
