"""The kernel hash: the same under every Python minor (the legacy one was not), blind to docstrings."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernels import codehash

# A function (3.12 gives it type_params=[]), a class, a None default, a keyword-only argument
# (kw_defaults) and an f-string whose format spec holds fields (3.12 ends it with Constant('')).
CODE = (
    'def value(g, x, t, cof, *, scale=None) -> float:\n    """The formula."""\n    return (x - t) * cof * g\n\n'
    "class Note:\n    width = 8\n    label = f\"{width:{'>'}{width}}\\u00e9\"\n"
)
# Computed with pyenv's 3.10.13, 3.11.7, 3.12.1 and 3.13.0 running kernels/codehash.py: one canonical
# hash, and a legacy hash of each minor's own (3.10 and 3.11 dump alike).
CANONICAL = "47d0fcda6372a624"
LEGACY = {(3, 10): "e758c9776e6a0964", (3, 11): "e758c9776e6a0964", (3, 12): "625d2d95efcb8a65"}
LEGACY[(3, 13)] = "1d65c5b2aa54f102"


def test_the_canonical_hash_is_pinned_and_the_legacy_one_is_this_minors() -> None:
    assert codehash.code_hash(CODE) == CANONICAL
    minor = sys.version_info[:2]
    if minor in LEGACY:
        assert codehash.legacy_code_hash(CODE) == LEGACY[minor]
    assert len(set(LEGACY.values())) == 3  # what the canonical dump is for


def test_the_canonical_dump_leaves_out_empty_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    """3.12's type_params=[] on every function and class changes ast.dump's text, and 3.13's
    ast.dump leaves out None and empty fields; neither reaches the canonical dump."""
    tree = ast.parse(CODE)
    before, legacy = codehash.canonical_dump(tree), ast.dump(tree)
    for cls in (ast.FunctionDef, ast.ClassDef):
        if "type_params" not in cls._fields:
            monkeypatch.setattr(cls, "_fields", (*cls._fields, "type_params"))
    grown = ast.parse(CODE)
    for node in ast.walk(grown):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            node.type_params = []  # type: ignore[attr-defined]
    assert ast.dump(grown) != legacy and "type_params=[]" in ast.dump(grown)
    assert codehash.canonical_dump(grown) == before
    shrunk = ast.parse(CODE)
    for node in ast.walk(shrunk):
        for name in node._fields:
            if getattr(node, name, 0) is None:
                delattr(node, name)  # as if the field never existed (returns, type_comment, kind)
    assert codehash.canonical_dump(shrunk) == before
    assert "type_comment" not in before and "kind" not in before and "decorator_list" not in before
    # None items of a list stay (a keyword-only argument without a default), and so does what a
    # left-out None field tells apart: a bare return is not a return of None
    kw_only = codehash.canonical_dump(ast.parse("def f(*, a, b=1):\n    pass\n"))
    assert "kw_defaults=[None, Constant(value=1)]" in kw_only
    bare, none = (codehash.canonical_dump(ast.parse(f"def f():\n    {r}\n")) for r in ("return", "return None"))
    assert "Return()" in bare and "Return(value=Constant())" in none


def test_an_fstrings_empty_text_and_split_text_dump_alike() -> None:
    """3.12 ends a format spec that holds fields with Constant(''); text split in two parts is the same string."""
    tree = ast.parse(CODE)
    before = codehash.canonical_dump(tree)
    specs = [n.format_spec for n in ast.walk(tree) if isinstance(n, ast.FormattedValue) and n.format_spec]
    assert specs
    for spec in specs:
        spec.values.append(ast.Constant(""))
    assert codehash.canonical_dump(tree) == before
    split = ast.parse('f"ab{x}"')
    (joined,) = [n for n in ast.walk(split) if isinstance(n, ast.JoinedStr)]
    joined.values[:1] = [ast.Constant("a"), ast.Constant("b")]
    assert codehash.canonical_dump(split) == codehash.canonical_dump(ast.parse('f"ab{x}"'))
    assert codehash.canonical_dump(ast.parse('f"ab{x}"')) != codehash.canonical_dump(ast.parse('f"a{x}b"'))


def test_constants_dump_as_ascii_and_the_code_still_counts() -> None:
    """ascii(), not repr(): repr escapes what its Unicode database calls unprintable, which changes
    between minors."""
    assert codehash.canonical_dump(ast.Constant("\u00e9\u0378")) == "Constant(value='\\xe9\\u0378')"
    assert codehash.code_hash("x = '\u00e9'") != codehash.code_hash("x = 'e'")
    assert codehash.code_hash("x = 1") != codehash.code_hash("x = 1.0")  # constants by type too
    minus = "def f(a, b):\n    return a - b\n"
    assert codehash.code_hash(minus) != codehash.code_hash(minus.replace("a - b", "b - a"))
    assert codehash.code_hash('x = 1\n"""A note."""\n# a comment\n') == codehash.code_hash("x = (\n    1\n)\n")
    assert codehash.code_hash(CODE) != codehash.legacy_code_hash(CODE)  # tagged: never a legacy hash


def test_the_script_prints_both_hashes_of_each_op_as_its_python_computes_them() -> None:
    """What tuner.restamp.hash_pairs runs under another minor: isolated, standard library only."""
    sources = {"loops": "def walk(f):\n    return f\n", "ops": {"mse": CODE, "l1": "LIMIT = 3\n"}}
    done = subprocess.run(
        [sys.executable, "-I", str(Path(codehash.__file__))],
        input=json.dumps(sources),
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["python"] == ".".join(map(str, sys.version_info[:3]))
    for op, text in sources["ops"].items():
        assert found["canonical"][op] == codehash.source_hash(sources["loops"], text)
        assert found["legacy"][op] == codehash.legacy_source_hash(sources["loops"], text)
    assert found["canonical"]["mse"] != found["canonical"]["l1"]
