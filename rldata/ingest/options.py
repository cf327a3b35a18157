"""The parameters of `rldata ingest` (and :func:`rldata.api.ingest`), declared once (rldata.configs.fields).

A choice field (answer format, on_error) takes an Enum on the command line, so a misspelt choice
stays a usage error (exit 2) listing the choices, and the field holds the plain name; the preset
takes its names from its registry (plugins' too), a misspelt one a usage error as well.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from rldata.configs.fields import at_least, one_of, param, validate
from rldata.errors import ConfigError, DuplicateKeyError, unique_keys
from rldata.ingest.presets import ANSWER_FORMATS, PRESETS
from rldata.ingest.read import Limits

__all__ = ["ON_ERROR", "IngestConfig", "choice_value", "choices"]

ON_ERROR = ("fail", "skip")


def choices(name: str, names: tuple[str, ...]) -> type[Enum]:
    return Enum(name, {n: n for n in names}, type=str)


def choice_value(member: Any) -> Any:
    return member.value if isinstance(member, Enum) else member


def _json_object(text: Any) -> Any:
    """--config '{"min_terms": 2}' -> the mapping (a config file gives the mapping itself)."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKeyError as e:
        raise ConfigError(f"not valid JSON: {e}", field="config") from None
    except ValueError as e:
        raise ConfigError(f"not valid JSON: {e}", field="config") from None
    except RecursionError:  # thousands of nested brackets: Python's parser recurses
        raise ConfigError("not valid JSON: nested too deeply", field="config") from None


def _limits(value: Any) -> Limits | None:
    """--limit NAME=N items, a config file's mapping, or a Limits (from Python)."""
    if value is None or isinstance(value, Limits):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(Limits.__dataclass_fields__))
        if unknown:
            known = ", ".join(Limits.__dataclass_fields__)
            raise ConfigError(f"limits: unknown bound {unknown[0]!r}; bounds: {known}", field="limits")
        return Limits(**value)
    return Limits.parse(value)


@dataclass(frozen=True)
class IngestConfig:
    """Where `rldata ingest` reads tasks (a file, a bundled sample, a reasoning-gym dataset, an
    environment's generator), how it maps their fields, and what a bad record does."""

    path: str | None = param(
        None, cli=False, help="A .jsonl/.json, .parquet, .csv/.tsv file, or a dataset directory (PATH)."
    )
    preset: str | None = param(
        None,
        choices=PRESETS,
        usage_check=True,  # a misspelt preset is a usage error (exit 2), as a misspelt option is
        help="Column layout (default: the plain prompt/answer columns).",
    )
    sample: str | None = param(
        None, help="Ingest a bundled sample instead of PATH: arith, arith-heldout, gsm8k, gsm8k-test."
    )
    prompt_field: str | None = param(None, help="Column holding the prompt (text or chat messages).")
    answer_field: str | None = param(None, help="Column holding the answer; a.b reaches into a struct.")
    answer_format: str | None = param(
        None,
        check=one_of(*ANSWER_FORMATS),
        cli_type=choices("AnswerFormat", ANSWER_FORMATS),
        to_field=choice_value,
        help="How to read the answer: text, gsm8k (#### N) or boxed (last \\boxed{}).",
    )
    category_field: str | None = param(None, help="Column holding the category.")
    source: str | None = param(
        None,
        help="Source name for every task (default: the file's source column, the preset's name or the "
        "file stem).",
    )
    domain: str | None = param(
        None, help="Domain for every task (default: the file's domain column, else math)."
    )
    on_error: str = param(
        "fail",
        check=one_of(*ON_ERROR),
        cli_type=choices("OnError", ON_ERROR),
        to_field=choice_value,
        help="fail: a bad record stops the ingest, nothing is written; skip: the rest lands and the "
        "rejects are listed.",
    )
    decontaminate: str | None = param(
        None, help="Eval file: drop tasks sharing a word n-gram with its prompts."
    )
    ngram: int = param(13, check=at_least(1), help="n-gram length (words) for --decontaminate.")
    gym: str | None = param(
        None,
        help="Generate tasks with this reasoning-gym dataset instead of reading PATH (needs the gym "
        "extra); see docs/environments.md.",
    )
    env: str | None = param(
        None,
        help="Generate tasks with this registered environment's own reset (OpenEnv) instead of reading "
        "PATH; see docs/environments.md.",
    )
    n: int | None = param(None, help="--gym, --env: how many entries to generate.")
    # `--config` is the dataset's own config (as before options came from fields); the file of these
    # fields is `--config-file` for this command
    config: Any = param(
        None,
        cli_type=str,
        to_field=_json_object,
        help="--gym: the dataset's config, a JSON object (e.g. '{\"min_terms\": 2}'; a mapping in a "
        "config file).",
    )
    seed: int = param(0, help="--gym: the dataset's seed; --env: the first reset seed.")
    dry_run: bool = param(False, help="Read, check and count, but write nothing.")
    limits: Any = param(
        None,
        flag="--limit",
        cli_type=list[str],
        to_field=_limits,
        help="Raise or lower a bound on one record, NAME=N (repeatable): depth (JSON nesting, default "
        "100), line_bytes (16 MiB), field_bytes (4 MiB), prompt_chars (1,000,000); a mapping in a "
        "config file.",
    )

    def __post_init__(self):
        if self.path is not None and not isinstance(self.path, str):
            object.__setattr__(self, "path", str(self.path))  # a PathLike from Python
        if self.decontaminate is not None and not isinstance(self.decontaminate, str):
            object.__setattr__(self, "decontaminate", str(self.decontaminate))
        object.__setattr__(self, "limits", _limits(self.limits))
        object.__setattr__(self, "config", _json_object(self.config))
        validate(self)
        given = [k for k in ("path", "sample", "gym", "env") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ConfigError("give exactly one of path, sample or gym (or env)", field="path")
        if (self.gym or self.env) and self.n is None:
            raise ConfigError(
                f"{'gym' if self.gym else 'env'} needs n (how many entries to generate)", field="n"
            )
        if self.n is not None and self.n < 1:
            raise ConfigError(f"n must be at least 1, got {self.n}", field="n")
        if not self.gym and (self.config is not None or (self.n is not None and not self.env)):
            field = "n" if self.n is not None and not self.env else "config"
            raise ConfigError("n and config go with gym (n with env too)", field=field)
        if self.config is not None and not isinstance(self.config, dict):
            raise ConfigError(
                f"config must be a mapping (a JSON object), got {type(self.config).__name__}", field="config"
            )
