"""What every stage returns: a frozen dataclass with ``to_dict()`` (plain, JSON-friendly data)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "CostResult",
    "EnvResult",
    "ExportResult",
    "JudgeResult",
    "PassratesResult",
    "ReportResult",
    "Result",
    "SampleResult",
    "TableResult",
    "TrainResult",
    "VerifyResult",
    "frozen",
    "plain",
]


def plain(v: Any) -> Any:
    """A JSON-friendly copy: dataclasses and mappings to dicts, tuples to lists, paths to str, frames to rows."""
    if is_dataclass(v) and not isinstance(v, type):
        return {f.name: plain(getattr(v, f.name)) for f in fields(v)}
    if isinstance(v, Mapping):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    if hasattr(v, "to_dicts"):  # a Polars frame
        return v.to_dicts()
    return v


def frozen(v: Any) -> Any:
    """Lists become tuples and dicts read-only mappings, so a frozen result cannot change in place."""
    if isinstance(v, list):
        return tuple(frozen(x) for x in v)
    if isinstance(v, dict):
        return MappingProxyType({k: frozen(x) for k, x in v.items()})
    return v


class Result:
    """Mixin of the stage results (each a ``@dataclass(frozen=True)``)."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def of(cls, summary: Any):
        """The frozen result holding the fields of a job's summary (which it accumulates while running)."""
        return cls(**{f.name: frozen(getattr(summary, f.name)) for f in fields(cls)})


# ---- results of the long-running jobs (their summaries are accumulated while they run) ---------
@dataclass(frozen=True)
class SampleResult(Result):
    """What one ``sample`` job did (see :class:`rldata.jobs.sample.SampleSummary` for each field)."""

    run_id: str | None
    model: str
    params_hash: str
    tasks: int
    tasks_already_done: int
    tasks_sampled: int
    samples: int
    correct: int
    errors: int
    no_answer: int
    seconds: float
    noop: bool
    prompt_too_long: int
    samples_skipped: int
    stop_rule: str
    adaptive_rounds: int
    stopped_early: int
    reward_mean: float | None
    env_errors: int
    episode_rounds: int
    engines: int
    engine_busy_frac: float | None
    tool_call_frac: float | None
    time_engine_start_s: float
    time_sampling_s: float
    time_verify_s: float
    time_commit_s: float
    time_ledger_s: float

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "samples_per_s": round(self.samples_per_s, 2)}


@dataclass(frozen=True)
class VerifyResult(Result):
    """What one ``verify`` job did (see :class:`rldata.jobs.verify.VerifySummary`)."""

    run_id: str | None
    verifiers: tuple[str, ...]
    trajectories: int
    already_verified: int
    verified: int
    correct: int
    errors: int
    no_answer: int
    ledger_rows: int
    seconds: float
    noop: bool


@dataclass(frozen=True)
class TrainResult(Result):
    """What one ``train`` invocation did (see :class:`rldata.trainer.driver.TrainSummary`)."""

    run_id: str
    model: str
    steps: int
    last_step: int
    policy_version: int
    checkpoint: str | None
    samples: int
    groups_kept: int
    groups_dropped: int
    evals: tuple  # ({"step", "model", "accuracy", "tasks"}, ...)
    seconds: float
    time: Mapping[str, float]

    @property
    def eval_first(self) -> float | None:
        return min(self.evals, key=lambda e: e["step"])["accuracy"] if self.evals else None

    @property
    def eval_last(self) -> float | None:
        return max(self.evals, key=lambda e: e["step"])["accuracy"] if self.evals else None


@dataclass(frozen=True)
class ExportResult(Result):
    """Where an export went and its manifest (lineage, content hash, files)."""

    out: str
    rows: int
    files: tuple[str, ...]  # paths relative to out (the manifest has their sizes and hashes)
    manifest: Mapping[str, Any]


@dataclass(frozen=True)
class ReportResult(Result):
    """The files a report wrote: ``html`` is the page to open; ``files`` maps each name to its path."""

    out: str
    html: str
    files: Mapping[str, str]
    selection: str | None


# ---- results of the verbs that read or price (``rows`` is a Polars frame: print it, filter it) ----
@dataclass(frozen=True)
class TableResult(Result):
    """Rows a verb read (``rows``, a Polars frame; ``to_dict()`` gives them as a list of dicts)."""

    rows: Any  # polars.DataFrame (annotated Any: this module loads without Polars)


@dataclass(frozen=True)
class PassratesResult(TableResult):
    """The ledger rows asked for, one per (task, model, params, verifier), with their Wilson interval,
    an unbiased ``pass@k`` column per ``k`` and ``early_stop`` (an adaptive rule stopped the row early:
    its pass rate is biased, see docs/adaptive.md)."""

    k: tuple[int, ...] = ()


@dataclass(frozen=True)
class CostResult(TableResult):
    """One row per priced scenario (a token budget, a stored run, a run scaled up): FLOPs, GPU-hours
    (and wall-hours with ``gpus``); ``warnings`` say where the price is an overestimate."""

    warnings: tuple[str, ...] = ()

    @property
    def gpu_hours(self) -> float:
        """The GPU-hours of all the scenarios together."""
        return float(self.rows["gpu_hours"].sum()) if self.rows.height else 0.0


@dataclass(frozen=True)
class JudgeResult(Result):
    """What one ``judge`` call added: ``verdicts`` counts the judge's rows in ``verifications`` (all
    of them, this call's and earlier ones) by ``passed``, with their errors."""

    mode: str  # pointwise | pairwise
    verifier: str  # the verifications rows' verifier: genrm | genrm_pair
    judge: str  # the judge's version (model and prompt)
    added: int  # verdict rows this call wrote
    verdicts: Any  # polars.DataFrame: passed, n, errors


@dataclass(frozen=True)
class EnvResult(Result):
    """One registered environment version (``new``: this call added it)."""

    env_id: str
    version: str
    kind: str
    spec: str  # the spec as JSON (the row's ``spec`` column)
    new: bool
