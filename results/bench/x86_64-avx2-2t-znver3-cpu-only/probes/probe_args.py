"""What section 82's probes (contig_probe.py, finalists_like.py, blocks.py) read off their command
line: one contiguous case, through the parsers ``losstune`` reads its own flags with
(``tuner.problems.build_cases``), and configs given as KEY=VALUE,... changes to the space's default.
Not part of the package."""

from __future__ import annotations

import dataclasses

from kernels.tiling import Tiling
from tuner.problems import Case, build_cases

# how each key a probe's config may change is read off its text
_KEYS = {"tile": int, "prefetch": int, "stream": lambda s: s == "1"}


def case(op: str, dtype: str, log2: str, reduction: str) -> Case:
    """The contiguous case of 2^LOG2 elements, as ``losstune --op --dtype --shape --reduction`` names it."""
    (only,) = build_cases((op,), (dtype,), (f"2^{log2}",), (reduction,))
    return only


def configs(default: Tiling, specs: list[str]) -> list[Tiling]:
    """The default changed by each spec (``tile=1024,stream=1``), in the order given."""
    changes = [dict(kv.split("=") for kv in spec.split(",")) for spec in specs]
    return [dataclasses.replace(default, **{k: _KEYS[k](v) for k, v in kv.items()}) for kv in changes]
