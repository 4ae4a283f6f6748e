"""Kernel hashes: what a module computes, hashed alike under every Python minor.

A frozen entry records the hash of the kernel source it was tuned on (kernels.frozen.kernel_hash).
The hash is of the module's syntax tree without docstrings, dumped by :func:`canonical_dump`:
the node's class and every field that holds something, so the fields one Python minor adds empty
(3.12's ``type_params=[]``) or another leaves out (3.13's ``ast.dump`` drops None and empty
fields) do not reach it. The legacy hash (:func:`legacy_code_hash`, tables frozen before the
canonical dump) hashed ``ast.dump``'s text, which differs between minors: an entry hashed under
3.12 read stale under 3.11 and 3.13. It is kept so that such tables keep working where they were
hashed, and so that tuner.restamp can migrate them.

Standard library only, and runnable as a script under any Python 3.10+ (``python
kernels/codehash.py`` reads ``{"loops": text, "ops": {name: text}}`` as JSON on stdin and prints
``{"canonical": {op: hash}, "legacy": {op: hash}}``): tuner.restamp asks another minor for its
legacy hashes that way.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys

# Tags the canonical dump, so that no canonical hash is the legacy hash of any tree under any minor.
_CANONICAL = "losstune-canonical-ast-1\n"


class _DropDocstrings(ast.NodeTransformer):
    """Removes every statement that is a bare string: docstrings, and the notes after constants."""

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        return node


def _tree(source: str) -> ast.AST:
    return _DropDocstrings().visit(ast.parse(source))


def canonical_dump(node: object) -> str:
    """``node`` as text that every Python minor writes alike: a node is its class name and its
    fields in order, leaving out each field that is None or an empty list (an absent optional
    part: 3.12 adds ``type_params=[]`` to every function and class, 3.13's ``ast.dump`` omits such
    fields); a list is its items (None items kept: ``kw_defaults``); anything else (identifiers,
    constants, flags) its ascii(): repr escapes the characters its Unicode database calls
    unprintable, and that database changes between minors. An f-string's literal parts are
    joined first (:func:`_fstring_parts`). Positions (lineno, col_offset) are attributes, not
    fields, and never reach it."""
    if isinstance(node, ast.AST):
        fields = []
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(node, ast.JoinedStr) and name == "values":
                value = _fstring_parts(value)
            if value is None or (isinstance(value, list) and not value):
                continue
            fields.append(f"{name}={canonical_dump(value)}")
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(canonical_dump(item) for item in node)}]"
    return ascii(node)


def _fstring_parts(values: list[ast.AST]) -> list[ast.AST]:
    """An f-string's parts with its literal text joined and empty text dropped: 3.12 ends a format
    spec that holds a field (``f"{x:{fmt}}"``) with an empty ``Constant('')``, which 3.11 and 3.13
    leave out; the string is the same either way."""
    parts: list[ast.AST] = []
    for value in values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if not value.value:
                continue
            if parts and isinstance(parts[-1], ast.Constant) and isinstance(parts[-1].value, str):
                parts[-1] = ast.Constant(parts[-1].value + value.value)
                continue
        parts.append(value)
    return parts


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def code_hash(source: str) -> str:
    """Hash of what a module computes: its syntax tree without docstrings, canonically dumped.
    Comments, docstrings and layout do not reach the tree, so editing them keeps every frozen
    entry; any change to the code (a constant, a line of a loop) changes the hash; the Python
    minor that hashes it does not."""
    return _digest(_CANONICAL + canonical_dump(_tree(source)))


def legacy_code_hash(source: str) -> str:
    """The hash tables held before the canonical dump: of ``ast.dump``'s text of the same tree,
    which differs between Python minors, so it is this Python's legacy hash only."""
    return _digest(ast.dump(_tree(source)))


def source_hash(loops_source: str, op_source: str) -> str:
    """The kernel hash of these two texts (kernels.frozen.kernel_files' contents): the backend's
    loops, then the op's module."""
    return _digest(" ".join(code_hash(text) for text in (loops_source, op_source)))


def legacy_source_hash(loops_source: str, op_source: str) -> str:
    """source_hash with each text's legacy hash: this Python minor's legacy kernel hash."""
    return _digest(" ".join(legacy_code_hash(text) for text in (loops_source, op_source)))


def _main() -> None:
    sources = json.load(sys.stdin)
    loops, ops = sources["loops"], sources["ops"]
    json.dump(
        {
            "python": ".".join(map(str, sys.version_info[:3])),
            "canonical": {op: source_hash(loops, text) for op, text in ops.items()},
            "legacy": {op: legacy_source_hash(loops, text) for op, text in ops.items()},
        },
        sys.stdout,
    )


if __name__ == "__main__":
    _main()
