"""Readers for rollout dumps other trainers write, each yielding one :class:`Rollout` per sample.

- veRL (``trainer.rollout_data_dir``): ``{step}.jsonl``, one JSON object per line with ``input``,
  ``output``, ``gts``, ``score``, ``step`` and any extra reward info (kept as detail).
- TRL (``GRPOConfig(log_completions=True)``): ``<output_dir>/completions/completions_<step>.parquet``
  with ``step``, ``prompt``, ``completion`` (strings, or lists of ``{role, content}`` messages), one
  column per reward function, extra logged columns and ``advantage``.
- Generic JSONL: one sample per line; a field map says which keys hold prompt, completion, answer,
  score, step and advantage.

A malformed record raises :class:`rldata.errors.InputError` naming the file, the line (JSONL, 1-based)
or row (Parquet, 0-based) and the field.

Each format is one :class:`ImportFormat` record in the :data:`READERS` registry: its reader, where its
files are, and its own options (a frozen dataclass, set as ``--option KEY=VALUE``).  A new format is
one ``READERS.register(name, ImportFormat(...))`` call, or an installed package's ``rldata.imports``
entry point naming such a record; the CLI's ``--format`` takes any registered name.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rldata.configs.fields import param
from rldata.errors import ConfigError, DuplicateKeyError, InputError, unique_keys
from rldata.plugins import PluginError
from rldata.registry import Registry
from rldata.store.validate import control_char

__all__ = [
    "JSONL_FIELDS",
    "READERS",
    "TRL_RESERVED",
    "ImportFormat",
    "JsonlImportOptions",
    "Rollout",
    "TrlImportOptions",
    "read_jsonl",
    "read_trl",
    "read_verl",
    "rollout_files",
]

JSONL_FIELDS = ("prompt", "completion", "answer", "score", "step", "advantage")
TRL_RESERVED = ("step", "prompt", "completion", "advantage", "image", "images")


@dataclass(frozen=True)
class Rollout:
    """One sample as a trainer logged it, before it is linked to a task."""

    file: str  # the file's name (not its directory: a moved dump keeps its identity)
    where: str  # "line 3" / "row 0": for messages and for the sample's identity
    digest: str  # hash of the raw record: part of the trajectory id
    prompt: str
    completion: str
    prompt_messages: list[dict] | None = None
    completion_messages: list[dict] | None = None
    answer: str | None = None
    step: int | None = None
    advantage: float | None = None
    scores: dict[str, float | None] = field(default_factory=dict)  # layer -> score ("answer" for one score)
    detail: dict[str, Any] = field(default_factory=dict)


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def rollout_files(path: str | Path, fmt: str) -> list[Path]:
    """The dump files under ``path`` (a file, or a directory of them) in step order."""
    rec = READERS.resolve(fmt)
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), None, "no such file or directory")
    if p.is_file():
        return [p]
    suffix = rec.suffix
    files = [f for f in p.iterdir() if f.is_file() and f.suffix == suffix]
    if not files and rec.subdir:  # e.g. TRL's output_dir: its logs live in completions/
        files = [f for f in (p / rec.subdir).glob(f"*{suffix}") if f.is_file()]
    if not files:
        raise InputError(str(p), None, f"no *{suffix} files to import")

    def order(f: Path):  # veRL names files by step: 10.jsonl sorts after 9.jsonl
        digits = "".join(c for c in f.stem if c.isdigit())
        return (int(digits) if digits else -1, f.name)

    return sorted(files, key=order)


# ---- field checks -----------------------------------------------------------------------------
def _bad(path: Path, where: str, field_: str | None, reason: str) -> InputError:
    return InputError(str(path), where, reason, field_)


def _text_or_messages(v: Any, path: Path, where: str, name: str) -> tuple[str, list[dict] | None]:
    """A prompt or completion: a string, or a list of {role, content} messages (text = last turn)."""
    if isinstance(v, str):
        return v, None
    if (
        isinstance(v, (list, tuple))
        and v
        and all(
            isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in v
        )
    ):
        msgs = [{"role": m["role"], "content": m["content"]} for m in v]
        if name == "prompt":
            users = [m["content"] for m in msgs if m["role"] == "user"]
            return (users[-1] if users else msgs[-1]["content"]), msgs
        return "".join(m["content"] for m in msgs if m["role"] == "assistant") or msgs[-1]["content"], msgs
    if v is None:
        raise _bad(path, where, name, "missing required field")
    raise _bad(
        path,
        where,
        name,
        f"expected a string or a list of {{role, content}} messages, got {type(v).__name__}",
    )


def _plain(path: Path, where: str, name: str, text: str | None, msgs: list[dict] | None = None) -> None:
    """A prompt or reference answer with a refused control character (rldata.store.validate.control_char)
    is that record's error, naming the field."""
    for t in [text, *(m["content"] for m in msgs or [])]:
        why = control_char(t) if isinstance(t, str) else None
        if why:
            raise _bad(path, where, name, why)


