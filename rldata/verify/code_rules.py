"""Test specs and the rule layer of the code verifier: format, forbidden constructs, hard-coding.

The ``tasks.tests`` JSON format is :class:`CodeTests` (see docs/code_and_rewards.md).  The rule
layer is pure static analysis (``ast``): nothing here runs the code.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rldata.verify.base import Verdict

__all__ = ["CodeRules", "CodeTests", "check_rules", "extract_code", "parse_tests", "same_value"]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PY_LANGS = ("", "python", "py", "python3", "py3")
_STYLES = ("function", "stdio")


@dataclass(frozen=True)
class CodeTests:
    style: str  # "function": call entry_point(*input); "stdio": feed input on stdin, compare stdout
    public: tuple[Mapping[str, Any], ...]  # [{"input": ..., "output": ...}]
    hidden: tuple[Mapping[str, Any], ...] = ()
    entry_point: str = "solve"
    language: str = "python"
    time_limit_s: float = 2.0  # per test case
    hardcode_check: bool = True
    allow_modules: tuple[str, ...] = ()  # task-specific exceptions to CodeRules.forbidden_modules

    def __post_init__(self):
        if self.style not in _STYLES:
            raise ValueError(f"tests.style must be one of {_STYLES}, got {self.style!r}")
        if self.language != "python":
            raise ValueError(f"tests.language {self.language!r} is not supported (python only)")
        if not self.public and not self.hidden:
            raise ValueError("tests has no public and no hidden cases")
        if self.time_limit_s <= 0:
            raise ValueError(f"tests.time_limit_s must be > 0, got {self.time_limit_s}")
        if self.style == "function" and not self.entry_point.isidentifier():
            raise ValueError(f"tests.entry_point must be a Python name, got {self.entry_point!r}")
        for layer in ("public", "hidden"):
            for i, case in enumerate(getattr(self, layer)):
                if not isinstance(case, Mapping) or "input" not in case or "output" not in case:
                    raise ValueError(f"tests.{layer}[{i}] must be an object with 'input' and 'output'")
                inp = case["input"]
                if self.style == "stdio" and not (isinstance(inp, str) and isinstance(case["output"], str)):
                    raise ValueError(f"tests.{layer}[{i}]: stdio input and output must be strings")
                if self.style == "function" and not isinstance(inp, (list, dict)):
                    raise ValueError(
                        f"tests.{layer}[{i}]: function input must be a list of args or an object"
                    )


def parse_tests(raw: str | Mapping[str, Any] | None) -> CodeTests:
    """The ``tasks.tests`` JSON (a string or an already-decoded object) as :class:`CodeTests`."""
    if raw is None or raw == "":
        raise ValueError("the task has no tests")
    obj = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(obj, Mapping):
        raise TypeError("tests must be a JSON object")
    known = set(CodeTests.__dataclass_fields__)
    unknown = set(obj) - known
    if unknown:
        raise ValueError(f"unknown tests field(s): {', '.join(sorted(unknown))}")
    kw = dict(obj)
    for k in ("public", "hidden", "allow_modules"):
        if k in kw:
            kw[k] = tuple(kw[k])
    if "style" not in kw:
        raise ValueError("tests.style is required ('function' or 'stdio')")
    return CodeTests(**kw)


@dataclass(frozen=True)
class CodeRules:
    require_fence: bool = False  # True: code must come in a ``` block
    forbidden_modules: tuple[str, ...] = (
        "os",
        "subprocess",
        "socket",
        "ctypes",
        "shutil",
        "multiprocessing",
        "signal",
        "resource",
        "pty",
        "importlib",
        "inspect",
        "gc",
        "builtins",
        "pickle",
        "marshal",
        "urllib",
        "http",
        "pathlib",
        "sysconfig",
    )
    forbidden_calls: tuple[str, ...] = (
        "eval",
        "exec",
        "compile",
        "__import__",
        "open",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "help",
    )
    forbidden_attrs: tuple[str, ...] = (
        "__builtins__",
        "__subclasses__",
        "__globals__",
        "__code__",
        "__closure__",
        "__mro__",
        "__bases__",
        "f_back",
        "f_globals",
        "f_locals",
        "gi_frame",
        "_getframe",
        "settrace",
        "setprofile",
        "modules",
    )
    max_code_chars: int = 50_000

    def __post_init__(self):
        if self.max_code_chars <= 0:
            raise ValueError(f"max_code_chars must be > 0, got {self.max_code_chars}")


def extract_code(completion: str, *, require_fence: bool = False) -> str | None:
    """The last Python fenced block; else the whole completion if it parses; else None."""
    blocks = [body for lang, body in _FENCE.findall(completion) if lang.lower() in _PY_LANGS]
    if blocks:
        return blocks[-1]
    if require_fence:
        return None
    try:
        ast.parse(completion)
    except (SyntaxError, ValueError):
        return None
    return completion if completion.strip() else None


# ---- rule layer --------------------------------------------------------------------------------
def _violations(tree: ast.AST, rules: CodeRules, allowed: tuple[str, ...]) -> list[str]:
    banned = set(rules.forbidden_modules) - set(allowed)
    out = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            names = []
        for name in names:
            if name.split(".")[0] in banned:
                out.append(f"line {line}: import {name}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in rules.forbidden_calls
        ):
            out.append(f"line {line}: call {node.func.id}()")
        if isinstance(node, ast.Attribute) and node.attr in rules.forbidden_attrs:
            out.append(f"line {line}: attribute .{node.attr}")
        if isinstance(node, ast.Name) and node.id in rules.forbidden_attrs:
            out.append(f"line {line}: name {node.id}")
    return out


def _literals(tree: ast.AST) -> list[Any]:
    """Every constant and literal container in the code (tuples as lists, like JSON)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.UnaryOp)):
            try:  # UnaryOp: negative numbers (-4 is USub applied to 4)
                out.append(_as_json(ast.literal_eval(node)))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
    return out


