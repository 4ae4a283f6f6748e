"""kernels.backends.cpu.LOOP_SWITCHES: the environment variables that make a process run loops other
than its host's own, what each picked (CpuBackend.picks), and which are set (forced_switches)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.backends import cpu, cpu_loops
from tests.helpers import run_fresh

pytestmark = pytest.mark.usefixtures("cpu_backend")

PREFIX = "LOSSTUNE_CPU_"
SOURCES = [Path(cpu.__file__), Path(cpu_loops.__file__)]


def test_every_loop_switch_the_backend_reads_is_listed_and_nothing_else() -> None:
    """A switch added to the loops or the backend without a place in LOOP_SWITCHES would change what
    a process runs with no report, study or freeze knowing: every LOSSTUNE_CPU_ name the two modules
    read is listed, but the table scope (which file a decision goes to, not what runs)."""
    read = {name for path in SOURCES for name in re.findall(r'"(LOSSTUNE_CPU_[A-Z0-9_]+)"', path.read_text())}
    assert read - {cpu.SCOPE_ENV} == set(cpu.LOOP_SWITCHES)
    assert len(set(cpu.LOOP_SWITCHES)) == len(cpu.LOOP_SWITCHES)


def test_picks_name_every_switch_by_its_name_less_the_prefix() -> None:
    picks = cpu.BACKEND.picks()
    assert list(picks) == [name.removeprefix(PREFIX) for name in cpu.LOOP_SWITCHES]
    assert all(value in ("on", "off") for name, value in picks.items() if name not in ("GATHER", "TRANSPOSE_BYTES"))
    assert picks["GATHER"] == str(cpu_loops.GATHER_LANES) and picks["TRANSPOSE_BYTES"] == str(cpu_loops.TRANSPOSE_BYTES)
    assert picks["COARSE"] == ("on" if cpu.BACKEND.coarse else "off")


def test_forced_switches_are_the_listed_ones_set_in_their_order_with_their_values() -> None:
    env = {"LOSSTUNE_CPU_FUSED": "1", "LOSSTUNE_CPU_F16C": "0", "LOSSTUNE_CPU_TABLE_SCOPE": "microarch", "HOME": "/"}
    assert cpu.forced_switches(env) == {"LOSSTUNE_CPU_F16C": "0", "LOSSTUNE_CPU_FUSED": "1"}
    assert cpu.forced_tag(env) == "LOSSTUNE_CPU_F16C=0 LOSSTUNE_CPU_FUSED=1"
    assert cpu.forced_switches({}) == {} and cpu.forced_tag({}) == ""


_PICKS = "import json; from kernels.backends import cpu; print(json.dumps([cpu.BACKEND.picks(), cpu.forced_tag()]))"


def test_a_fresh_process_picks_what_its_switches_say() -> None:
    """Each forced switch moves its own pick (and those that follow from it), in a process that reads
    them at import as every process does; unset, a fresh process picks what this one did."""
    unset = tuple(cpu.LOOP_SWITCHES)
    here = cpu.BACKEND.picks()
    if not cpu.forced_tag():
        assert json.loads(run_fresh(_PICKS, {}, unset)) == [here, ""]
    env = {
        "LOSSTUNE_CPU_CHECKED": "1",  # the twin runs in the loops apart: APART follows
        "LOSSTUNE_CPU_GATHER": "0",
        "LOSSTUNE_CPU_TRANSPOSE_BYTES": "32",  # half-line rows: no half of them to offer
        "LOSSTUNE_CPU_HALF_ROWS": "1",
        "LOSSTUNE_CPU_COARSE": "1",
        "LOSSTUNE_CPU_DEFERRED": "0",
    }
    picks, tag = json.loads(run_fresh(_PICKS, env, unset))
    assert tag == " ".join(f"{name}={env[name]}" for name in cpu.LOOP_SWITCHES if name in env)
    assert (picks["CHECKED"], picks["APART"], picks["GATHER"], picks["COARSE"]) == ("on", "on", "0", "on")
    assert (picks["TRANSPOSE_BYTES"], picks["HALF_ROWS"], picks["DEFERRED"]) == ("32", "off", "off")
    moved = {"CHECKED", "APART", "GATHER", "TRANSPOSE_BYTES", "HALF_ROWS", "COARSE", "DEFERRED", "PAIRED"}
    assert {k: v for k, v in picks.items() if k not in moved} == {k: v for k, v in here.items() if k not in moved}


@pytest.mark.parametrize("switch", ["LOSSTUNE_CPU_F16C", "LOSSTUNE_CPU_GATHER", "LOSSTUNE_CPU_FUSED"])
def test_a_switch_neither_0_nor_1_is_refused_by_name_at_import(switch: str) -> None:
    """A feature switch's typo once ran the host's build without a word; now each switch, feature
    or pick, stops the import with its name, what it takes and what it got."""
    assert set(cpu.FEATURE_SWITCHES) < set(cpu.LOOP_SWITCHES)
    env = {**os.environ, switch: "off"}
    done = subprocess.run(
        [sys.executable, "-c", "import kernels.backends.cpu"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 1
    assert f"ValueError: {switch}: expected 0 or 1, got 'off'" in done.stderr
