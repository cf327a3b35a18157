"""Layered code verifier (rule -> public tests -> hidden tests), one Verdict per layer.

Layers (each stored as its own ``verifications`` row, so a reward hack shows which layer it got past):

- ``rule``: a code block was found and parses; the entry point exists (function style); no
  forbidden construct (imports of os/subprocess/socket/..., eval/exec/open/..., frame and
  ``__globals__`` tricks); no hard-coded outputs (the public tests' expected outputs appearing as
  literals in the code).
- ``public``: the public tests, run in the sandbox.
- ``hidden``: the hidden tests, run in the same sandbox process right after the public ones.  Their
  expected outputs never enter the sandbox: the harness returns what the code produced and the
  comparison happens here.

Every layer is always reported.  When no runnable code exists (no code block, syntax error) the
test layers are ``passed=False`` with ``detail.skipped``; otherwise the tests run even after a rule
failure, which is what shows "passed the public tests by hard-coding them".  The sample passes
only when all three layers pass (:func:`all_passed`).  A solution that times out or crashes fails
(``passed=False``); ``passed=None`` (an error) is kept for problems of the verifier itself: a bad
test spec or a sandbox that could not start.

The ``tasks.tests`` JSON format is documented in docs/code_and_rewards.md and :func:`parse_tests`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rldata.sandbox import HARNESS, SandboxLimits, SandboxResult, run_python
from rldata.verify.base import Verdict, all_passed
from rldata.verify.code_rules import CodeRules, CodeTests, check_rules, extract_code, parse_tests, same_value

__all__ = [
    "VERSION",
    "CodeRules",
    "CodeTests",
    "CodeVerifier",
    "all_passed",
    "check_rules",
    "extract_code",
    "parse_tests",
    "run_tests",
    "same_value",
]

VERSION = "3"  # 2: the rule layer no longer rejects YES/NO outputs or eval() of assembled expressions;
# 3: hard-coding compares outputs only with literals the code can return (not dict keys, indices, comparisons)


# ---- test layers -------------------------------------------------------------------------------
def _same_stdout(got: str, want: str) -> bool:
    norm = lambda s: [ln.rstrip() for ln in s.rstrip().splitlines()]
    return norm(got) == norm(want)


def _limits(tests: CodeTests, base: SandboxLimits) -> SandboxLimits:
    n = len(tests.public) + len(tests.hidden)
    budget = 1.0 + tests.time_limit_s * n
    return replace(base, cpu_s=min(base.cpu_s, budget), wall_s=min(base.wall_s, budget + 2.0))


def _layer_verdict(
    layer: str,
    cases,
    results: dict[int, dict],
    offset: int,
    style: str,
    run: SandboxResult,
    load_error: str | None,
) -> Verdict:
    failures, passed_n = [], 0
    for j, case in enumerate(cases):
        rec = results.get(offset + j)
        if load_error is not None:
            reason = f"load error: {load_error}"
        elif rec is None:
            reason = f"not run: {run.reason}" + (
                f" ({run.error_line})" if run.error_line and not run.ok else ""
            )
        elif rec.get("error"):
            reason = rec["error"]
        else:
            ok = (
                same_value(rec.get("out"), case["output"])
                if style == "function"
                else _same_stdout(rec.get("out", ""), case["output"])
            )
            if ok:
                passed_n += 1
                continue
            reason = "wrong answer"
        fail = {"index": j, "reason": reason[:300]}
        if layer == "public" and rec is not None and "out" in rec:  # hidden cases reveal nothing
            fail["got"] = json.dumps(rec["out"])[:200]
            fail["expected"] = json.dumps(case["output"])[:200]
        failures.append(fail)
    total = len(cases)
    detail = {
        "passed": passed_n,
        "total": total,
        "failures": failures[:20],
        "sandbox": run.reason,
        "wall_s": round(run.wall_s, 3),
    }
    return Verdict(passed_n == total, (passed_n / total) if total else 1.0, None, None, detail, layer=layer)


def run_tests(
    code: str,
    tests: CodeTests,
    *,
    limits: SandboxLimits | None = None,
    on_start: Callable[[Any], None] | None = None,
) -> tuple[Verdict, Verdict]:
    """Run public then hidden cases in one sandbox; return the (public, hidden) verdicts.

    ``on_start`` is passed to :func:`rldata.sandbox.run_python` (to kill a run early).
    """
    limits = limits or SandboxLimits()
    cases = [{"input": c["input"]} for c in (*tests.public, *tests.hidden)]
    spec = {
        "style": tests.style,
        "entry_point": tests.entry_point,
        "time_limit_s": tests.time_limit_s,
        "cases": cases,
    }
    run = run_python(
        HARNESS.read_text(),
        files={"solution.py": code, "cases.json": json.dumps(spec)},
        limits=_limits(tests, limits),
        on_start=on_start,
    )
    if run.reason == "setup_error":
        err = f"sandbox could not start: {run.error_line}"
        return Verdict.failure(err, layer="public"), Verdict.failure(err, layer="hidden")
    results, load_error = {}, None
    for line in run.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        if "load_error" in rec:
            load_error = str(rec["load_error"])
        elif isinstance(rec.get("i"), int):
            results[rec["i"]] = rec
    pub = _layer_verdict("public", tests.public, results, 0, tests.style, run, load_error)
    hid = _layer_verdict("hidden", tests.hidden, results, len(tests.public), tests.style, run, load_error)
    return pub, hid


@dataclass(frozen=True)
class CodeVerifier:
    """``verify(completion, task)`` -> [rule, public, hidden] verdicts; ``task["tests"]`` is the spec."""

    rules: CodeRules = field(default_factory=CodeRules)
    limits: SandboxLimits = field(
        default_factory=lambda: SandboxLimits(memory_mb=512, wall_s=30.0, cpu_s=20.0)
    )
    name: str = "code"
    version: str = VERSION

    @property
    def timeout_s(self) -> float:
        """Budget for rldata.verify.run's guard: the sandbox enforces its own wall limit first."""
        return self.limits.wall_s + 5.0

    def extract(self, completion: str | None, task: Mapping[str, Any]) -> str | None:
        """Phase 1: the code (identical code in many samples is then checked once)."""
        return extract_code(completion or "", require_fence=self.rules.require_fence)

    def check(self, code: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        """Phase 2: the three layers for already-extracted code."""
        try:
            tests = parse_tests(task.get("tests"))
        except (ValueError, TypeError) as e:
            err = f"bad tests spec: {e}"
            return [Verdict.failure(err, layer=lay) for lay in ("rule", "public", "hidden")]
        rule = check_rules(code, tests, self.rules)
        runnable = code is not None and rule.detail["checks"].get("syntax") == "ok"
        if not runnable:
            why = {"skipped": "no runnable code (rule layer failed: " + _first_failure(rule) + ")"}
            return [
                rule,
                Verdict(False, 0.0, None, None, why, layer="public"),
                Verdict(False, 0.0, None, None, why, layer="hidden"),
            ]
        pub, hid = run_tests(code, tests, limits=self.limits)
        return [rule, pub, hid]

    def verify(self, completion: str | None, task: Mapping[str, Any]) -> list[Verdict]:
        return self.check(self.extract(completion, task), task)


def _first_failure(rule: Verdict) -> str:
    for k, v in (rule.detail or {}).get("checks", {}).items():
        if v != "ok":
            return f"{k}: {v}"
    return "unknown"
