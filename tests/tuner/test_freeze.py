"""Frozen tables: atomic and versioned, the lookup chain, corrupt and stale files skipped, shipped configs valid."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import warnings
from pathlib import Path

import pytest
import torch

from kernels import backends, frozen, tiling
from kernels.executor import ProblemKey
from kernels.modes import GradKind, Layout, Op, Reduction, Variant
from kernels.tiling import DeviceFacts, Tiling, cuda_space
from tuner.freeze import _umask, write_atomic
from tuner.problems import Case, InputLayout
from tuner.restamp import probe_case

CONFIGS = Path(frozen.__file__).parent / "configs"


def _space_and_key(bucket: int = 16) -> tuple[object, ProblemKey]:
    case = Case(Op.MSE, torch.float32, (1 << bucket,), Reduction.NONE)
    g, x, t = case.inputs("cpu")
    ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
    return ex.space, ex.key


def _entry(key: ProblemKey, space: object, bucket: int, config: Tiling, backend: str = "cpu") -> dict[str, object]:
    return {
        "op": key.op.value,
        "dtype": key.dtype,
        "bucket": bucket,
        "grad_kind": key.grad_kind.value,
        "layout": key.layout.value,
        "reduction_kind": key.reduction_kind,
        "config": config.to_dict(),
        "space_hash": space.hash,
        "kernel_hash": frozen.kernel_hash(backend, key.op.value),
    }  # type: ignore[attr-defined]


def _write(
    root: Path,
    entries: list[dict[str, object]],
    common: dict[str, object] | None = None,
    device: str = "dev",
    backend: str = "cpu",
) -> None:
    write_atomic(
        frozen.config_path(backend, device, root), {"schema_version": 1, "entries": entries, "common": common or {}}
    )
    frozen.reset()


def test_lookup_order_exact_nearest_common_default(tmp_path: Path) -> None:
    space, key = _space_and_key(16)
    a = Tiling(tile=256, cores=1, variant=Variant.STRIDED)
    b = Tiling(tile=1024, cores=2, variant=Variant.FLAT)
    c = Tiling(tile=65536, cores=2, variant=Variant.FLAT)
    _write(tmp_path, [_entry(key, space, 16, a), _entry(key, space, 20, b)], {"mse": _entry(key, space, 0, c)})
    assert frozen.lookup("cpu", "dev", key, space, tmp_path) == (a, "frozen dev.json [exact 2^16]")
    key18 = ProblemKey(key.op, key.dtype, 19, key.grad_kind, key.layout, key.reduction_kind)
    assert frozen.lookup("cpu", "dev", key18, space, tmp_path)[1] == "frozen dev.json [nearest 2^20]"
    other = ProblemKey(key.op, key.dtype, 16, GradKind.SCALAR, Layout.CONTIGUOUS, "reduced")
    assert frozen.lookup("cpu", "dev", other, space, tmp_path) == (c, "frozen dev.json [best common]")
    assert frozen.lookup("cpu", "nodev", key, space, tmp_path) is None  # no table: the backend default


def test_nearest_orders_other_buckets_by_log2_distance_ties_in_table_order(tmp_path: Path) -> None:
    """The lookup's nearest step and the probes that replay it share this ordering: the problem's
    own bucket, another problem's entries and a bucket that is not a whole number are no candidates."""
    space, key = _space_and_key(16)
    tiles = (256, 1024, 4096, 16384, 65536)
    a, b, c, d, e = (Tiling(tile=t, cores=1, variant=Variant.FLAT) for t in tiles)
    other_op = _entry(key, space, 17, a) | {"op": Op.L1.value}
    entries = [_entry(key, space, 20, a), _entry(key, space, 16, b), _entry(key, space, 13, c)]
    entries += [_entry(key, space, 19, d), _entry(key, space, "x", e), other_op]  # type: ignore[arg-type]
    _write(tmp_path, entries)
    table = frozen.load("cpu", "dev", tmp_path)
    assert [x["bucket"] for x in frozen.nearest(table, key)] == [13, 19, 20]
    at18 = ProblemKey(key.op, key.dtype, 18, key.grad_kind, key.layout, key.reduction_kind)
    # 20 and 16 tie: 20 comes first in the table
    assert [x["bucket"] for x in frozen.nearest(table, at18)] == [19, 20, 16, 13]
    assert frozen.lookup("cpu", "dev", at18, space, tmp_path) == (d, "frozen dev.json [nearest 2^19]")


