"""Ingest task files into the store's ``tasks`` table.

>>> summary = ingest(store, "train.jsonl", fields=preset("gsm8k"), on_error="skip")
>>> summary.added, summary.duplicates, summary.rejected

The pipeline, vectorized with Arrow/Polars/DuckDB (no per-row Python on the common path):
read chunks (:mod:`rldata.ingest.read`) -> map columns to task fields and reject rows that lack a prompt or an
answer, naming file:line and field (:mod:`rldata.ingest.mapping`, with the presets of :mod:`rldata.ingest.presets`) ->
normalize the prompt -> drop duplicate prompts (in the file and already in the store) -> optionally
drop prompts that share a word n-gram with an eval set -> ``task_id`` = sha256 of the normalized
(prompt, answer, source) -> ONE insert-if-absent commit, made only if ``tasks`` is unchanged since the
dedup read it (:func:`add_tasks`; else read again), so concurrent ingests end as serial ones.  With ``on_error="fail"`` a single bad record
stops the ingest before anything is written; with ``"skip"`` the good records land and the rejects
are returned.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import json
import random
import time
import uuid
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import polars as pl

from rldata.console import progress
from rldata.errors import ConfigError, InputError, RldataError
from rldata.ingest.mapping import (
    chunk_tasks,
    find,
    normalize_series,
    normalize_text,
    prompt_exprs,
    task_id,
    with_ids,
)
from rldata.ingest.presets import PRESETS, Fields, preset
from rldata.ingest.read import POS, Limits, Reject, read_chunks
from rldata.results import Result
from rldata.store import run_commits
from rldata.store.core import StaleReadError
from rldata.store.outputs import staged_output

__all__ = [
    "PRESETS",
    "SAMPLES",
    "Fields",
    "IngestSummary",
    "Limits",
    "contaminated",
    "eval_ngrams",
    "ingest",
    "load_tasks",
    "normalize_text",
    "preset",
    "sample_path",
    "task_id",
]

_PROGRESS_MIN_BYTES = 16 << 20
_INGEST_TRIES = 50  # concurrent ingests each land in turn: one retry per writer ahead of this one

SAMPLES = {  # --sample NAME: bundled file (under rldata.sample_data) and its preset
    "arith": ("arith_tasks.jsonl", "default"),
    "arith-heldout": ("arith_heldout.jsonl", "default"),
    "gsm8k": ("gsm8k/train.jsonl", "gsm8k"),
    "gsm8k-test": ("gsm8k/test.jsonl", "gsm8k"),
}


def load_tasks(
    path,
    *,
    fields: Fields | None = None,
    source: str | None = None,
    domain: str | None = None,
    on_error: str = "fail",
    show_progress: bool = False,
    ids: bool = True,
    limits: Limits | None = None,
) -> tuple[pl.DataFrame | None, list[Reject], int]:
    """Read ``path`` into task rows (columns of ``tasks`` + ``__pos``/``__norm``), rejects and records read.

    ``on_error="fail"`` raises :class:`InputError` at the first bad record.  ``ids=False`` leaves
    ``task_id`` out (the caller adds it after dropping duplicates).
    """
    if on_error not in ("fail", "skip"):
        raise ConfigError(f"on_error must be 'fail' or 'skip', got {on_error!r}", field="on_error")
    path = Path(path)
    fields = fields or preset(None)
    default_source = fields.default_source or (path.stem if path.is_file() else path.name)
    parts, rejects, n_read = [], [], 0
    size = _size(path)
    show = show_progress and size >= _PROGRESS_MIN_BYTES  # a bar only for files that take a while
    bar_cm = progress(f"ingest {path.name}", total=max(size >> 10, 1), unit="KiB") if show else nullcontext()
    with bar_cm as bar:
        exact = [column for column, _ in fields.answer]  # answers keep a JSON number's text
        for chunk in read_chunks(path, exact=exact, limits=limits):
            ok, bad = chunk_tasks(
                chunk, fields, source=source, domain=domain, default_source=default_source, limits=limits
            )
            n_read += chunk.frame.height + len(chunk.rejects)
            if bad and on_error == "fail":
                first = bad[0][1]
                raise InputError(
                    first.path,
                    first.where,
                    f"{first.reason} (nothing was written; --on-error skip ingests the other records)",
                    first.field,
                )
            rejects += [r for _, r in bad]
            parts.append(ok)
            if show:
                bar.advance(chunk.nbytes >> 10)
    frame = pl.concat(parts, how="vertical_relaxed") if parts else None
    if ids and frame is not None:
        frame = with_ids(frame)
    return frame, rejects, n_read


def _size(path: Path) -> int:
    return (
        path.stat().st_size
        if path.is_file()
        else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    )


# ---- decontamination ----------------------------------------------------------------------------
def _words(norm: pl.Series) -> list[list[str]]:
    return norm.str.to_lowercase().str.extract_all(r"\w+|[^\w\s]").to_list()  # words and symbols


def _grams(words: list[str] | None, n: int):
    if not words:
        return
    if len(words) < n:  # a short text is one gram: only a whole-text match counts
        yield " ".join(words)
        return
    for i in range(len(words) - n + 1):
        yield " ".join(words[i : i + n])


def eval_ngrams(path, *, n: int = 13, fields: Fields | None = None) -> set[str]:
    """The word n-grams of every prompt of an eval file (its prompt column found as for ingest)."""
    names = (*(fields or preset(None)).prompt, "prompt", "question", "problem", "messages")
    grams: set[str] = set()
    for chunk in read_chunks(path):
        if chunk.rejects:  # a line of the eval set that cannot be read would go unchecked
            raise chunk.rejects[0].error()
        hit = find(chunk.frame, names)
        if hit is None:
            raise InputError(str(path), None, f"no prompt column (tried {', '.join(dict.fromkeys(names))})")
        prompt, _ = prompt_exprs(chunk.frame, Fields(prompt=(hit[2],)), [])
        texts = chunk.frame.select(prompt.alias("p")).to_series().drop_nulls()
        for words in _words(normalize_series(texts)):
            grams.update(_grams(words, n))
    return grams


def contaminated(norm_prompts: pl.Series, grams: set[str], *, n: int = 13) -> pl.Series:
    """True where a (normalized) prompt shares an n-gram with ``grams``."""
    hits = [any(g in grams for g in _grams(w, n)) for w in _words(norm_prompts)]
    return pl.Series("contaminated", hits, dtype=pl.Boolean)


# ---- the whole ingest ---------------------------------------------------------------------------
@dataclass(frozen=True)
class IngestSummary(Result):
    """What one ingest did; ``read == added + duplicates + rejected + decontaminated``."""

    path: str
    read: int  # records in the file (including rejected ones)
    added: int
    duplicates: int  # prompt seen earlier in the file or already in the store
    rejected: int
    decontaminated: int
    rejects: tuple[Reject, ...] = field(default=(), repr=False)
    version: int | None = None  # the tasks table's version after the ingest

    def row(self) -> dict:
        d = asdict(self)
        d.pop("rejects")
        return d


def sample_path(name: str) -> Path:
    """Path of a bundled sample file (``arith``, ``arith-heldout``, ``gsm8k``, ``gsm8k-test``)."""
    if name not in SAMPLES:
        raise RldataError(f"unknown sample {name!r}; samples: {', '.join(SAMPLES)}")
    ref = importlib.resources.files("rldata.sample_data").joinpath(SAMPLES[name][0])
    if not ref.is_file():
        raise RldataError(f"sample {name!r} is not bundled in this install ({ref})")
    return Path(str(ref))


def ingest(
    store,
    path,
    *,
    fields: Fields | None = None,
    source: str | None = None,
    domain: str | None = None,
    on_error: str = "fail",
    decontaminate=None,
    ngram: int = 13,
    dry_run: bool = False,
    show_progress: bool = False,
    record_run: bool = True,
    limits: Limits | None = None,
    rejects_out=None,
) -> IngestSummary:
    """Read ``path`` and add its new tasks to ``store`` in one commit; see the module docstring.
    ``rejects_out``: a file for every reject (JSON lines), written before the commit so a path that
    cannot take it fails the ingest with the store as it was."""
    if ngram < 1:
        raise ConfigError(f"ngram must be >= 1, got {ngram}", field="ngram")
    started = dt.datetime.now(dt.UTC)
    version_before = store.version("tasks")
    grams = eval_ngrams(decontaminate, n=ngram, fields=fields) if decontaminate else None
    frame, rejects, n_read = load_tasks(
        path,
        fields=fields,
        source=source,
        domain=domain,
        on_error=on_error,
        show_progress=show_progress,
        ids=False,
        limits=limits,
    )
    if n_read == 0:  # an empty file is a mistake to report, not a run to record
        raise InputError(str(path), None, "no records to ingest (the file is empty)")
    added, dups, decont, version = 0, 0, 0, version_before
    firsts = frame.filter(pl.col("__norm").is_first_distinct()) if frame is not None else None

    def unwanted(new: pl.DataFrame) -> pl.Series | None:
        return contaminated(new["__norm"], grams, n=ngram) if grams else None

    args = {
        "path": str(path),
        "fields": asdict(fields or preset(None)),
        "source": source,
        "domain": domain,
        "on_error": on_error,
        "decontaminate": str(decontaminate or ""),
        "ngram": ngram,
    }
    run = IngestRun(str(path), args, started, version_before) if record_run and not dry_run else None
    with staged_output(rejects_out, rejects_jsonl(rejects), name="rejects"):
        if frame is not None and frame.height:
            added, dups, decont, version = add_tasks(
                store, firsts, unwanted=unwanted, dry_run=dry_run, commit_info=run and run.tag()
            )
            dups += frame.height - firsts.height
    summary = IngestSummary(str(path), n_read, added, dups, len(rejects), decont, tuple(rejects), version)
    if run is not None:
        run.record(store, summary)
    return summary


@dataclass
class IngestRun:
    """The ``runs`` row of one ingest, its id chosen before the tasks commit, which carries it
    (:mod:`rldata.store.run_commits`): a row that then fails to land is found by ``rldata doctor``."""

    path: str  # as the summary names the input
    args: dict
    started: dt.datetime
    version_before: int
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def tag(self) -> dict[str, str]:
        versions = {"tasks": self.version_before}
        return run_commits.tag(
            self.run_id,
            "ingest",
            path=self.path,
            args=self.args,
            store_versions=versions,
            started=self.started,
        )

    def record(self, store, summary: IngestSummary) -> None:
        try:
            _record_run(store, summary, self.started, self.version_before, self.args, run_id=self.run_id)
        except (RldataError, OSError) as e:  # the tasks landed: say so, and how it gets recorded
            raise RldataError(
                f"ingested {summary.added} task(s) (tasks version {summary.version}) but could not "
                f"record the run {self.run_id}: {e}; rldata doctor --repair records it"
            ) from None


def rejects_jsonl(rejects) -> str:
    """Rejects as JSON lines: path, where (line or record), field, reason."""
    return "".join(
        json.dumps({"path": r.path, "where": r.where, "field": r.field, "reason": r.reason}) + "\n"
        for r in rejects
    )


def add_tasks(
    store, firsts: pl.DataFrame, *, unwanted=None, dry_run: bool = False, commit_info: dict | None = None
) -> tuple[int, int, int, int]:
    """Add the rows of ``firsts`` (distinct ``__norm``) whose normalized prompt the store lacks, in one
    commit; ``unwanted(new)`` may mask rows out (decontamination).  Returns (added, duplicates,
    unwanted, tasks version).  ``commit_info`` goes into that commit's metadata (the run's tag).

    The store is read at one version and the commit goes through only if ``tasks`` is unchanged since:
    a concurrent ingest that landed first makes this one read again, so ingests of the same prompts at
    once end as one after another would (the key, ``task_id``, includes the answer and cannot).
    """
    for _ in range(_INGEST_TRIES):
        version = store.version("tasks")
        new = _drop_known(firsts, store, version)
        dups, removed = firsts.height - new.height, 0
        mask = unwanted(new) if new.height and unwanted is not None else None
        if mask is not None:
            removed = int(mask.sum())
            new = new.filter(~mask)
        if dry_run or not new.height:
            return (new.height if dry_run else 0), dups, removed, version
        rows = with_ids(new).drop("__norm", *([POS] if POS in new.columns else [])).to_arrow()
        store.preflight({"tasks": rows.nbytes, "runs": 0})  # a full disk fails here, before any commit
        try:
            added = store.append_if_unchanged("tasks", rows, version=version, commit_info=commit_info)
        except StaleReadError:
            time.sleep(random.uniform(0.05, 0.3))  # another writer landed first: read it and retry
            continue
        return added, dups + new.height - added, removed, store.version("tasks")
    raise RldataError(f"tasks kept changing under this ingest: gave up after {_INGEST_TRIES} tries")


def _drop_known(new: pl.DataFrame, store, version: int) -> pl.DataFrame:
    """Rows of ``new`` whose normalized prompt is not in the store's tasks at ``version``."""
    tasks = store.dataset("tasks", version=version)
    if tasks.count_rows() == 0:
        return new
    prompts = pl.from_arrow(tasks.to_table(columns=["prompt"]))["prompt"].unique()
    # the same raw text has the same normalized text: a re-ingest needs no normalizing of the store
    new = new.join(prompts.to_frame("prompt"), on="prompt", how="anti", maintain_order="left")
    if new.height == 0:
        return new
    known = normalize_series(prompts).unique().to_frame("__norm")
    return new.join(known, on="__norm", how="anti", maintain_order="left")


def _record_run(
    store, summary: IngestSummary, started, version_before: int, args: dict, *, run_id: str
) -> None:
    store.append(
        "runs",
        [
            {
                "run_id": run_id,
                "kind": "ingest",
                "args": json.dumps(args, default=str),
                "store_versions": json.dumps({"tasks": version_before}),
                "status": "done",
                "started_at": started,
                "ended_at": dt.datetime.now(dt.UTC),
                "summary": json.dumps(summary.row()),
            }
        ],
    )