def _as_json(v: Any) -> Any:
    if isinstance(v, (tuple, list, set, frozenset)):
        return [_as_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _as_json(x) for k, x in v.items()}
    return v


def _trivial(v: Any, style: str) -> bool:
    """Outputs too common to count as evidence of hard-coding (0, 1, True, "YES", [], ...)."""
    if style == "stdio":
        s = v.strip()
        if not s or re.fullmatch(r"[A-Za-z]+", s):
            return True
        try:
            return abs(float(s)) <= 2
        except ValueError:
            return False
    if v is None or isinstance(v, bool):
        return True
    if isinstance(v, (int, float)):
        return abs(v) <= 2
    if isinstance(v, (str, list, dict)):
        return len(v) <= 1
    return False


def _hardcoded(tree: ast.AST, tests: CodeTests) -> list[int]:
    """Indices of public tests whose (non-trivial) expected output appears literally in the code."""
    lits = _literals(tree)
    if tests.style == "stdio":
        texts = {str(x).strip() for x in lits if isinstance(x, (str, int, float)) and not isinstance(x, bool)}
        texts |= {" ".join(str(y) for y in x) for x in lits if isinstance(x, list)}
    hits = []
    for i, case in enumerate(tests.public):
        want = case["output"]
        if _trivial(want, tests.style):
            continue
        if tests.style == "stdio":
            w = "\n".join(ln.rstrip() for ln in want.strip().splitlines())
            found = w in texts or w.replace("\n", " ") in texts
        else:
            found = any(same_value(x, want) for x in lits)
        if found:
            hits.append(i)
    return hits


def check_rules(code: str | None, tests: CodeTests, rules: CodeRules = CodeRules()) -> Verdict:
    """The rule layer for already-extracted ``code`` (None: nothing was found)."""
    if code is None:
        why = "no ``` code block" if rules.require_fence else "no code block and the completion is not Python"
        return Verdict(False, 0.0, None, None, {"checks": {"format": why}}, layer="rule")
    if len(code) > rules.max_code_chars:
        return Verdict(False, 0.0, code[:1000], None, {"checks": {"format": "code too long"}}, layer="rule")
    checks: dict[str, str] = {"format": "ok"}
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as e:
        checks["syntax"] = f"syntax error: line {getattr(e, 'lineno', '?')}: {getattr(e, 'msg', e)}"
        return Verdict(False, 0.0, code, None, {"checks": checks}, layer="rule")
    checks["syntax"] = "ok"
    if tests.style == "function":
        top = {
            n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
        top |= {
            t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
        }
        checks["entry_point"] = "ok" if tests.entry_point in top else f"no top-level {tests.entry_point!r}"
    bad = _violations(tree, rules, tests.allow_modules)
    checks["forbidden"] = "ok" if not bad else "; ".join(bad[:10])
    if tests.hardcode_check:
        hits = _hardcoded(tree, tests)
        n = sum(1 for c in tests.public if not _trivial(c["output"], tests.style))
        flagged = n > 0 and len(hits) >= min(2, n)
        checks["hardcoded"] = f"public outputs {hits} appear as literals" if flagged else "ok"
    passed = all(v == "ok" for v in checks.values())
    return Verdict(passed, 1.0 if passed else 0.0, code, None, {"checks": checks}, layer="rule")


def same_value(got: Any, want: Any) -> bool:
    """JSON-value equality; floats within 1e-6 relative (1e-9 absolute); bools are not numbers."""
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(want, bool) and isinstance(got, bool) and want == got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if isinstance(want, float) or isinstance(got, float):
            return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
        return got == want
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(same_value(g, w) for g, w in zip(got, want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want