def test_two_tables_are_read_step_by_step_most_specific_first(tmp_path: Path) -> None:
    """A chip's own table (tuned there) before its tier's (tuned on another chip of the tier): its
    exact entry wins, but the tier's exact entry still beats the chip's nearest bucket or common
    config, and with no chip table the tier's is read alone, as before."""
    space, key = _space_and_key(16)
    chip, tier = ("dev-chip", "dev")
    a, b, c, d = (Tiling(tile=t, cores=1, variant=Variant.FLAT) for t in (256, 1024, 4096, 16384))
    _write(tmp_path, [_entry(key, space, 16, a), _entry(key, space, 18, b)], {"mse": _entry(key, space, 0, d)}, tier)
    assert frozen.lookup("cpu", (chip, tier), key, space, tmp_path) == (a, "frozen dev.json [exact 2^16]")
    _write(tmp_path, [_entry(key, space, 16, c), _entry(key, space, 22, c)], {"mse": _entry(key, space, 0, c)}, chip)
    assert frozen.lookup("cpu", (chip, tier), key, space, tmp_path) == (c, "frozen dev-chip.json [exact 2^16]")
    at18 = ProblemKey(key.op, key.dtype, 18, key.grad_kind, key.layout, key.reduction_kind)
    assert frozen.lookup("cpu", (chip, tier), at18, space, tmp_path) == (b, "frozen dev.json [exact 2^18]")
    at20 = ProblemKey(key.op, key.dtype, 20, key.grad_kind, key.layout, key.reduction_kind)
    assert frozen.lookup("cpu", (chip, tier), at20, space, tmp_path)[1].startswith("frozen dev-chip.json [nearest 2^22")
    other = ProblemKey(key.op, key.dtype, 16, GradKind.SCALAR, Layout.CONTIGUOUS, "reduced")
    assert frozen.lookup("cpu", (chip, tier), other, space, tmp_path) == (c, "frozen dev-chip.json [best common]")
    assert frozen.lookup("cpu", (tier,), other, space, tmp_path) == (d, "frozen dev.json [best common]")


def test_nearest_bucket_tuned_on_another_space_is_used_when_legal(tmp_path: Path) -> None:
    space, key = _space_and_key(10)
    b = Tiling(tile=1024, cores=1, variant=Variant.FLAT)
    other_space = _entry(key, space, 20, b) | {"space_hash": "0" * 16}  # e.g. another layout's knobs
    _write(tmp_path, [other_space])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not stale: a nearest entry is from another problem by design
        assert frozen.lookup("cpu", "dev", key, space, tmp_path) == (b, "frozen dev.json [nearest 2^20]")
    illegal = other_space | {"config": Tiling(tile=1024, cores=64, variant=Variant.FLAT).to_dict()}
    _write(tmp_path, [illegal])
    assert frozen.lookup("cpu", "dev", key, space, tmp_path) is None  # not a point of this space


def test_a_config_carried_to_a_smaller_problem_keeps_its_default_core_count(tmp_path: Path) -> None:
    space, key = _space_and_key(10)  # 1024 elements: the CPU default runs one thread
    assert space.default.cores == 1
    tuned_big = Tiling(tile=16384, cores=2, variant=Variant.FLAT)
    _write(tmp_path, [_entry(key, space, 16, tuned_big)], {"mse": _entry(key, space, 20, tuned_big)})
    config, source = frozen.lookup("cpu", "dev", key, space, tmp_path)
    assert config == Tiling(tile=16384, cores=1, variant=Variant.FLAT)
    assert source == "frozen dev.json [nearest 2^16, cores capped at 1]"
    big_space, big_key = _space_and_key(20)
    key_22 = ProblemKey(big_key.op, big_key.dtype, 22, big_key.grad_kind, big_key.layout, big_key.reduction_kind)
    assert frozen.lookup("cpu", "dev", key_22, big_space, tmp_path) == (tuned_big, "frozen dev.json [nearest 2^16]")


