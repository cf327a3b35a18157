"""The parameters of `rldata decontaminate`, `rldata dedup`, `rldata lint` and `rldata blast-radius`,
declared once (rldata.configs.fields): the options, the `--config FILE` keys, the API keywords and the rows
of docs/options.md come from these fields."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rldata.configs.fields import at_least, finite_between, one_of, param, sql_predicate, validate
from rldata.errors import ConfigError
from rldata.ingest.options import choice_value, choices
from rldata.ingest.presets import PRESETS
from rldata.quality.detectors import METHODS

__all__ = ["ACTIONS", "BlastConfig", "DecontaminateConfig", "DedupConfig", "LintConfig", "names"]

ACTIONS = ("flag", "drop")


def names(value: Any) -> tuple[str, ...] | None:
    """'a,b' (the command line) or a list (a file, Python) -> ('a', 'b'); None stays None."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(dict.fromkeys(str(x).strip() for x in items if str(x).strip()))


def _join(value: Sequence[str] | None) -> str | None:
    return None if value is None else ",".join(value)


def _subset(field: str, known: Sequence[str]):
    def check(value):
        if value is None:
            return None
        if not value:
            return f"give at least one of {', '.join(known)}"
        bad = [v for v in value if v not in known]
        return f"unknown {bad[0]!r}; choose from {', '.join(known)}" if bad else None

    return check


_ACTION = {
    "check": one_of(*ACTIONS),
    "cli_type": choices("Action", ACTIONS),
    "to_field": choice_value,
    "help": "flag: keep the tasks and record them (filter, stratify, train and export then leave them "
    "out); drop: delete them from tasks (the rows stay, marked drop).",
}
_WHERE = {"check": sql_predicate("where"), "help": "Only the tasks matching this SQL predicate over tasks."}


@dataclass(frozen=True)
class DecontaminateConfig:
    """Which eval pack `rldata decontaminate` checks the tasks against, how, and what a match does.

    The detectors (``methods``) and their thresholds, and the action: flag or drop."""

    eval: str | None = param(
        None,
        help="Eval file or directory (JSONL, CSV, Parquet, a save_to_disk dir), stored as pack --name.",
    )
    eval_sample: str | None = param(None, help="A bundled eval set instead of --eval: gsm8k-test.")
    name: str | None = param(
        None, help="Pack name (default: the file's stem); alone, checks against the stored pack again."
    )
    preset: str | None = param(
        None,
        choices=PRESETS,  # the ingest presets' registry (plugins included)
        usage_check=True,  # a misspelt preset is a usage error (exit 2), as with rldata ingest
        help="Column layout of the eval file (default: the plain prompt/answer columns).",
    )
    prompt_field: str | None = param(None, help="Column of the eval file holding the prompt.")
    answer_field: str | None = param(None, help="Column of the eval file holding the answer.")
    methods: tuple[str, ...] = param(
        METHODS,
        flag="--method",
        cli_type=str,
        to_field=names,
        from_field=_join,
        check=_subset("methods", METHODS),
        help="Detectors, comma-separated: ngram, coverage, minhash.",
    )
    ngram: int = param(8, check=at_least(1), help="Word n-gram length for math and text tasks.")
    ngram_code: int = param(13, check=at_least(1), help="Word n-gram length for code tasks.")
    ngram_share: float = param(
        0.5,
        check=finite_between(0, 1),
        help="ngram flags a task holding at least this share of an eval item's n-grams (0: any shared "
        "n-gram, open-r1's rule).",
    )
    coverage_n: int = param(3, check=at_least(1), help="coverage: the n-gram length that covers tokens.")
    coverage: float = param(
        0.8, check=finite_between(0, 1), help="coverage flags at this share of the eval item's tokens."
    )
    jaccard: float = param(
        0.5, check=finite_between(0, 1), help="minhash flags at this Jaccard similarity (token bigrams)."
    )
    action: str = param("flag", **_ACTION)
    where: str | None = param(None, **_WHERE)
    dry_run: bool = param(False, help="Detect and print, write nothing.")

    def __post_init__(self):
        object.__setattr__(self, "methods", names(self.methods))
        validate(self)


@dataclass(frozen=True)
class DedupConfig:
    """How `rldata dedup --near` groups near-duplicate tasks and which one of a group it keeps."""

    near: bool = param(
        False, help="MinHash near-duplicates (exact duplicates never enter: ingest drops them)."
    )
    jaccard: float = param(
        0.8, check=finite_between(0, 1), help="Tasks this similar (token bigrams) are one cluster."
    )
    source_priority: tuple[str, ...] | None = param(
        None,
        cli_type=str,
        to_field=names,
        from_field=_join,
        help="Keep rule: sources in order of preference, comma-separated; then the oldest task.",
    )
    action: str = param("flag", **_ACTION)
    where: str | None = param(None, **_WHERE)
    dry_run: bool = param(False, help="Cluster and print, write nothing.")

    def __post_init__(self):
        object.__setattr__(self, "source_priority", names(self.source_priority))
        validate(self)
        if not self.near:
            raise ConfigError(
                "near: rldata dedup needs --near (exact duplicates are dropped at ingest)", field="near"
            )


@dataclass(frozen=True)
class LintConfig:
    """Which rules `rldata lint` runs over which tasks, and the thresholds of the store-driven one."""

    rules: tuple[str, ...] | None = param(
        None,
        flag="--rule",
        cli_type=str,
        to_field=names,
        from_field=_join,
        help="Rules to run, comma-separated, or a prefix such as semantic (default: all; docs/quality.md).",
    )
    where: str | None = param(None, **_WHERE)
    verifier: str | None = param(
        None,
        help="Verifier rules: this verifier instead of each task's domain default (name or module:Class).",
    )
    timeout_s: float = param(5.0, check=at_least(0.01), help="Verifier rules: seconds per check.")
    max_prompt_chars: int = param(
        4000, check=at_least(1), help="prompt.too_long: longer prompts are flagged."
    )
    suspect_share: float = param(
        0.6,
        check=finite_between(0, 1),
        help="suspect_key: the majority answer's share of the samples, at least.",
    )
    suspect_min_samples: int = param(8, check=at_least(1), help="suspect_key: samples a task needs.")
    suspect_max_pass_rate: float = param(
        0.05, check=finite_between(0, 1), help="suspect_key: the task's pass rate, at most."
    )
    suspect_model: str | None = param(
        None, help="suspect_key: only this model's samples (default: every model's)."
    )
    dry_run: bool = param(False, help="Check and print, write nothing.")

    def __post_init__(self):
        object.__setattr__(self, "rules", names(self.rules))
        validate(self)


@dataclass(frozen=True)
class BlastConfig:
    """What `rldata blast-radius` traces: the tasks flagged by one pack, one lint rule, or every flag."""

    pack: str | None = param(None, help="Tasks flagged by this eval pack (rldata decontaminate --name).")
    rule: str | None = param(None, help="Tasks flagged by this lint rule (e.g. suspect_key).")
    exports: tuple[str, ...] = param(
        (),
        flag="--export",
        cli_type=list[str],
        to_field=tuple,
        from_field=lambda v: None,
        help="Also check these export directories (repeatable); exports recorded in runs are always checked.",
    )

    def __post_init__(self):
        object.__setattr__(self, "exports", tuple(str(x) for x in self.exports or ()))
        validate(self)
        if self.pack is not None and self.rule is not None:
            raise ConfigError("give pack or rule, not both", field="rule")
