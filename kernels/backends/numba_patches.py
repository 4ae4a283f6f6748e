"""A faster copy propagation for numba's compiler: the same result, without its quadratic copying.

numba's ``ir_utils.copy_propagate`` (the data flow that finds which variables are copies of which,
run by the parfor pass and ``simplify`` on every ``parallel=True`` function and again on each
parfor's body) iterates ``out_b = gen_b | (in_b - kill_b)`` to a fixed point and, to tell whether
a round changed anything, snapshots every block's set of copies with ``copy.deepcopy`` each round.
The sets hold ``(lhs, rhs)`` tuples of variable names, so the deepcopy walks every tuple of every
block's set every round: for the CPU backend's largest walks (the reduce walk with its checked
twin, hundreds of blocks after inlining) that copying was most of the compile. Measured on the
Zen 4 VM (results/performance.md, section 116): a fresh process's first KL log_target call on a
summed layout took 32.2 s with numba's function and 19.2 s with this one, and
test_checked_scale's reduce-lanes test (float32, cache off) 143 s and 80 s.

The replacement is numba's function (0.60 through 0.68.1, unchanged in all) with two edits that
change nothing it returns:
- the snapshot copies each block's set (``set(v)``) rather than deep-copying it: the snapshot is
  only compared for equality with the next, and str tuples are immutable, so the comparison and
  the round count are the same;
- ``init_copy_propagate_data``'s ``assigned`` (the names a block's own copies assign) is computed
  once a block rather than once for each copy of the program: it does not depend on the copy.
The in/out sets it returns are equal to numba's, so every pass after it sees the same IR and the
compiled code is the same, byte for byte (tests/kernels/test_numba_patches.py checks both on real
loops). The compiled-loop cache's entries and the frozen tables' kernel hashes stay valid.

It is installed only where numba's two functions are exactly the source it was written against
(a digest of their text) and ``parfor`` still holds numba's own; anywhere else numba is left as
it is, and ``state()`` says why (``losstune doctor`` prints it). ``LOSSTUNE_NUMBA_PATCHES=0`` leaves
numba alone too (read when installing: the CPU backend installs it at import); a value other than
0 or 1 leaves it alone with a warning naming the variable.
"""

from __future__ import annotations

import hashlib
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ENABLE_ENV = "LOSSTUNE_NUMBA_PATCHES"

# The first 16 hex digits of the sha256 of the source of ir_utils.copy_propagate followed by that of
# init_copy_propagate_data: the text numba 0.60.0 through 0.68.1 ship (each checked from its wheel,
# 2026-12-07).
_NUMBA_SOURCE_SHA256 = "7e885590b506fb65"


@dataclass(frozen=True)
class State:
    installed: bool
    why: str  # a line for doctor: what is in place, or why numba's own functions are


_state: State | None = None
_theirs: Callable[..., Any] | None = None  # numba's copy_propagate, as install found it


def _source_digest(*fns: object) -> str:
    return hashlib.sha256("".join(inspect.getsource(fn) for fn in fns).encode()).hexdigest()[:16]  # type: ignore[arg-type]


def _init_copy_propagate_data(blocks: dict[int, Any], entry: int, typemap: dict[str, Any]) -> tuple[Any, ...]:
    """numba's ir_utils.init_copy_propagate_data with ``assigned`` computed once a block."""
    from numba.core import ir_utils

    gen_copies, extra_kill = ir_utils.get_block_copies(blocks, typemap)
    all_copies: set[tuple[str, str]] = set()
    for copies in gen_copies.values():
        all_copies |= copies
    kill_copies = {}
    for label, gen_set in gen_copies.items():
        kill_copies[label] = set()
        assigned = {lhs for lhs, _ in gen_set}  # numba builds this again for every copy below
        for lhs, rhs in all_copies:
            if lhs in extra_kill[label] or rhs in extra_kill[label]:
                kill_copies[label].add((lhs, rhs))
            # a copy is killed if it is not in this block and lhs or rhs are assigned in this block
            if (lhs, rhs) not in gen_set and (lhs in assigned or rhs in assigned):
                kill_copies[label].add((lhs, rhs))
    in_copies = {label: all_copies.copy() for label in blocks}
    in_copies[entry] = set()
    out_copies = {label: gen_copies[label] | (in_copies[label] - kill_copies[label]) for label in blocks}
    out_copies[entry] = gen_copies[entry]
    return gen_copies, all_copies, kill_copies, in_copies, out_copies


def copy_propagate(blocks: dict[int, Any], typemap: dict[str, Any]) -> tuple[dict[int, Any], dict[int, Any]]:
    """numba's ir_utils.copy_propagate (in_b = intersect(predec(B)), out_b = gen_b | (in_b - kill_b),
    to a fixed point), each round's snapshot taken by copying the sets rather than deep-copying them."""
    from numba.core import config
    from numba.core.analysis import compute_cfg_from_blocks

    cfg = compute_cfg_from_blocks(blocks)
    entry = cfg.entry_point()
    gen_copies, _, kill_copies, in_copies, out_copies = _init_copy_propagate_data(blocks, entry, typemap)

    def snapshot() -> dict[int, set[tuple[str, str]]]:
        return {label: set(copies) for label, copies in out_copies.items()}

    old_point = None
    new_point = snapshot()
    while old_point != new_point:
        for label in blocks:
            if label == entry:
                continue
            predecs = [i for i, _ in cfg.predecessors(label)]
            in_copies[label] = out_copies[predecs[0]].copy()
            for p in predecs:
                in_copies[label] &= out_copies[p]
            out_copies[label] = gen_copies[label] | (in_copies[label] - kill_copies[label])
        old_point = new_point
        new_point = snapshot()
    if config.DEBUG_ARRAY_OPT >= 1:
        print("copy propagate out_copies:", out_copies)
    return in_copies, out_copies


def install() -> State:
    """Put ``copy_propagate`` in numba's place (ir_utils and the parfor pass, which imported it by
    name), once a process; where it cannot be known to compute what numba's does, leave numba's."""
    global _state, _theirs
    if _state is not None:
        return _state
    from numba.core import ir_utils
    from numba.parfors import parfor

    from kernels.backends.cpu_loops import _forced

    theirs = _theirs = ir_utils.copy_propagate
    try:
        switch = _forced(ENABLE_ENV)
    except ValueError as bad:
        # Not an error: numba's own function compiles the same code, only slower.
        _state = State(False, f"numba's own copy propagation: {bad}")
        warnings.warn(_state.why, RuntimeWarning, stacklevel=2)
        return _state
    if switch is False:
        _state = State(False, f"numba's own copy propagation ({ENABLE_ENV}=0)")
    elif parfor.copy_propagate is not theirs:
        _state = State(False, "numba's own copy propagation: numba.parfors.parfor holds another copy_propagate")
    else:
        try:
            digest = _source_digest(theirs, ir_utils.init_copy_propagate_data)
        except (OSError, TypeError) as unread:
            digest = f"unreadable ({unread})"
        if digest != _NUMBA_SOURCE_SHA256:
            _state = State(
                False,
                f"numba's own copy propagation: its source ({digest}) is not the one the patch was "
                f"written against ({_NUMBA_SOURCE_SHA256})",
            )
        else:
            ir_utils.copy_propagate = copy_propagate
            parfor.copy_propagate = copy_propagate
            _state = State(True, f"numba's copy propagation without its deepcopies ({ENABLE_ENV}=0 turns it off)")
    return _state


def state() -> State:
    """What ``install`` did in this process (it installs if nothing has yet)."""
    return install()
