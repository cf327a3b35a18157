"""Own-module imports sit at the top of each module (docs/contributing.md, "Imports"): a function-local
import of an rldata module is kept only where a measured start-up cost or a real import cycle requires
it, says which in a comment, and their number stays at or under the documented ceiling."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("rldata", "jobs", "trainer", "schemas")  # jobs/, trainer/, schemas/ install as rldata.*
WHY = re.compile(r"#.*\b(start-up|cycle)\b")
CEILING = re.compile(r"at most \*\*(\d+)\*\*\s+function-local\s+imports")


def local_imports(src: str) -> list[ast.stmt]:
    """The imports of rldata modules (absolute or relative) inside a function of ``src``."""
    found: list[ast.stmt] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if in_function and isinstance(child, ast.Import | ast.ImportFrom) and _own(child):
                found.append(child)
            visit(child, inside)

    visit(ast.parse(src), False)
    return found


def _own(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "rldata"
    return any(a.name.split(".")[0] == "rldata" for a in node.names)


def _says_why(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the import, or on the line above it or above its block of local imports."""
    first = node.lineno - 1
    if any(WHY.search(lines[i]) for i in range(first, node.end_lineno)):
        return True
    i = first - 1
    while i >= 0 and re.match(r"\s*(from|import) ", lines[i]):  # the block's other imports
        i -= 1
    return i >= 0 and WHY.search(lines[i]) is not None and lines[i].strip().startswith("#")


def _all() -> list[tuple[str, ast.stmt, list[str]]]:
    out = []
    for top in CODE:
        for path in sorted((ROOT / top).rglob("*.py")):
            src = path.read_text()
            out += [(str(path.relative_to(ROOT)), n, src.splitlines()) for n in local_imports(src)]
    return out


def test_function_local_own_imports_stay_at_or_under_the_documented_ceiling():
    (ceiling,) = CEILING.findall((ROOT / "docs" / "contributing.md").read_text())
    found = _all()
    assert len(found) <= int(ceiling), (
        f"{len(found)} function-local imports of rldata modules, the ceiling is {ceiling}: move the new "
        "ones to the top of their module (docs/contributing.md, Imports)"
    )


def test_each_function_local_own_import_says_why():
    silent = [f"{path}:{n.lineno}: {ast.unparse(n)}" for path, n, lines in _all() if not _says_why(lines, n)]
    assert not silent, "a function-local import without '# start-up: ...' or '# cycle: ...':\n" + "\n".join(
        silent
    )


def test_the_count_sees_local_own_imports_and_nothing_else():
    src = """
import os
from rldata.store import core

def f():
    import json
    from rldata.ledger import core as ledger  # start-up: a measured cost
    from . import sibling
    lambda: None

class C:
    def m(self):
        import rldata.engine

if True:
    from rldata import api
"""
    got = local_imports(src)
    assert [ast.unparse(n) for n in got] == [
        "from rldata.ledger import core as ledger",
        "from . import sibling",
        "import rldata.engine",
    ]
    lines = src.splitlines()
    assert [_says_why(lines, n) for n in got] == [True, False, False]
