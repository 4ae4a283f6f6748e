"""Backend selection for tests lives here, not in test bodies: a backend that cannot load is a skip
with its reason (the CPU and the Triton interpreter always load in CI; cuda and npu on device hosts)."""

from __future__ import annotations

import pytest

from kernels import backends

# Order matters: triton-interpret must import triton before any GPU backend could.
CORRECTNESS_BACKENDS = ("cpu", "triton-interpret", "cuda", "npu")


def _require(name: str) -> str:
    ok, why = backends.probe(name)
    if not ok:
        pytest.skip(why)
    return name


@pytest.fixture
def cpu_backend() -> str:
    """For modules that test the CPU loops only: ``pytestmark = pytest.mark.usefixtures("cpu_backend")``."""
    return _require("cpu")


@pytest.fixture(params=CORRECTNESS_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return _require(request.param)


@pytest.fixture
def device(backend: str) -> str:
    return backends.info(backend).device_type


@pytest.fixture(params=("triton-interpret", "cuda"))
def triton_backend(request: pytest.FixtureRequest) -> str:
    """The Triton backends that can load here. Loading the backend first: triton_loops imports
    triton, which must see TRITON_INTERPRET first."""
    return _require(request.param)
