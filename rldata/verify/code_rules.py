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

from rldata.errors import ConfigError
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
            raise ConfigError(f"tests.style must be one of {_STYLES}, got {self.style!r}", field="tests")
        if self.language != "python":
            raise ConfigError(
                f"tests.language {self.language!r} is not supported (python only)", field="tests"
            )
        if not self.public and not self.hidden:
            raise ConfigError("tests has no public and no hidden cases", field="tests")
        if self.time_limit_s <= 0:
            raise ConfigError(f"tests.time_limit_s must be > 0, got {self.time_limit_s}", field="tests")
        if self.style == "function" and not self.entry_point.isidentifier():
            raise ConfigError(
                f"tests.entry_point must be a Python name, got {self.entry_point!r}", field="tests"
            )
        for layer in ("public", "hidden"):
            for i, case in enumerate(getattr(self, layer)):
                if not isinstance(case, Mapping) or "input" not in case or "output" not in case:
                    raise ConfigError(
                        f"tests.{layer}[{i}] must be an object with 'input' and 'output'", field="tests"
                    )
                inp = case["input"]
                if self.style == "stdio" and not (isinstance(inp, str) and isinstance(case["output"], str)):
                    raise ConfigError(
                        f"tests.{layer}[{i}]: stdio input and output must be strings", field="tests"
                    )
                if self.style == "function" and not isinstance(inp, (list, dict)):
                    raise ConfigError(
                        f"tests.{layer}[{i}]: function input must be a list of args or an object",
                        field="tests",
                    )


def parse_tests(raw: str | Mapping[str, Any] | None) -> CodeTests:
    """The ``tasks.tests`` JSON (a string or an already-decoded object) as :class:`CodeTests`."""
    if raw is None or raw == "":
        raise ConfigError("the task has no tests", field="tests")
    obj = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(obj, Mapping):
        raise ConfigError("tests must be a JSON object", field="tests")
    known = set(CodeTests.__dataclass_fields__)
    unknown = set(obj) - known
    if unknown:
        raise ConfigError(f"unknown tests field(s): {', '.join(sorted(unknown))}", field="tests")
    kw = dict(obj)
    for k in ("public", "hidden", "allow_modules"):
        if k in kw:
            kw[k] = tuple(kw[k])
    if "style" not in kw:
        raise ConfigError("tests.style is required ('function' or 'stdio')", field="tests")
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
    allow_plain_eval: bool = True  # eval() the rules can see through is allowed (see _eval_problems)

    def __post_init__(self):
        if self.max_code_chars <= 0:
            raise ConfigError(
                f"max_code_chars must be > 0, got {self.max_code_chars}", field="max_code_chars"
            )


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
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and id(node) not in called
            and node.id in _CODE_RUNNERS
            and node.id in rules.forbidden_calls
        ):
            out.append(f"line {getattr(node, 'lineno', 0)}: {node.id} used as a value")  # f = eval; f(s)
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
            if node.func.id == "eval" and rules.allow_plain_eval:
                out.extend(f"line {line}: {why}" for why in _eval_problems(node, tree, rules, allowed))
            else:
                out.append(f"line {line}: call {node.func.id}()")
        if isinstance(node, ast.Attribute) and node.attr in rules.forbidden_attrs:
            out.append(f"line {line}: attribute .{node.attr}")
        if isinstance(node, ast.Name) and node.id in rules.forbidden_attrs:
            out.append(f"line {line}: name {node.id}")
    return out


