"""The lint rules: one :class:`Rule` each, in one registry (:data:`RULES`).

Format rules look at a task's own text, vectorised over the tasks (a function from the tasks frame to
``(task_id, detail)`` rows); verifier rules run the task's verifier (:mod:`rldata.quality.verifier_rules`);
the store rule ``suspect_key`` reads the sampled answers (:mod:`rldata.quality.suspect_key`).  Where
OpenEnv's RFC 008 (environment auto-validation) names the same check, the rule carries its id
(``semantic.oracle_max``, ``semantic.canary_floor``, ``semantic.verifier_determinism``,
``semantic.no_solution_leakage``).

A rule's ``version`` is stored with each finding: bump it when what the rule finds changes.  Its
``severity`` decides what a finding does: ``error`` flags the task (filter, stratify, train and export
leave it out, see :mod:`rldata.ledger.flags`), ``warning`` and ``info`` are recorded only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from rldata.errors import ConfigError

__all__ = ["RULES", "SEVERITIES", "Rule", "guess_chance", "select_rules"]

SEVERITIES = ("error", "warning", "info")
SENTINELS = (
    "proof", "notfound", "not found", "n/a", "na", "none", "null", "nan", "unknown", "?", "-", "--",
    "see solution", "see explanation", "no answer", "no solution", "todo", "tbd", "answer",
)  # fmt: skip


@dataclass(frozen=True)
class Rule:
    name: str
    version: str
    severity: str
    kind: str  # format | verifier | store
    help: str
    check: Callable[[pl.DataFrame, object], pl.DataFrame] | None = None  # format rules


def _found(tasks: pl.DataFrame, hit: pl.Expr, detail: pl.Expr) -> pl.DataFrame:
    return tasks.filter(hit.fill_null(False)).select("task_id", detail.alias("detail"))


def _sentinel(tasks: pl.DataFrame, cfg) -> pl.DataFrame:
    ans = pl.col("answer").str.strip_chars()
    bad = pl.col("tests").is_null() & (ans.is_null() | (ans == "") | ans.str.to_lowercase().is_in(SENTINELS))
    return _found(tasks, bad, pl.struct(answer=pl.col("answer")).struct.json_encode())


_OPTION = r"(?m)(?:^|[\s(])\(?([A-E])[).:]\s"  # "(A) 12", "A) 12", "A. 12", "A: 12"


def guess_chance(answer: str | None, prompt: str | None) -> tuple[str, float, int] | None:
    """(kind, chance pass rate, options) when the answer can be guessed: multiple choice, yes/no,
    true/false; else None."""
    import re

    a = (answer or "").strip().strip(".").strip().lower()
    if a in ("yes", "no"):
        return "yes_no", 0.5, 2
    if a in ("true", "false"):
        return "true_false", 0.5, 2
    letter = re.fullmatch(r"\(?([a-e])\)?", a)
    if letter is not None:
        options = set(re.findall(_OPTION, prompt or ""))
        if len(options) >= 2 and letter.group(1).upper() in options:
            return "multiple_choice", 1 / len(options), len(options)
    return None


def _guessable(tasks: pl.DataFrame, cfg) -> pl.DataFrame:
    rows = []
    for tid, prompt, answer in tasks.select("task_id", "prompt", "answer").iter_rows():
        got = guess_chance(answer, prompt)
        if got is not None:
            kind, chance, k = got
            rows.append((tid, json.dumps({"kind": kind, "chance_pass_rate": round(chance, 4), "options": k})))
    return pl.DataFrame(rows, schema={"task_id": pl.String, "detail": pl.String}, orient="row")


def _matches(patterns: dict[str, str]) -> tuple[pl.Expr, pl.Expr]:
    """(any matched, JSON of the first matched pattern's name) over the prompt."""
    p = pl.col("prompt")
    name = pl.lit(None, dtype=pl.String)
    for key, pat in reversed(patterns.items()):
        name = pl.when(p.str.contains(pat)).then(pl.lit(key)).otherwise(name)
    return name.is_not_null(), pl.struct(matched=name).struct.json_encode()


_MULTI = {
    "(a) (b)": r"(?:^|\s)\(a\)[\s\S]*\(b\)",
    "(i) (ii)": r"(?:^|\s)\(i\)[\s\S]*\(ii\)",
    "part 1, part 2": r"(?i)\bpart\s*(?:1|a|i)\b[\s\S]*\bpart\s*(?:2|b|ii)\b",
}
_PROOF = {"prove": r"(?i)\b(?:prove|show|demonstrate|verify) that\b", "proof": r"(?i)\bproof\b"}
_FIGURE = {
    "[asy]": r"\[asy\]",
    "figure reference": r"(?i)\b(?:in|from|see|shown in|use|using) the (?:figure|diagram|graph|picture|image|table) (?:below|above|shown)?",
    "figure below/above": r"(?i)\b(?:figure|diagram|graph|picture|image) (?:below|above)\b",
    "image": r"!\[[^\]]*\]\(|<img\b|\\includegraphics",
    "link": r"https?://",
}


def _pattern_rule(patterns: dict[str, str]):
    def check(tasks: pl.DataFrame, cfg) -> pl.DataFrame:
        hit, detail = _matches(patterns)
        return _found(tasks, hit, detail)

    return check


def _leak(tasks: pl.DataFrame, cfg) -> pl.DataFrame:
    """The answer written in the prompt as an answer: boxed, after "answer is/:", after "####", or (a
    long non-numeric answer) verbatim."""
    a = pl.col("answer").str.strip_chars()
    low = pl.col("prompt").str.to_lowercase()
    al = a.str.to_lowercase()
    forms = {
        "boxed": pl.col("prompt").str.contains(pl.lit("\\boxed{") + a + pl.lit("}"), literal=True),
        "answer is": low.str.contains(pl.lit("answer is ") + al, literal=True)
        | low.str.contains(pl.lit("answer: ") + al, literal=True),
        "####": pl.col("prompt").str.contains(pl.lit("#### ") + a, literal=True),
        "verbatim": (a.str.len_chars() >= 8)
        & ~a.str.contains(r"^[-+]?[\d.,/\s]+$")
        & low.str.contains(al, literal=True),
    }
    name = pl.lit(None, dtype=pl.String)
    for key, hit in reversed(forms.items()):
        name = pl.when(hit.fill_null(False)).then(pl.lit(key)).otherwise(name)
    usable = a.is_not_null() & (a != "")
    return _found(tasks, usable & name.is_not_null(), pl.struct(form=name, answer=a).struct.json_encode())


def _too_long(tasks: pl.DataFrame, cfg) -> pl.DataFrame:
    n = pl.col("prompt").str.len_chars()
    return _found(
        tasks,
        n > cfg.max_prompt_chars,
        pl.struct(chars=n, limit=pl.lit(cfg.max_prompt_chars)).struct.json_encode(),
    )


def _language(tasks: pl.DataFrame, cfg) -> pl.DataFrame:
    """Letters mostly outside the Latin script (a prompt in another language than the pool's)."""
    letters = pl.col("prompt").str.count_matches(r"\p{L}")
    latin = pl.col("prompt").str.count_matches(r"\p{Latin}")
    share = latin / letters
    hit = (letters >= 10) & (share < 0.5)
    return _found(tasks, hit, pl.struct(latin_share=share.round(3)).struct.json_encode())


_RULES = (
    Rule("answer.sentinel", "1", "error", "format", "empty answer, or a sentinel such as proof, notfound, n/a", _sentinel),
    Rule("answer.guessable", "1", "warning", "format", "multiple choice, yes/no or true/false: a guess passes (chance pass rate in detail)", _guessable),
    Rule("answer.unparseable", "1", "error", "verifier", "a math reference answer math-verify cannot parse"),
    Rule("prompt.multi_part", "1", "warning", "format", "several questions in one prompt: (a) (b), (i) (ii), part 1/2", _pattern_rule(_MULTI)),
    Rule("prompt.proof", "1", "warning", "format", "a proof question (prove/show that): no final answer to check", _pattern_rule(_PROOF)),
    Rule("prompt.figure", "1", "warning", "format", "depends on a figure, [asy] code, an image or a link", _pattern_rule(_FIGURE)),
    Rule("prompt.too_long", "1", "warning", "format", "a prompt over max_prompt_chars characters", _too_long),
    Rule("prompt.language", "1", "warning", "format", "a prompt mostly outside the Latin script", _language),
    Rule("semantic.no_solution_leakage", "1", "error", "format", "the answer leaked into the prompt (RFC 008 semantic.no_solution_leakage)", _leak),
    Rule("semantic.oracle_max", "1", "error", "verifier", "the gold answer, written as a model writes it, fails its own verifier (RFC 008)"),
    Rule("semantic.canary_floor", "1", "error", "verifier", "a no-op answer passes: empty, the question repeated, a refusal, an empty box (RFC 008)"),
    Rule("semantic.verifier_determinism", "1", "error", "verifier", "the same completion scored twice gets two verdicts (RFC 008)"),
    Rule("suspect_key", "1", "error", "store", "sampled answers agree on one value, the key says another, pass rate ~0"),
)  # fmt: skip
RULES: dict[str, Rule] = {r.name: r for r in _RULES}


def select_rules(names: tuple[str, ...] | None) -> list[Rule]:
    """The rules ``names`` picks (a name, or a prefix such as ``semantic`` or ``answer``); all by default."""
    if names is None:
        return list(RULES.values())
    out: dict[str, Rule] = {}
    for n in names:
        hits = [r for r in RULES.values() if r.name == n or r.name.startswith(n + ".")]
        if not hits:
            raise ConfigError(f"rules: unknown rule {n!r}; rules: {', '.join(RULES)}", field="rules")
        out.update({r.name: r for r in hits})
    return [r for r in RULES.values() if r.name in out]
