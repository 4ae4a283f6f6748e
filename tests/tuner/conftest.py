from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def storage(tmp_path: Path) -> str:
    """A fresh embedded journal storage per test."""
    return str(tmp_path / "journal.log")
