"""The verifier rules of ``rldata lint``: each task's own verifier run on answers whose verdict is known.

For every task with a reference answer, through the real verifiers (:func:`rldata.verify.run.verify_many`:
the task's domain default, or ``--verifier``; math-verify in its killable child, with deadlines):

- ``semantic.oracle_max``: the gold answer written as a model writes it (a worked line ending in
  ``\\boxed{GOLD}``, and for a plain answer "The answer is GOLD.") must pass; a fail, or a verifier
  error, is a finding.
- ``answer.unparseable`` (math tasks): math-verify finds no expression in the gold (its parse keeps
  only the raw text, as for ``\\frac{1}{`` or ``???``): every comparison with it is a string match.
  The parse runs as a verifier (:class:`GoldParses`), so it gets the same child process and deadline.
- ``semantic.canary_floor``: no-op answers must fail: the empty completion, the question repeated, a
  refusal ("I don't know."), an empty box.  Any that passes is a finding.
- ``semantic.verifier_determinism``: all of the above scored a second time, in a second batch; a
  verdict (passed, score) that differs is a finding.

Code tasks (sandboxed tests, no gold solution), regex keys (a pattern is not an answer) and
environment rewards are skipped, and counted as skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import polars as pl

from rldata.verify.base import UnknownVerifier, Verdict, all_passed
from rldata.verify.extract import extract_answer
from rldata.verify.math import parse_answer
from rldata.verify.run import resolve_verifier, verify_many

__all__ = ["CANARIES", "SKIPPED_VERIFIERS", "oracle_forms", "verifier_findings"]

SKIPPED_VERIFIERS = ("code", "env-reward")
_NO_ORACLE = ("regex",)  # the key is a pattern: no answer to write
CANARIES = (
    ("empty", ""),
    ("question", None),  # the task's own prompt
    ("refusal", "I don't know."),
    ("empty_box", "The answer is $\\boxed{}$."),
)


class GoldParses:
    """``passed`` when math-verify parses the task's gold into an expression (not only its raw text).
    Run through :func:`rldata.verify.run.verify_many` by its path, like any ``module:Class`` verifier."""

    name = "gold-parses"
    version = "1"

    def extract(self, completion, task):
        return None

    def check(self, extracted, task) -> list[Verdict]:
        gold = str(task.get("answer") or "").strip()
        if "####" in gold or "\\boxed" in gold:
            gold = extract_answer(gold) or gold
        parsed = parse_answer(gold) if gold else ()
        ok = any(not isinstance(p, str) for p in parsed)
        return [Verdict(ok, float(ok), None, detail={"gold": gold[:200]})]

    def verify(self, completion, task):
        return self.check(None, task)


_GOLD_PARSES = f"{__name__}:GoldParses"


def oracle_forms(gold: str) -> list[tuple[str, str]]:
    """How a model writes the gold answer: boxed at the end of a worked line, and stated plainly."""
    forms = [
        ("boxed", f"Working through the problem step by step.\nThe final answer is $\\boxed{{{gold}}}$.")
    ]
    if "\\" not in gold and "\n" not in gold and "$" not in gold and len(gold) <= 200:
        forms.append(("stated", f"Let me work it out.\nThe answer is {gold}."))
    return forms


def _key(vs: list[Verdict]) -> tuple:
    return (all_passed(vs), tuple(round(v.score, 9) if v.score is not None else None for v in vs))


def _why(vs: list[Verdict]) -> dict:
    v = vs[0] if vs else None
    out = {"passed": all_passed(vs)}
    if v is not None:
        out["extracted"] = v.extracted
        if v.error:
            out["error"] = v.error[:300]
        if v.detail:
            out["detail"] = v.detail
    return out


def verifier_findings(
    tasks: pl.DataFrame, rules: Iterable[str], *, verifier: str | None, timeout_s: float
) -> tuple[pl.DataFrame, dict[str, int]]:
    """Rows (task_id, rule, detail) for the verifier rules in ``rules``, and per rule the tasks skipped."""
    rules = set(rules)
    want_oracle = bool(rules & {"semantic.oracle_max", "semantic.verifier_determinism"})
    want_canary = bool(rules & {"semantic.canary_floor", "semantic.verifier_determinism"})
    items, owners = [], []  # (verifier, completion, task), (task_id, kind, form)
    skipped = 0
    names: dict[str, str | None] = {}
    for row in tasks.iter_rows(named=True):
        gold = row["answer"]
        which = verifier or row["domain"] or "math"
        if which not in names:
            try:
                names[which] = resolve_verifier(which)
            except UnknownVerifier:  # a domain no verifier serves: nothing to run
                names[which] = None
        name = names[which]
        if name is None or name in SKIPPED_VERIFIERS or gold is None or not str(gold).strip():
            skipped += 1
            continue
        task = {k: row.get(k) for k in ("prompt", "answer", "tests", "metadata")}
        if "answer.unparseable" in rules and name == "math":
            items.append((_GOLD_PARSES, None, task))
            owners.append((row["task_id"], "gold", "parse"))
        if want_oracle and name not in _NO_ORACLE:
            for form, text in oracle_forms(str(gold).strip()):
                items.append((name, text, task))
                owners.append((row["task_id"], "oracle", form))
        if want_canary:
            for form, text in CANARIES:
                items.append((name, row["prompt"] if text is None else text, task))
                owners.append((row["task_id"], "canary", form))
    first = verify_many(items, timeout_s=timeout_s) if items else []
    second = (
        verify_many(items, timeout_s=timeout_s)
        if items and "semantic.verifier_determinism" in rules
        else None
    )
    found: dict[tuple[str, str], dict] = {}
    for i, ((tid, kind, form), vs) in enumerate(zip(owners, first, strict=True)):
        passed = all_passed(vs)
        if kind == "gold":
            if passed is False:
                found[(tid, "answer.unparseable")] = {"gold": (vs[0].detail or {}).get("gold")}
            continue
        if kind == "oracle" and passed is not True and "semantic.oracle_max" in rules:
            found.setdefault((tid, "semantic.oracle_max"), {"form": form, **_why(vs)})
        if kind == "canary" and passed is True and "semantic.canary_floor" in rules:
            found.setdefault((tid, "semantic.canary_floor"), {"canary": form, **_why(vs)})
        if second is not None and kind != "gold" and _key(vs) != _key(second[i]):
            found.setdefault(
                (tid, "semantic.verifier_determinism"),
                {"completion": f"{kind}:{form}", "first": _why(vs), "second": _why(second[i])},
            )
    rows = [
        (tid, rule, json.dumps(detail, default=str, sort_keys=True)) for (tid, rule), detail in found.items()
    ]
    out = pl.DataFrame(
        rows, schema={"task_id": pl.String, "rule": pl.String, "detail": pl.String}, orient="row"
    )
    return out, {r: skipped for r in rules}