def test_a_config_carried_to_a_larger_problem_keeps_its_tuned_core_count(tmp_path: Path) -> None:
    """CUDA's default stops at 4 programs per SM, so a 2^24 entry tuned at 8 per SM, carried to 2^26,
    must keep its 8: capped at the default, the carry took half the tuned programs (an H200's 16-bit
    rows ran at 4 per SM). The size-blind common config is still capped."""
    facts = DeviceFacts("cuda", "h200", 132)
    small = cuda_space(facts, (Variant.FLAT, Variant.STRIDED), 1 << 24)
    big = cuda_space(facts, (Variant.FLAT, Variant.STRIDED), 1 << 26)
    assert big.default.cores == 528
    key = ProblemKey(Op.MSE, "bfloat16", 24, GradKind.FULL, Layout.CONTIGUOUS, "none")
    tuned = Tiling(tile=4096, cores=1056, variant=Variant.FLAT, num_warps=8)
    common = Tiling(tile=8192, cores=1056, variant=Variant.FLAT, num_warps=8)
    entries = [_entry(key, small, 24, tuned, "cuda")]
    _write(tmp_path, entries, {"mse": _entry(key, small, 0, common, "cuda")}, backend="cuda")
    at26 = dataclasses.replace(key, bucket=26)
    assert frozen.lookup("cuda", "dev", at26, big, tmp_path) == (tuned, "frozen dev.json [nearest 2^24]")
    at20 = dataclasses.replace(key, bucket=20)
    space20 = cuda_space(facts, (Variant.FLAT, Variant.STRIDED), 1 << 20)
    capped = dataclasses.replace(tuned, cores=space20.default.cores)
    carried = (capped, "frozen dev.json [nearest 2^24, cores capped at 528]")
    assert frozen.lookup("cuda", "dev", at20, space20, tmp_path) == carried
    other = dataclasses.replace(key, dtype="float16")
    assert frozen.lookup("cuda", "dev", other, big, tmp_path)[1] == "frozen dev.json [best common, cores capped at 528]"
    no_bucket = {k: v for k, v in _entry(key, small, 24, tuned, "cuda").items() if k != "bucket"}
    _write(tmp_path, [no_bucket], backend="cuda")  # no distance to anything: never a nearest bucket
    assert frozen.lookup("cuda", "dev", at26, big, tmp_path) is None


def test_a_streamed_contiguous_config_runs_only_on_problems_at_least_as_large_as_its_own(tmp_path: Path) -> None:
    """Below its bucket, and through the size-blind common config, a streamed config of the
    contiguous loop would run unstreamed, a point no study measured (1.10-1.36x the default's time
    for KL's 0-d common config at 2^16-2^22 on the Zen 3, results/performance.md section 77): the default runs,
    and the source names the entry passed over."""
    space, key = _space_and_key(20)
    assert not space.default.stream
    streamed = Tiling(tile=256, cores=2, variant=Variant.FLAT, prefetch=2, stream=True)
    _write(tmp_path, [_entry(key, space, 23, streamed)], {"mse": _entry(key, space, 0, streamed)})
    at = {b: ProblemKey(key.op, key.dtype, b, key.grad_kind, key.layout, key.reduction_kind) for b in (22, 23, 26)}
    assert frozen.lookup("cpu", "dev", at[26], space, tmp_path) == (streamed, "frozen dev.json [nearest 2^23]")
    assert frozen.lookup("cpu", "dev", at[23], space, tmp_path) == (streamed, "frozen dev.json [exact 2^23]")
    smaller = frozen.lookup("cpu", "dev", at[22], space, tmp_path)
    assert smaller == (space.default, "default [dev.json nearest 2^23 streams]")
    assert not frozen.is_exact(smaller[1])
    scalar = ProblemKey(key.op, key.dtype, 26, GradKind.SCALAR, key.layout, "reduced")
    common = frozen.lookup("cpu", "dev", scalar, space, tmp_path)
    assert common == (space.default, "default [dev.json best common streams]")
    ordinary = dataclasses.replace(streamed, stream=False)  # an unstreamed entry is carried down as ever
    _write(tmp_path, [_entry(key, space, 23, ordinary)], {"mse": _entry(key, space, 0, ordinary)})
    assert frozen.lookup("cpu", "dev", at[22], space, tmp_path) == (ordinary, "frozen dev.json [nearest 2^23]")
    assert frozen.lookup("cpu", "dev", scalar, space, tmp_path) == (ordinary, "frozen dev.json [best common]")


