"""Package hygiene: the fixed package names resolve to this repo; importing kernels stays light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["kernels", "tuner", "dashboards"])
def test_packages_resolve_to_this_repo(name: str) -> None:
    module = __import__(name)
    assert Path(module.__file__).resolve().parent == ROOT / name


def test_import_kernels_loads_no_optional_stack() -> None:
    code = (
        "import sys, kernels\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('triton', 'torch_npu', 'optuna', 'numba'))\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == ""
