"""`asv continuous` as a pre-merge gate: against a commit whose CPU kernel runs four times (a
deliberate slowdown, made in a throw-away clone and never committed here) it exits 1 and names the
slowed benchmark. asv builds both commits in its own virtualenv (torch from the local wheel), so this is
the slowest test (~1 min here); the suite is cut to one case through LOSSTUNE_ASV_* variables.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SLOW = """    def launcher(self, ex: Executor) -> Launcher | None:
        once = self._launcher_once(ex)  # deliberately slowed for the asv continuous test
        if once is None:
            return None

        def four_times(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor, o: torch.Tensor) -> None:
            for _ in range(4):
                once(g, x, t, o)

        return four_times

    def _launcher_once(self, ex: Executor) -> Launcher | None:
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git history of this checkout")
def test_asv_continuous_flags_a_deliberately_slowed_kernel(tmp_path: Path) -> None:
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)], check=True)
    _git(clone, "config", "user.email", "ci@losstune.invalid")
    _git(clone, "config", "user.name", "asv continuous test")
    cpu = clone / "kernels" / "backends" / "cpu.py"
    text = cpu.read_text()
    # What asv times (dispatch.run, as a public call launches) goes through the plan's launcher.
    marker = "    def launcher(self, ex: Executor) -> Launcher | None:\n"
    assert text.count(marker) == 1, "the CPU backend's launcher moved: update this test's patch"
    cpu.write_text(text.replace(marker, SLOW))
    _git(clone, "commit", "-qam", "slow: the CPU launcher runs its loop four times")

    env = {
        **os.environ,
        "HOME": str(tmp_path),  # asv keeps its machine file in ~; keep the user's untouched
        "PIP_NO_CACHE_DIR": "1",  # the env's wheels are local files: a cache of them only costs disk
        "LOSSTUNE_ASV_OPS": "mse",
        "LOSSTUNE_ASV_DTYPES": "float32",
        "LOSSTUNE_ASV_SHAPES": "2^15 none",  # one thread by default: a busy host cannot stall a parallel region
        "LOSSTUNE_ASV_CONFIGS": "default",
    }
    asv = [sys.executable, "-m", "asv"]
    subprocess.run([*asv, "machine", "--yes", "--machine", "gate"], cwd=clone, env=env, check=True, capture_output=True)
    # Each commit is measured once, in about a second; on this shared host a slow spell in that
    # second can make the base read as slow as the slowed commit (CI once saw 11.6 us against the
    # usual 6.6). asv continuous measures both commits afresh on every call, so each further call is
    # another independent look, taken only after a miss: a gate that cannot see a 4x loop misses all three.
    try:
        for _attempt in range(3):
            gate = subprocess.run(
                [*asv, "continuous", "--machine", "gate", "-b", "track_time", "--factor", "1.3", "HEAD~1", "HEAD"],
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                timeout=1200,
            )
            out = gate.stdout + gate.stderr
            if gate.returncode == 1:
                break
    finally:
        # asv's env is 1.6 GB (torch alone 0.75) and nothing after this reads it; asv's output is in
        # `out`. Session 67's CI ran out of disk creating it; pyproject's tmp_path retention does the rest.
        shutil.rmtree(clone / ".asv" / "env", ignore_errors=True)
    assert gate.returncode == 1, out[-4000:]
    assert "PERFORMANCE DECREASED" in out or "SOME BENCHMARKS HAVE CHANGED SIGNIFICANTLY" in out, out[-4000:]
    # asv 0.6 prints a table: | Change | Before | After | Ratio | Benchmark (Parameter) |
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in out.splitlines() if "track_time(" in line
    ]
    flagged = [r for r in rows if r and r[0] == "+"]
    assert flagged, out[-4000:]
    ratio = float(flagged[0][3])
    # Only the direction is asserted: the flagged ratio is a timing on a shared host (CI once read
    # 3.0 for the 2x slowdown this test made before, the base at 11.4 us against its usual 6.6), and
    # asv flags a row only above --factor, so a flagged row of this benchmark is the gate working.
    # Four runs, not two: the call's fixed cost (validation, planning) is not repeated, so a 2x
    # kernel is less than 2x the call; a slowdown further past --factor 1.3 leaves a slow spell in
    # the base's one second less room to hide it.
    assert ratio > 1.3, f"asv flagged the slowed kernel at ratio {ratio}, under its --factor 1.3: {flagged[0]}"
    assert "'mse', 'float32', '2^15 none', 'default'" in flagged[0][4]