def test_a_carried_config_keeps_the_streaming_of_a_default_that_streams(tmp_path: Path) -> None:
    """The transposed walk's default streams from 16 MiB of out on: an entry tuned on a smaller,
    cached out that stored ordinarily does not switch that off on a larger problem, and a streamed
    one carried down stores as the smaller problem's default does: unlike the contiguous loop's, a
    walk's tile is its column blocks' width whatever the stores (here the default's tile; a taller
    one carried down is the next test's)."""
    facts = backends.get("cpu").facts()
    small = tiling.cpu_transposed_space(facts, 1 << 20, 1 << 22)  # 4 MiB out: default stores ordinarily
    large = tiling.cpu_transposed_space(facts, 1 << 24, 1 << 26)  # 64 MiB: default streams
    assert not small.default.stream and large.default.stream
    key = ProblemKey(Op.KL_DIV, "float16", 22, GradKind.SCALAR, Layout.TRANSPOSED, "reduced")
    ordinary = Tiling(tile=tiling.CPU_TRANSPOSED_TILE, cores=1, variant=Variant.STRIDED)
    streamed = dataclasses.replace(ordinary, stream=True)
    _write(tmp_path, [_entry(key, small, 22, ordinary), _entry(key, small, 25, streamed)])
    at = {b: ProblemKey(key.op, key.dtype, b, key.grad_kind, key.layout, key.reduction_kind) for b in (20, 23)}
    above = frozen.lookup("cpu", "dev", at[23], large, tmp_path)
    assert above == (streamed, "frozen dev.json [nearest 2^22, streamed as the default]")
    below = frozen.lookup("cpu", "dev", at[20], small, tmp_path)
    assert below == (ordinary, "frozen dev.json [nearest 2^22]")
    _write(tmp_path, [_entry(key, small, 25, streamed)])
    assert frozen.lookup("cpu", "dev", at[20], small, tmp_path) == (
        ordinary,
        "frozen dev.json [nearest 2^25, not streamed]",
    )


def test_a_transposed_walk_carried_to_a_smaller_problem_takes_the_default_tile(tmp_path: Path) -> None:
    """The tile is the width of the walk's column blocks: a smaller problem has fewer of them to share
    among the cores at the same tile (a 16-bit walk's 32768-word tile is all of 2^16), and the AVX2
    table's tall tiles carried from 2^22 ran at 1.05-1.51x the default's time at 2^16 on the Zen 3
    (results/performance.md, section 78). Carried up, and in the contiguous loop, a tile stands."""
    facts = DeviceFacts("cpu", "x86_64-avx2", 2)  # a host whose walk offers the tall tiles
    tiles = (4096, 16384, 32768)
    small = tiling.cpu_transposed_space(facts, 1 << 16, 1 << 18, tiles)
    big = tiling.cpu_transposed_space(facts, 1 << 23, 1 << 25, tiles)
    key = ProblemKey(Op.MSE, "float32", 21, GradKind.FULL, Layout.TRANSPOSED, "none")
    tall = Tiling(tile=32768, cores=2, variant=Variant.STRIDED)
    _write(tmp_path, [_entry(key, small, 21, tall)], {"mse/transposed": _entry(key, small, 0, tall)})
    at = {b: ProblemKey(key.op, key.dtype, b, key.grad_kind, key.layout, key.reduction_kind) for b in (16, 23)}
    down = dataclasses.replace(tall, tile=small.default.tile, cores=small.default.cores)
    assert small.default.tile == 4096 and down in small
    carried = frozen.lookup("cpu", "dev", at[16], small, tmp_path)
    assert carried[0] == down and carried[1].startswith("frozen dev.json [nearest 2^21")
    assert "tile 4096 as the default" in carried[1]
    up = frozen.lookup("cpu", "dev", at[23], big, tmp_path)
    assert up[0].tile == 32768 and "tile" not in up[1]
    other = ProblemKey(key.op, key.dtype, 23, GradKind.SCALAR, key.layout, "reduced")  # no entry: the common one
    assert frozen.lookup("cpu", "dev", other, big, tmp_path)[0].tile == 4096  # size-blind: never larger
    flat, flat_key = _space_and_key(16)
    wide = Tiling(tile=65536, cores=1, variant=Variant.FLAT)
    assert wide in flat and wide.tile != flat.default.tile
    _write(tmp_path, [_entry(flat_key, flat, 20, wide)])
    assert frozen.lookup("cpu", "dev", flat_key, flat, tmp_path) == (wide, "frozen dev.json [nearest 2^20]")
    gpu = cuda_space(DeviceFacts("cuda", "h200", 132), (Variant.FLAT, Variant.STRIDED), 1 << 16)
    block = Tiling(tile=4096, cores=gpu.default.cores, variant=Variant.STRIDED, num_warps=4)
    assert block in gpu and block.tile != gpu.default.tile  # a Triton program's block: no column walk
    _write(tmp_path, [_entry(key, gpu, 21, block, "cuda")], backend="cuda")
    assert frozen.lookup("cuda", "dev", at[16], gpu, tmp_path) == (block, "frozen dev.json [nearest 2^21]")


