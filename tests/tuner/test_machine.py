"""tuner.machine: the asv machine name tells hosts apart that run at different speeds.

The real host's facts are read as they are; the two-host cases swap LLVM's answer for another
CPU's (a mocked host, named so in each test), since one machine cannot be two."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from llvmlite import binding as llvm

from kernels.backends import slug
from tuner import machine


def test_microarch_is_the_cpu_numba_compiles_for_on_this_host() -> None:
    expected = llvm.get_host_cpu_name().lower()
    assert machine.microarch() == ("" if expected == "generic" else slug(expected))
    assert machine.describe()["microarch"] == machine.microarch()


def test_describe_stores_the_cpu_loops_picks_and_the_switches_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """What every report and asv run stores with the host: the CPU backend's picks, and the loop
    switches the environment set (the same values as before: only the record moves)."""
    from kernels.backends import cpu

    facts = machine.describe()
    assert facts["cpu_loops"] == cpu.BACKEND.picks() and facts["cpu_forced"] == cpu.forced_switches()
    apart = "1" if cpu.BACKEND.picks()["APART"] == "on" else "0"  # the host's own pick: the loops stay
    want = {**cpu.forced_switches(), "LOSSTUNE_CPU_APART": apart}
    monkeypatch.setenv("LOSSTUNE_CPU_APART", apart)
    assert machine.describe()["cpu_forced"] == want


def test_a_run_under_loop_switches_gets_an_asv_name_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """asv compares a machine's runs alone: a switch's run under the host's name would read as a
    regression on asv's own pages and in ``asv compare``; each set of switches is a name."""
    from kernels.backends import cpu

    for name in cpu.LOOP_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    plain = machine.machine_name()
    assert "forced" not in plain
    monkeypatch.setenv("LOSSTUNE_CPU_APART", "1")
    one = machine.machine_name()
    assert one.startswith(plain + "-forced-") and len(one) == len(plain) + len("-forced-") + 8
    assert machine.describe()["machine"] == one and machine.describe()["cpu_forced"] == {"LOSSTUNE_CPU_APART": "1"}
    assert machine.machine_name({"LOSSTUNE_CPU_APART": "1"}) == one
    assert machine.machine_name({"LOSSTUNE_CPU_APART": "0"}) not in (one, plain)  # another value, another name
    assert machine.machine_name({}) == plain and machine.machine_name({"HOME": "/x"}) == plain


def test_two_mocked_hosts_of_one_tier_get_two_asv_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Xeon and a Zen 4 share the vector tier (and so the frozen table) but not the asv history."""
    names = {}
    for cpu in ("sapphirerapids", "znver4"):
        monkeypatch.setattr(llvm, "get_host_cpu_name", lambda cpu=cpu: cpu)
        names[cpu] = machine.machine_name()
    assert names["sapphirerapids"] != names["znver4"]
    for cpu, name in names.items():
        assert f"-{cpu}-" in name
        assert name.startswith(machine.device_name(platform.machine(), os.cpu_count() or 1))


def test_a_mocked_generic_cpu_leaves_no_empty_part_in_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llvm, "get_host_cpu_name", lambda: "generic")
    name = machine.machine_name()
    assert machine.microarch() == "" and "--" not in name and "generic" not in name


@pytest.mark.parametrize(
    ("setting", "env", "pages"),
    [
        ("always [madvise] never", None, "4 KiB"),  # this host's: torch does not ask
        ("always [madvise] never", "1", "2 MiB"),
        ("always [madvise] never", "0", "4 KiB"),
        ("always [madvise] never", "1x", "4 KiB"),  # c10::utils::check_env: "1" alone, others ignored
        ("always [madvise] never", " 1", "4 KiB"),
        ("always [madvise] never", "yes", "4 KiB"),
        ("[always] madvise never", None, "2 MiB"),  # the kernel gives them unasked
        ("always madvise [never]", "1", "4 KiB"),  # and refuses them asked
    ],
)
def test_torch_pages_reads_the_kernels_mode_and_torchs_variable(
    tmp_path: Path, setting: str, env: str | None, pages: str
) -> None:
    path = tmp_path / "enabled"
    path.write_text(setting + "\n")
    said = machine.torch_pages(path, {} if env is None else {"THP_MEM_ALLOC_ENABLE": env})
    mode = setting.split("[")[1].split("]")[0]
    assert said.startswith(f"{pages} pages (THP {mode}, THP_MEM_ALLOC_ENABLE ")
    assert said.endswith("unset)" if env is None else f"{env!r})")


def test_torch_pages_without_the_kernels_setting_says_unknown(tmp_path: Path) -> None:
    said = machine.torch_pages(tmp_path / "absent", {})
    assert said.startswith("pages unknown") and "absent" in said
    assert machine.describe()["torch_pages"] == machine.torch_pages()  # stored with each report


CHILD = """
import re, sys, torch
from tuner import machine
t = torch.ones(1 << 24)  # 64 MiB, every page touched
kb = int(re.search(r"AnonHugePages:\\s+(\\d+) kB", open("/proc/self/smaps_rollup").read()).group(1))
sys.stdout.write(f"{kb}\\n{machine.torch_pages()}")
"""


@pytest.mark.skipif(
    "(THP madvise," not in machine.torch_pages(),
    reason="needs transparent huge pages in madvise mode, where torch's variable decides",
)
@pytest.mark.parametrize("value", [None, "1", "1x"])
def test_torch_pages_says_what_torchs_allocator_did_in_a_fresh_process(value: str | None) -> None:
    # the installed torch's own reading of the variable: "1x" is warned of and ignored (check_env)
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    env |= {} if value is None else {"THP_MEM_ALLOC_ENABLE": value}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    kb, said = done.stdout.split("\n", 1)
    assert (int(kb) > 0) == said.startswith("2 MiB"), (kb, said)
    assert said.startswith("2 MiB") == (value == "1")