# ---- eval: what the rule layer lets through ----------------------------------------------------
# eval() is banned because code it runs is code the rules never saw.  The author of a solution is
# the untrusted party, the task's test inputs are not: a solution evaluating an expression it
# assembles from its inputs (HumanEval/160: "2+3*4") hides nothing, while one that assembles code
# from its own string fragments ("__imp" + "ort__") does.  So eval(x) is allowed when the rules
# can still see everything it could run: one positional argument (no custom namespaces); a string
# literal argument passes these same rules; and the rest of the code holds no material to spell
# hidden code with: no string literal (docstrings aside) with "_", "(" or a forbidden name in it,
# no chr/getattr/setattr/bytes/bytearray/decode, no __doc__.  exec() and compile() stay banned.
# Residual: text spelled from repr() of objects; the rules do not chase that.
# The sandbox, not this check, is what contains code (no network, own uid, limits).
_CODE_RUNNERS = frozenset({"eval", "exec", "compile", "__import__"})
_SPELLING_CALLS = frozenset(
    {"chr", "getattr", "setattr", "delattr", "bytes", "bytearray", "decode", "fromhex"}
)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants, which the checks skip; none when the code reads __doc__."""
    ids = set()
    for node in ast.walk(tree):
        if getattr(node, "attr", None) == "__doc__" or getattr(node, "id", None) == "__doc__":
            return set()
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _eval_problems(call: ast.Call, tree: ast.AST, rules: CodeRules, allowed: tuple[str, ...]) -> list[str]:
    if len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
        return ["call eval() with namespaces or more than one argument"]
    arg = call.args[0]
    if isinstance(arg, ast.Constant):
        try:
            inner = ast.parse(str(arg.value), mode="eval")
        except (SyntaxError, ValueError):
            return []  # raises at run time: nothing runs
        bad = _violations(inner, rules, allowed)
        return [f"eval() of a string that breaks the rules ({bad[0]})"] if bad else []
    banned = {n.lower() for n in (*rules.forbidden_calls, *rules.forbidden_modules, *rules.forbidden_attrs)}
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in docs:
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            low = text.lower()
            if "_" in text or "(" in text or any(b in low for b in banned):
                return [f"call eval() in code whose string {text[:30]!r} could spell hidden code"]
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name in _SPELLING_CALLS:
                return [f"call eval() in code that calls {name}()"]
        if getattr(node, "attr", None) == "__doc__" or getattr(node, "id", None) == "__doc__":
            return ["call eval() in code that reads a docstring"]  # the docstrings were not checked
    return []


def _literals(tree: ast.AST, *, outputs: bool = False) -> list[Any]:
    """Every constant and literal container in the code (tuples as lists, like JSON), docstrings aside.

    ``outputs``: only the literals the code could return as a whole, the ones compared with public
    outputs: a dict key, a subscript index or an operand of a comparison is looked up or tested, not
    returned (``{"one": 1}`` keyed by the answer word is a vocabulary, not a hard-coded output).
    """
    docs = _docstrings(tree)
    skip = _key_positions(tree) if outputs else set()
    out = []
    for node in ast.walk(tree):
        if id(node) in docs or id(node) in skip:
            continue
        if isinstance(node, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.UnaryOp)):
            try:  # UnaryOp: negative numbers (-4 is USub applied to 4)
                out.append(_as_json(ast.literal_eval(node)))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
    return out


def _key_positions(tree: ast.AST) -> set[int]:
    """ids of the nodes in key positions: dict keys, subscript indices, comparison operands."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            roots += [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Subscript):
            roots.append(node.slice)
        elif isinstance(node, ast.Compare):
            roots += [node.left, *node.comparators]
    return {id(n) for root in roots for n in ast.walk(root)}


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


def _word(v: Any) -> bool:
    """A short word ("YES", "Odd", "seven"): vocabulary a solution builds answers from."""
    return isinstance(v, str) and re.fullmatch(r"[A-Za-z]{1,12}", v.strip()) is not None


def _strong(v: Any) -> bool:
    """An output too specific to be in the code by chance: not a word, not a small number."""
    if isinstance(v, bool) or _word(v):
        return False
    if isinstance(v, (int, float)):
        return abs(v) > 10
    return True


def _hardcoded_function(lits: list[Any], outs: list[Any], tests: CodeTests) -> tuple[list[int], bool]:
    """(indices of public cases whose output is a literal, whether that is evidence of hard-coding).

    Evidence is either an input->output pair written in the code (a non-trivial argument of a case,
    or its whole argument list, next to its output: ``if (a, b) == (2, 3): return 5``) with at least
    two outputs present, or three distinct strong outputs (see :func:`_strong`) present without any
    input.  A solution that returns "YES"/"NO" or number words has the outputs but not the inputs.
    Outputs are looked for in ``outs`` (literals the code can return whole), inputs in every literal.
    """

    def has(want: Any, pool: list[Any] = lits) -> bool:
        return any(same_value(x, want) for x in pool)

    cases = [c for c in tests.public if not _trivial(c["output"], "function")]
    hits, pinned = [], 0
    for i, case in enumerate(tests.public):
        if _trivial(case["output"], "function") or not has(case["output"], outs):
            continue
        hits.append(i)
        inp = case["input"]
        args = list(inp.values()) if isinstance(inp, dict) else list(inp)
        if (len(args) > 1 and has(args)) or any(not _trivial(a, "function") and has(a) for a in args):
            pinned += 1
    strong = []
    for i in hits:
        out = tests.public[i]["output"]
        if _strong(out) and not any(same_value(out, o) for o in strong):
            strong.append(out)
    flagged = bool(cases) and ((pinned >= 1 and len(hits) >= min(2, len(cases))) or len(strong) >= 3)
    return hits, flagged


def _hardcoded(tree: ast.AST, tests: CodeTests) -> tuple[list[int], bool]:
    """Public tests whose (non-trivial) expected output appears literally in the code, and whether
    that counts as hard-coding."""
    lits = _literals(tree, outputs=True)
    if tests.style == "function":
        return _hardcoded_function(_literals(tree), lits, tests)
    texts = {str(x).strip() for x in lits if isinstance(x, (str, int, float)) and not isinstance(x, bool)}
    texts |= {" ".join(str(y) for y in x) for x in lits if isinstance(x, list)}
    hits = []
    for i, case in enumerate(tests.public):
        want = case["output"]
        if _trivial(want, tests.style):
            continue
        w = "\n".join(ln.rstrip() for ln in want.strip().splitlines())
        if w in texts or w.replace("\n", " ") in texts:
            hits.append(i)
    n = sum(1 for c in tests.public if not _trivial(c["output"], tests.style))
    return hits, n > 0 and len(hits) >= min(2, n)


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
        hits, flagged = _hardcoded(tree, tests)
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