def test_the_carry_rules_are_the_spaces_own(tmp_path: Path) -> None:
    """The lookup takes its loop rules from the space (tiling.Carry), not from the layout: the CPU
    loops' spaces name them, a CUDA space has none, and the same entry carried through a space whose
    rule is swapped comes out as that rule says. The rule is not part of the space's hash."""
    facts = DeviceFacts("cpu", "x86_64-avx2", 2)
    assert tiling.cpu_space(facts, (Variant.FLAT,), 1 << 16).carry == tiling.Carry(streamed_whole=True)
    assert tiling.cpu_transposed_space(facts, 1 << 16, 1 << 18).carry == tiling.Carry(sized=("tile",))
    assert cuda_space(DeviceFacts("cuda", "h200", 132), (Variant.FLAT,), 1 << 16).carry == tiling.Carry()
    space, key = _space_and_key(20)
    plain, sized = (dataclasses.replace(space, carry=c) for c in (tiling.Carry(), tiling.Carry(sized=("tile",))))
    assert plain.hash == sized.hash == space.hash
    streamed = Tiling(tile=256, cores=2, variant=Variant.FLAT, prefetch=2, stream=True)
    _write(tmp_path, [_entry(key, space, 23, streamed)])
    at22 = dataclasses.replace(key, bucket=22)
    assert frozen.lookup("cpu", "dev", at22, space, tmp_path) == (
        space.default,
        "default [dev.json nearest 2^23 streams]",
    )
    unstreamed = (dataclasses.replace(streamed, stream=False), "frozen dev.json [nearest 2^23, not streamed]")
    assert frozen.lookup("cpu", "dev", at22, plain, tmp_path) == unstreamed  # the carry before section 77
    resized = dataclasses.replace(streamed, tile=4096, stream=False)
    assert frozen.lookup("cpu", "dev", at22, sized, tmp_path) == (
        resized,
        "frozen dev.json [nearest 2^23, tile 4096 as the default, not streamed]",
    )
    with pytest.raises(ValueError, match=r"Carry.sized: expected knobs of Tiling .* got \['width'\]"):
        tiling.Carry(sized=("width",))


