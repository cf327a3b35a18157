"""What every stage returns: a frozen dataclass with ``to_dict()`` (plain, JSON-friendly data)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, make_dataclass
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
    "RewardsResult",
    "SampleResult",
    "TableResult",
    "TrainResult",
    "VerifyResult",
    "accumulator",
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


def accumulator(result: type, name: str, *, module: str | None = None) -> type:
    """A mutable dataclass with the fields and defaults of the frozen ``result``, for a job to fill in
    while it runs; ``result()`` returns the frozen ``result``, and ``to_dict()`` and the properties
    are ``result``'s.  The fields are declared once, on ``result``."""
    specs = []
    for f in fields(result):
        if f.default is not MISSING:
            specs.append((f.name, f.type, field(default=f.default)))
        elif f.default_factory is not MISSING:
            specs.append((f.name, f.type, field(default_factory=f.default_factory)))
        else:
            specs.append((f.name, f.type))

    def to_result(self):
        return result.of(self)

    namespace = {k: v for k, v in vars(result).items() if isinstance(v, property)}
    namespace |= {"result": to_result, "to_dict": lambda self: to_result(self).to_dict()}
    namespace["__doc__"] = f"The mutable twin of :class:`{result.__module__}.{result.__name__}`."
    cls = make_dataclass(name, specs, namespace=namespace)
    cls.__module__ = module or result.__module__  # make_dataclass takes module= only from Python 3.12
    return cls


# ---- results of the long-running jobs (their summaries are accumulated while they run) ---------
@dataclass(frozen=True)
class SampleResult(Result):
    """What one ``sample`` job did.  The job fills in a mutable twin of it while it runs
    (:class:`rldata.jobs.sample.SampleSummary`, made by :func:`accumulator` from these fields)."""

    run_id: str | None
    model: str
    params_hash: str
    tasks: int
    tasks_already_done: int
    tasks_sampled: int = 0
    samples: int = 0
    correct: int = 0
    errors: int = 0
    no_answer: int = 0  # parse failures: verified completions with no extractable answer
    seconds: float = 0.0
    noop: bool = False
    prompt_too_long: int = 0  # tasks whose prompt leaves no room in the engine's context (not generated)
    not_generated: int = 0  # their samples: error verdicts in the ledger, not counted in ``errors``
    samples_skipped: int = 0  # samples a concurrent job over the same tasks had already written
    stop_rule: str = "fixed"  # fixed | exact | sequential (rldata.adaptive)
    chat_template: str = "off"  # how plain tasks were sent: on (the model's chat template), off (raw text)
    adaptive_rounds: int = 0  # rounds of draws an adaptive job made
    stopped_early: int = 0  # tasks an adaptive job settled before N samples
    skipped_predicted: int = 0  # tasks --skip-predicted did not sample (rows of sample_predictions)
    reward_mean: float | None = None  # mean composed reward of the samples this run verified
    env_errors: int = 0  # episodes whose environment raised, hung or returned garbage (error verdicts)
    episode_rounds: int = 0  # episode batches: generate calls (two queued per engine on large batches)
    engines: int = 0  # engine actors the job started (jobs.actors.default_engines when not told)
    engine_busy_frac: float | None = None  # share of the sampling time the engines were generating
    tool_call_frac: float | None = None  # episodes that called a tool at least once
    # Where the wall time went (seconds).  Verify and commit run in the driver while the engines
    # generate the next batches, so they only cost wall time when the engines wait for them.
    time_engine_start_s: float = 0.0  # engine actors started and their model loaded
    time_sampling_s: float = 0.0  # first generate call to the last commit
    time_verify_s: float = 0.0  # the driver waiting for verdicts
    time_commit_s: float = 0.0  # rows built and committed (trajectories, verifications, ledger)
    time_ledger_s: float = 0.0  # the final ledger rebuild

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        return {
            **{k: round(v, 3) if k.startswith("time_") else v for k, v in d.items()},
            "samples_per_s": round(self.samples_per_s, 2),
        }


@dataclass(frozen=True)
class VerifyResult(Result):
    """What one ``verify`` job did; the job fills in its mutable twin,
    :class:`rldata.jobs.verify.VerifySummary` (:func:`accumulator`), while it runs."""

    run_id: str | None
    verifiers: tuple[str, ...]  # name@version keys written
    trajectories: int  # selected
    already_verified: int
    verified: int = 0
    correct: int = 0
    errors: int = 0
    no_answer: int = 0  # parse failures: the verifier found no answer in the completion
    ledger_rows: int = 0
    seconds: float = 0.0
    noop: bool = False


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


@dataclass(frozen=True)
class RewardsResult(TableResult):
    """A run's rewards composed from a reward spec: ``rows``, one per trajectory with every
    component; ``metrics``, the per-domain and overall means (``reward/total``, ...); ``written``, the
    ``metrics`` rows this call upserted (0 unless asked to write them)."""

    metrics: Any = None  # {name: value}
    written: int = 0