def _number(v: Any, path: Path, where: str, name: str, *, required: bool) -> float | None:
    if v is None:
        if required:
            raise _bad(path, where, name, "missing required field")
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _bad(path, where, name, f"expected a number, got {type(v).__name__} {v!r:.40}")
    try:
        x = float(v)
    except OverflowError:  # an integer beyond a double's range
        x = math.inf
    if not math.isfinite(x):  # NaN, Infinity or 1e400 in the dump: a reward must be a real number
        raise _bad(path, where, name, f"must be a finite number, got {str(v)[:40]}")
    return x


def _int(v: Any, path: Path, where: str, name: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        raise _bad(path, where, name, f"expected an integer, got {type(v).__name__} {v!r:.40}")
    return v


def _answer(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, default=str)  # lists / numbers: keep them, as JSON text


def _check_text(obj: Any) -> None:
    """Raise UnicodeError for a lone surrogate (a JSON \\ud800 escape): no table may hold it."""
    json.dumps(obj, ensure_ascii=False).encode("utf-8")


class _NonFiniteError(ValueError):
    """NaN / Infinity in a dump: JSON has no such numbers, and no reward or score may be one."""


def _no_constant(name: str):
    raise _NonFiniteError(f"non-finite number {name}: numbers must be finite")


def _json_lines(path: Path) -> Iterator[tuple[str, str, dict | InputError]]:
    """(line number, raw line, object); a line that is not a JSON object comes as an InputError value
    instead, so ``--on-error skip`` can go on with the next line."""
    with open(path, "rb") as f:  # bytes: one undecodable line is that line's error, not the file's
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            where = f"{lineno}"
            try:
                line = raw.decode("utf-8")
                obj = json.loads(line, parse_constant=_no_constant, object_pairs_hook=unique_keys)
                _check_text(obj)
            except DuplicateKeyError as e:
                yield where, line, _bad(path, where, e.key, str(e))
                continue
            except _NonFiniteError as e:
                yield where, line, _bad(path, where, None, str(e))
                continue
            except RecursionError:  # thousands of nested brackets: Python's parser recurses
                yield where, line, _bad(path, where, None, "invalid JSON (nested too deeply)")
                continue
            except UnicodeError:
                yield where, raw.decode("utf-8", "replace"), _bad(path, where, None, "not valid UTF-8")
                continue
            except json.JSONDecodeError as e:
                yield where, line, _bad(path, where, None, f"invalid JSON ({e.msg})")
                continue
            if not isinstance(obj, dict):
                obj = _bad(path, where, None, f"expected a JSON object, got {type(obj).__name__}")
            yield where, line, obj


# ---- the three formats ------------------------------------------------------------------------
def read_verl(path: Path, **_: Any) -> Iterator[Rollout | InputError]:
    """veRL rollout dump; ``step`` defaults to the file's numeric name."""
    stem_step = int(path.stem) if path.stem.isdigit() else None
    for where, line, obj in _json_lines(path):
        if isinstance(obj, InputError):
            yield obj
            continue
        try:
            prompt, pmsgs = _text_or_messages(obj.get("input"), path, where, "input")
            _plain(path, where, "input", prompt, pmsgs)
            _plain(path, where, "gts", _answer(obj.get("gts")))
            completion, cmsgs = _text_or_messages(obj.get("output"), path, where, "output")
            score = _number(obj.get("score"), path, where, "score", required=True)
            step = _int(obj.get("step"), path, where, "step")
        except InputError as e:
            yield e
            continue
        extra = {k: v for k, v in obj.items() if k not in ("input", "output", "gts", "score", "step")}
        yield Rollout(
            path.name,
            f"line {where}",
            _digest(line),
            prompt,
            completion,
            pmsgs,
            cmsgs,
            answer=_answer(obj.get("gts")),
            step=step if step is not None else stem_step,
            scores={"answer": score},
            detail=extra,
        )


def read_trl(
    path: Path, *, reward_columns: tuple[str, ...] | None = None, **_: Any
) -> Iterator[Rollout | InputError]:
    """TRL completions log; reward columns default to every numeric column TRL does not reserve."""
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(str(path), None, f"not a readable Parquet file ({e})") from None
    for col in ("prompt", "completion"):
        if col not in table.column_names:
            raise InputError(str(path), None, "missing required column", col)
    if reward_columns:
        absent = [c for c in reward_columns if c not in table.column_names]
        if absent:
            raise InputError(str(path), None, "reward column not in the file", absent[0])
        rewards = list(reward_columns)
    else:
        rewards = [
            f.name
            for f in table.schema
            if f.name not in TRL_RESERVED and (pa.types.is_floating(f.type) or pa.types.is_integer(f.type))
        ]
    if not rewards:
        raise InputError(str(path), None, "no reward columns found (name them with --reward-cols)")
    i = -1
    for batch in table.to_batches(max_chunksize=4096):
        for obj in batch.to_pylist():
            i += 1
            where = f"row {i}"
            try:
                prompt, pmsgs = _text_or_messages(obj.get("prompt"), path, where, "prompt")
                _plain(path, where, "prompt", prompt, pmsgs)
                completion, cmsgs = _text_or_messages(obj.get("completion"), path, where, "completion")
                scores = {c: _number(obj.get(c), path, where, c, required=False) for c in rewards}
                step = _int(obj.get("step"), path, where, "step")
                adv = _number(obj.get("advantage"), path, where, "advantage", required=False)
            except InputError as e:
                yield e
                continue
            extra = {k: v for k, v in obj.items() if k not in TRL_RESERVED and k not in rewards}
            raw = json.dumps(obj, sort_keys=True, default=str)
            yield Rollout(
                path.name,
                where,
                _digest(raw),
                prompt,
                completion,
                pmsgs,
                cmsgs,
                step=step,
                advantage=adv,
                scores=scores,
                detail=extra,
            )


def read_jsonl(
    path: Path, *, field_map: Mapping[str, str] | None = None, **_: Any
) -> Iterator[Rollout | InputError]:
    """Generic JSONL: ``field_map`` maps rldata names (prompt, completion, ...) to the file's keys."""
    fm = {k: k for k in JSONL_FIELDS} | dict(field_map or {})
    used = set(fm.values())
    for where, line, obj in _json_lines(path):
        if isinstance(obj, InputError):
            yield obj
            continue
        try:
            prompt, pmsgs = _text_or_messages(obj.get(fm["prompt"]), path, where, fm["prompt"])
            _plain(path, where, fm["prompt"], prompt, pmsgs)
            _plain(path, where, fm["answer"], _answer(obj.get(fm["answer"])))
            completion, cmsgs = _text_or_messages(obj.get(fm["completion"]), path, where, fm["completion"])
            score = _number(obj.get(fm["score"]), path, where, fm["score"], required=False)
            step = _int(obj.get(fm["step"]), path, where, fm["step"])
            adv = _number(obj.get(fm["advantage"]), path, where, fm["advantage"], required=False)
        except InputError as e:
            yield e
            continue
        extra = {k: v for k, v in obj.items() if k not in used}
        yield Rollout(
            path.name,
            f"line {where}",
            _digest(line),
            prompt,
            completion,
            pmsgs,
            cmsgs,
            answer=_answer(obj.get(fm["answer"])),
            step=step,
            advantage=adv,
            scores={"answer": score} if score is not None else {},
            detail=extra,
        )


# ---- the registry: one record per format, with its own options --------------------------------
@dataclass(frozen=True)
class JsonlImportOptions:
    """The file's key for each rldata name (default: the same name)."""

    prompt: str = param("prompt", help="The file's key of the prompt.")
    completion: str = param("completion", help="The file's key of the completion.")
    answer: str = param("answer", help="The file's key of the reference answer.")
    score: str = param("score", help="The file's key of the reward.")
    step: str = param("step", help="The file's key of the training step.")
    advantage: str = param("advantage", help="The file's key of the advantage.")

    def __post_init__(self):
        for k, v in asdict(self).items():
            if not isinstance(v, str) or not v:
                raise ConfigError(f"field {k}: the file's key must be a non-empty string, got {v!r}", field=k)


@dataclass(frozen=True)
class TrlImportOptions:
    reward_columns: tuple[str, ...] = param(
        (), help="Reward columns, comma-separated (default: every numeric column TRL does not reserve)."
    )

    def __post_init__(self):
        cols = self.reward_columns
        if isinstance(cols, str):  # "a,b" from --option reward_columns=a,b
            cols = [c.strip() for c in cols.split(",") if c.strip()]
        object.__setattr__(self, "reward_columns", tuple(cols))


@dataclass(frozen=True)
class ImportFormat:
    """One dump layout: ``read(path, opts)`` yields a Rollout (or an InputError) per record of one
    file; the files of a directory are its ``*suffix`` files (else those in ``subdir``);
    ``options`` is its options dataclass (None: it has none)."""

    name: str
    read: Callable[[Path, Any], Iterator[Rollout | InputError]]
    suffix: str = ".jsonl"
    subdir: str | None = None
    options: type | None = None
    help: str = ""


def _check_record(obj: Any, what: str) -> Any:
    if not isinstance(obj, ImportFormat):
        raise PluginError(f"import format {what} is not an ImportFormat record")
    return obj


READERS: Registry = Registry(
    "import format",
    group="rldata.imports",
    check=_check_record,
    error=ConfigError,
    field="format",
    sort_known=False,
)
READERS.register("verl", ImportFormat("verl", lambda p, o: read_verl(p), help="veRL rollout_data_dir JSONL."))
READERS.register(
    "trl",
    ImportFormat(
        "trl",
        lambda p, o: read_trl(p, reward_columns=o.reward_columns or None),
        suffix=".parquet",
        subdir="completions",
        options=TrlImportOptions,
        help="TRL completions logs (log_completions=True).",
    ),
)
READERS.register(
    "jsonl",
    ImportFormat(
        "jsonl",
        lambda p, o: read_jsonl(p, field_map=asdict(o)),
        options=JsonlImportOptions,
        help="Any JSONL, one sample a line; options map rldata names to its keys.",
    ),
)