def test_a_table_read_across_a_write_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window functools.cache left open: a read of the old file that another thread's write
    and reset overtook (made to land inside the read here) is its caller's, not the next call's."""
    space, key = _space_and_key(16)
    old, new = (Tiling(tile=t, cores=1, variant=Variant.FLAT) for t in (256, 1024))
    _write(tmp_path, [_entry(key, space, 16, old)])
    parse = json.loads

    def overtaken(text: str, **kw: object) -> object:
        monkeypatch.setattr(frozen.json, "loads", parse)  # once
        _write(tmp_path, [_entry(key, space, 16, new)])  # the other thread's freeze: write, then reset
        return parse(text, **kw)

    monkeypatch.setattr(frozen.json, "loads", overtaken)
    assert frozen.lookup("cpu", "dev", key, space, tmp_path)[0] == old  # the read begun before the write
    assert frozen.lookup("cpu", "dev", key, space, tmp_path)[0] == new
    assert frozen.load("cpu", "dev", tmp_path) is frozen.load("cpu", "dev", tmp_path)  # kept once read whole


def test_corrupt_file_is_reported_and_skipped(tmp_path: Path) -> None:
    space, key = _space_and_key()
    path = frozen.config_path("cpu", "dev", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema_version": 1, "entries": [')
    frozen.reset()
    with pytest.warns(frozen.FrozenConfigWarning, match="unreadable"):
        assert frozen.lookup("cpu", "dev", key, space, tmp_path) is None
    path.write_text(json.dumps({"schema_version": 99, "entries": []}))
    frozen.reset()
    with pytest.warns(frozen.FrozenConfigWarning, match="schema_version 1"):
        assert frozen.lookup("cpu", "dev", key, space, tmp_path) is None


def test_stale_entries_are_reported_and_skipped(tmp_path: Path) -> None:
    space, key = _space_and_key()
    stale_space = _entry(key, space, 16, space.default) | {"space_hash": "0" * 16}
    stale_kernel = _entry(key, space, 16, space.default) | {"kernel_hash": "f" * 16}
    other_python = stale_kernel | {"versions": {"python": "2.7.18"}}  # the hash text differs by minor
    for stale, why in (
        (stale_space, "space hash"),
        (stale_kernel, r"other kernel source; skipped"),
        (other_python, r"other kernel source \(or a legacy hash from Python 2\.7\.18, whose syntax trees"),
    ):
        _write(tmp_path, [stale])
        with pytest.warns(frozen.FrozenConfigWarning, match=why):
            assert frozen.lookup("cpu", "dev", key, space, tmp_path) is None


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    path = tmp_path / "cpu" / "dev.json"
    write_atomic(path, {"schema_version": 1, "entries": []})
    with pytest.raises(TypeError):
        write_atomic(path, {"schema_version": 1, "entries": [object()]})
    assert json.loads(path.read_text()) == {"schema_version": 1, "entries": []}
    assert [p.name for p in path.parent.iterdir()] == ["dev.json"]  # no temporary left behind


def _shipped() -> list[tuple[Path, dict[str, object]]]:
    return [(p, e) for p in sorted(CONFIGS.glob("*/*.json")) for e in json.loads(p.read_text())["entries"]]


def test_configs_are_shipped_for_the_cpu() -> None:
    assert list(CONFIGS.glob("cpu/*.json")), "no frozen CPU table is committed"


@pytest.mark.parametrize(("path", "entry"), _shipped(), ids=lambda v: v.name if isinstance(v, Path) else v["case"])
def test_every_shipped_config_is_in_its_space_and_current(path: Path, entry: dict[str, object]) -> None:
    backend = path.parent.name
    names = backends.get(backend).facts().lookup_names if backends.probe(backend)[0] else ()
    if path.stem not in names:
        pytest.skip(f"{path} is for another device than this host's {backend}")
    case = probe_case(entry, 1 << int(entry["bucket"]))  # the tuner's problem of the entry's kind
    assert case is not None, entry["case"]
    g, x, t = case.inputs(backends.info(backend).device_type)
    with warnings.catch_warnings():
        warnings.simplefilter("error", frozen.FrozenConfigWarning)
        ex = case.phase_one(g, x, t, case.out_like(x), backend)
    assert ex.key.grad_kind.value == entry["grad_kind"] and ex.key.layout.value == entry["layout"]
    assert Tiling.from_dict(entry["config"]) in ex.space
    assert entry["kernel_hash"] == frozen.kernel_hash(backend, str(entry["op"]))
    # The executor says it uses the table, or a more specific one's exact entry for the same problem.
    shadowing = [f"frozen {n}.json [exact" for n in names[: names.index(path.stem)]]
    assert ex.config_source.startswith((f"frozen {path.name}", *shadowing)), ex.config_source
    # An entry the host uses was tuned on the host's space. One a chip's own entry shadows serves
    # the tier's other chips, whose space may lack a knob this chip has (Zen 4's half rows):
    # there it is enough to be a member, as above.
    if ex.config_source.startswith(f"frozen {path.name}"):
        assert entry["space_hash"] == ex.space.hash


def test_a_single_win_is_not_a_common_config() -> None:
    from tuner.freeze import _best_common

    one = {
        "op": "mse",
        "tuned": True,
        "config": {"tile": 4096, "cores": 1},
        "speedup_vs_default": 1.1,
        "kernel_hash": "k",
        "space_hash": "s",
    }
    other = one | {"config": {"tile": 1024, "cores": 2}}
    assert _best_common([one, other, one | {"tuned": False}]) == {}
    assert _best_common([one, one | {"speedup_vs_default": 1.2}, other])["mse"]["config"] == one["config"]
    better = other | {"speedup_vs_default": 1.3}  # two wins each: the better mean speedup, listed second
    assert _best_common([one, one, better, better])["mse"]["config"] == other["config"]
    assert _best_common([better, better, one, one])["mse"]["config"] == other["config"]
    kl, kl_log = one | {"op": "kl_div"}, other | {"op": "kl_div", "log_target": True}
    assert set(_best_common([kl, kl, kl_log, kl_log])) == {"kl_div", "kl_div-log"}  # each its own winner


def test_a_config_frozen_before_a_knob_existed_counts_as_the_same_config_after() -> None:
    """Wins are counted by config, not by how the table spelled it: an entry frozen before the
    walk knobs existed has no defer_out/transpose_in/transpose_row, which means their defaults.
    The README main job on the Zen 5 refroze half of mse's winners with those fields; counted as
    raw JSON, each config then had one win and the op lost its common config."""
    from tuner.freeze import _best_common

    streamed = {"tile": 256, "cores": 2, "variant": "flat", "prefetch": 2, "stream": True}
    old = {
        "op": "mse",
        "tuned": True,
        "config": streamed,
        "speedup_vs_default": 1.2,
        "kernel_hash": "k",
        "space_hash": "s",
    }
    spelled = streamed | {"defer_out": False, "transpose_in": False, "transpose_row": 0}
    new = old | {"config": tiling.Tiling.from_dict(spelled).to_dict(), "kernel_hash": "k2"}
    common = _best_common([old, new])
    assert tiling.Tiling.from_dict(common["mse"]["config"]) == tiling.Tiling.from_dict(streamed)
    assert common["mse"]["kernel_hash"] == "k2"  # the entry this tree's tuner wrote, whose hashes are current
    other = old | {"config": streamed | {"prefetch": 1}}  # a knob at another value is another config
    assert _best_common([old, other]) == {}


def test_the_transposed_layout_has_a_common_config_of_its_own(tmp_path: Path) -> None:
    """Wins in the transposed walk's space are counted apart: three of them used to outvote two
    contiguous wins and leave contiguous problems with a common config they could never use."""
    from tuner.freeze import _best_common

    flat = Tiling(tile=1024, cores=2, variant=Variant.FLAT)
    walk = Tiling(tile=tiling.CPU_TRANSPOSED_TILE, cores=1, variant=Variant.STRIDED)  # common: never streamed
    base = {"op": "mse", "tuned": True, "speedup_vs_default": 1.1, "kernel_hash": "k", "space_hash": "s"}
    wins = [base | {"layout": "contiguous", "config": flat.to_dict()}] * 2
    wins += [base | {"layout": "transposed", "config": walk.to_dict()}] * 3
    common = _best_common(wins)
    assert set(common) == {"mse", "mse/transposed"}
    assert common["mse"]["config"] == flat.to_dict() and common["mse/transposed"]["config"] == walk.to_dict()

    # lookup picks the one of the problem's layout
    contiguous = Case(Op.MSE, torch.float32, (1 << 16,), Reduction.NONE)
    transposed = dataclasses.replace(contiguous, layout=InputLayout.TRANSPOSED)
    keys = {}
    for case in (contiguous, transposed):
        g, x, t = case.inputs("cpu")
        ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
        keys[case.layout] = (ex.key, ex.space)
    table = {
        name: entry | {"kernel_hash": frozen.kernel_hash("cpu", "mse"), "space_hash": keys[layout][1].hash}
        for (name, entry), layout in zip(
            sorted(common.items()), (InputLayout.CONTIGUOUS, InputLayout.TRANSPOSED), strict=True
        )
    }
    _write(tmp_path, [], table)
    far = {layout: dataclasses.replace(key, bucket=12) for layout, (key, _) in keys.items()}
    assert (
        frozen.lookup("cpu", "dev", far[InputLayout.CONTIGUOUS], keys[InputLayout.CONTIGUOUS][1], tmp_path)[0] == flat
    )
    assert (
        frozen.lookup("cpu", "dev", far[InputLayout.TRANSPOSED], keys[InputLayout.TRANSPOSED][1], tmp_path)[0] == walk
    )


def test_kl_with_log_target_has_entries_and_a_common_config_of_its_own(tmp_path: Path) -> None:
    case = Case(Op.KL_DIV, torch.float32, (1 << 16,), Reduction.MEAN, log_target=True)
    g, x, t = case.inputs("cpu")
    log_ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
    plain_ex = Case(Op.KL_DIV, torch.float32, (1 << 16,), Reduction.MEAN).phase_one(g, x, t, case.out_like(x), "cpu")
    assert log_ex.key.log_target and not plain_ex.key.log_target
    assert log_ex.key.label() == plain_ex.key.label()  # one op; the study name adds "-log"
    space, key = plain_ex.space, plain_ex.key
    plain = Tiling(tile=4096, cores=2, variant=Variant.SCALAR_GRAD)
    log = Tiling(tile=256, cores=2, variant=Variant.SCALAR_GRAD, prefetch=1)
    _write(tmp_path, [_entry(key, space, 16, plain), _entry(key, space, 16, log) | {"log_target": True}])
    assert frozen.lookup("cpu", "dev", key, space, tmp_path)[0] == plain
    assert frozen.lookup("cpu", "dev", log_ex.key, space, tmp_path)[0] == log
    _write(tmp_path, [_entry(key, space, 16, plain)])  # an older table: entries without the field are plain KL
    assert frozen.lookup("cpu", "dev", log_ex.key, space, tmp_path) is None
    near = ProblemKey(key.op, key.dtype, 12, key.grad_kind, key.layout, key.reduction_kind, True)
    _write(tmp_path, [], {"kl_div": _entry(key, space, 0, plain), "kl_div-log": _entry(key, space, 0, log)})
    assert frozen.lookup("cpu", "dev", near, space, tmp_path)[0] == log


def test_the_kernel_hash_follows_the_code_not_its_comments() -> None:
    code = (
        'def value(g, x, t, cof):\n    """The formula."""\n    return (x - t) * cof * g\n\n'
        'LIMIT = 4096\n"""A note."""\n'
    )
    same = code.replace("    return", "    # why, in words\n    return").replace('"""A note."""', '"""Reworded."""')
    assert frozen.code_hash(same) == frozen.code_hash(code)
    assert frozen.code_hash(code.replace("4096", "8192")) != frozen.code_hash(code)
    assert frozen.code_hash(code.replace("(x - t) * cof", "(t - x) * cof")) != frozen.code_hash(code)
    assert frozen.kernel_hash("cpu", "mse") != frozen.kernel_hash("cpu", "l1")


def test_stale_by_source_counts_the_entries_tuned_on_other_kernel_code(tmp_path: Path) -> None:
    space, key = _space_and_key(16)
    config = Tiling(tile=1024, cores=2, variant=Variant.FLAT)
    current, other = _entry(key, space, 16, config), _entry(key, space, 20, config) | {"kernel_hash": "0" * 16}
    _write(tmp_path, [current, other, other | {"bucket": 22}])
    table = frozen.load("cpu", "dev", tmp_path)
    assert table is not None and frozen.stale_by_source("cpu", table) == 2


def test_an_entry_with_this_pythons_legacy_hash_is_current(tmp_path: Path) -> None:
    """Tables frozen before the canonical hash hold the legacy one (ast.dump's text): under the
    minor they were hashed on, they keep working, entries and common configs alike."""
    space, key = _space_and_key(16)
    config = Tiling(tile=1024, cores=2, variant=Variant.FLAT)
    legacy = frozen.legacy_kernel_hash("cpu", "mse")
    assert legacy != frozen.kernel_hash("cpu", "mse")
    assert frozen.current_hashes("cpu", "mse") == (frozen.kernel_hash("cpu", "mse"), legacy)
    entry = _entry(key, space, 16, config) | {"kernel_hash": legacy}
    _write(tmp_path, [entry])
    with warnings.catch_warnings():
        warnings.simplefilter("error", frozen.FrozenConfigWarning)
        assert frozen.lookup("cpu", "dev", key, space, tmp_path) == (config, "frozen dev.json [exact 2^16]")
    table = frozen.load("cpu", "dev", tmp_path)
    assert table is not None and frozen.stale_by_source("cpu", table) == 0
    # a common config with the legacy hash serves a bucket without an entry
    _write(tmp_path, [], {"mse": {"op": "mse", "config": config.to_dict(), "kernel_hash": legacy}})
    far = dataclasses.replace(key, bucket=20)
    assert frozen.lookup("cpu", "dev", far, space, tmp_path)[0] == config
    # the legacy hash of other sources is stale, like a canonical hash of other sources; the
    # legacy hash of another op's sources too
    loops, op_module = (Path(frozen.__file__).parent / name for name in frozen.kernel_files("cpu", "mse"))
    edited = frozen.legacy_source_hash(loops.read_text() + "\nUNUSED = 1\n", op_module.read_text())
    for other in (edited, frozen.legacy_kernel_hash("cpu", "l1"), frozen.kernel_hash("cpu", "l1")):
        _write(tmp_path, [entry | {"kernel_hash": other}])
        with pytest.warns(frozen.FrozenConfigWarning, match="other kernel source"):
            assert frozen.lookup("cpu", "dev", key, space, tmp_path) is None
        assert frozen.stale_by_source("cpu", frozen.load("cpu", "dev", tmp_path)) == 1


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600])
def test_an_atomic_write_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path, mode: int) -> None:
    """mkstemp's temporary is 0600, and the rename kept it: a shared checkout's tables and reports
    became readable by their writer alone after one freeze or report."""
    path = tmp_path / "cpu" / "dev.json"
    write_atomic(path, "{}\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()  # a new file: as open() makes one
    path.chmod(mode)
    write_atomic(path, {"schema_version": 1, "entries": []})
    assert stat.S_IMODE(path.stat().st_mode) == mode and json.loads(path.read_text())["entries"] == []
    old = os.umask(0o027)
    try:
        assert _umask() == 0o027
        write_atomic(tmp_path / "new.txt", "x")
        assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
    finally:
        os.umask(old)
