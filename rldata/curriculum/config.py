"""The curriculum file, ``buckets.yaml``: buckets, phases, validation with key paths, load and save.

``rldata stratify`` writes the file; ``rldata train --curriculum`` reads it.  The file names the
selection, the buckets and the phases (per-phase bucket mixture weights, ended by a step count or a
promotion rule).  Which task is in which bucket has one source: the selection's ``bucket`` column
in the store, set by stratify (which also records the pass-rate edges it cut in the selection's
``params``).  The file does not repeat the edges; files written before this may still carry
``low``/``high`` per bucket: they load (validated as before) and are never read to decide
membership.

Bucket edges are half-open, ``low <= pass_rate < high``, except the bucket with the highest
``high``, which also takes ``pass_rate == high``.  Buckets may leave gaps but never overlap.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from rldata.configs import yaml_safe
from rldata.errors import InputError, RldataError
from rldata.store.outputs import staged_output

__all__ = [
    "DEFAULT_TRAIN_STEPS",
    "METRICS",
    "SCHEMA_VERSION",
    "Bucket",
    "Curriculum",
    "CurriculumError",
    "Phase",
    "Promotion",
    "check_buckets",
    "default_phases",
    "dumps",
    "from_dict",
    "late_phases",
    "load",
    "save",
]

SCHEMA_VERSION = 1
METRICS = ("accuracy",)  # what a promotion rule can watch: a bucket's mean reward-pass rate per step
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


class CurriculumError(RldataError, ValueError):
    """A curriculum that does not validate; ``key`` is its path in the file, e.g. ``phases[1].weights.hard``."""

    def __init__(self, key: str | None, reason: str):
        self.key, self.reason = key, reason
        super().__init__(f"{key}: {reason}" if key else reason)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---- config ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bucket:
    """A bucket's name and, where known, the pass-rate edges that define it.

    Stratify cuts with edged buckets; a curriculum's buckets need only a name (membership is the
    selection's ``bucket`` column), but an old file's edges are kept and validated.
    """

    name: str
    low: float | None = None  # both edges or neither
    high: float | None = None
    count: int | None = None  # tasks in the bucket when stratify wrote the file (informational)

    @property
    def has_edges(self) -> bool:
        return self.low is not None

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise CurriculumError("name", f"bucket name must match {_NAME.pattern}, got {self.name!r}")
        if (self.low is None) != (self.high is None):
            raise CurriculumError("high" if self.high is None else "low", "give both edges or neither")
        if self.count is not None and (
            not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 0
        ):
            raise CurriculumError("count", f"must be a non-negative integer, got {self.count!r}")
        if not self.has_edges:
            return
        for k in ("low", "high"):
            v = getattr(self, k)
            if not _number(v) or not 0.0 <= v <= 1.0:
                raise CurriculumError(k, f"must be a number in [0, 1], got {v!r}")
        if not self.low < self.high:
            raise CurriculumError("high", f"must be greater than low ({self.low}), got {self.high}")


@dataclass(frozen=True)
class Promotion:
    """Advance when ``bucket``'s mean ``metric`` over the last ``window`` observed steps >= ``threshold``."""

    bucket: str
    threshold: float
    window: int = 10
    metric: str = "accuracy"

    def __post_init__(self):
        if self.metric not in METRICS:
            raise CurriculumError("metric", f"unknown metric {self.metric!r} (known: {', '.join(METRICS)})")
        if not isinstance(self.window, int) or isinstance(self.window, bool) or self.window < 1:
            raise CurriculumError("window", f"must be an integer >= 1, got {self.window!r}")
        if not _number(self.threshold) or not 0.0 <= self.threshold <= 1.0:
            raise CurriculumError("threshold", f"must be a number in [0, 1], got {self.threshold!r}")


@dataclass(frozen=True)
class Phase:
    """A bucket mixture, used until ``until_step`` (exclusive) or until ``promote_when`` holds."""

    name: str
    weights: Mapping[str, float]
    until_step: int | None = None
    promote_when: Promotion | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise CurriculumError("name", f"must be a non-empty string, got {self.name!r}")
        if not isinstance(self.weights, Mapping) or not self.weights:
            raise CurriculumError("weights", "must map bucket names to weights")
        for b, w in self.weights.items():
            if not _number(w) or not math.isfinite(w):
                raise CurriculumError(f"weights.{b}", f"must be a number, got {w!r}")
            if w < 0:
                raise CurriculumError(f"weights.{b}", f"negative weight {w}")
        if not sum(self.weights.values()) > 0:
            raise CurriculumError("weights", "weights must sum to more than 0")
        if self.until_step is not None and (
            not isinstance(self.until_step, int) or isinstance(self.until_step, bool) or self.until_step < 1
        ):
            raise CurriculumError("until_step", f"must be an integer >= 1 or null, got {self.until_step!r}")
        object.__setattr__(self, "weights", MappingProxyType(dict(self.weights)))  # frozen all the way


def check_buckets(buckets: tuple[Bucket, ...] | list[Bucket]) -> None:
    """Names unique, edges (of the buckets that have them) not overlapping; gaps are allowed."""
    if not buckets:
        raise CurriculumError("buckets", "at least one bucket is needed")
    seen: dict[str, int] = {}
    for i, b in enumerate(buckets):
        if b.name in seen:
            raise CurriculumError(f"buckets[{i}].name", f"duplicate bucket name {b.name!r}")
        seen[b.name] = i
    edged = [i for i, b in enumerate(buckets) if b.has_edges]
    order = sorted(edged, key=lambda i: (buckets[i].low, buckets[i].high))
    for prev, cur in itertools.pairwise(order):
        if buckets[cur].low < buckets[prev].high:
            a, b = buckets[prev], buckets[cur]
            raise CurriculumError(
                f"buckets[{cur}]",
                f"edges of {b.name!r} [{b.low}, {b.high}) overlap {a.name!r} [{a.low}, {a.high})",
            )


@dataclass(frozen=True)
class Curriculum:
    buckets: tuple[Bucket, ...]
    phases: tuple[Phase, ...]
    selection: str | None = None
    seed: int = 0
    sampler: str = "mixture"
    version: int = SCHEMA_VERSION

    def __post_init__(self):
        object.__setattr__(self, "buckets", tuple(self.buckets))
        object.__setattr__(self, "phases", tuple(self.phases))
        if self.version != SCHEMA_VERSION:
            raise CurriculumError(
                "version", f"unsupported version {self.version!r} (this rldata reads {SCHEMA_VERSION})"
            )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise CurriculumError("seed", f"must be an integer, got {self.seed!r}")
        # cycle: rldata.curriculum.sampler imports this module
        from rldata.curriculum.sampler import SAMPLERS  # the registry lives with the sampler

        if self.sampler not in SAMPLERS:
            raise CurriculumError("sampler", str(SAMPLERS.unknown(self.sampler)))
        check_buckets(self.buckets)
        names = [b.name for b in self.buckets]
        if not self.phases:
            raise CurriculumError("phases", "at least one phase is needed")
        last_until = 0
        phase_names: set[str] = set()
        for i, p in enumerate(self.phases):
            if p.name in phase_names:
                raise CurriculumError(f"phases[{i}].name", f"duplicate phase name {p.name!r}")
            phase_names.add(p.name)
            for b in p.weights:
                if b not in names:
                    raise CurriculumError(
                        f"phases[{i}].weights.{b}", f"unknown bucket {b!r} (buckets: {', '.join(names)})"
                    )
            if p.promote_when is not None and p.promote_when.bucket not in names:
                raise CurriculumError(
                    f"phases[{i}].promote_when.bucket",
                    f"unknown bucket {p.promote_when.bucket!r} (buckets: {', '.join(names)})",
                )
            if p.until_step is not None:
                if p.until_step <= last_until:
                    raise CurriculumError(
                        f"phases[{i}].until_step",
                        f"must be greater than the previous phase's until_step ({last_until})",
                    )
                last_until = p.until_step

    @property
    def bucket_names(self) -> list[str]:
        return [b.name for b in self.buckets]

    def to_dict(self) -> dict:
        phases = []
        for p in self.phases:
            d: dict[str, Any] = {"name": p.name, "weights": dict(p.weights), "until_step": p.until_step}
            if p.promote_when is not None:
                pw = p.promote_when
                d["promote_when"] = {
                    "bucket": pw.bucket,
                    "metric": pw.metric,
                    "window": pw.window,
                    "threshold": pw.threshold,
                }
            phases.append(d)
        buckets = []
        for b in self.buckets:
            d: dict[str, Any] = {"name": b.name}
            if b.has_edges:
                d |= {"low": b.low, "high": b.high}
            if b.count is not None:
                d["count"] = b.count
            buckets.append(d)
        return {
            "version": self.version,
            "selection": self.selection,
            "seed": self.seed,
            "sampler": self.sampler,
            "buckets": buckets,
            "phases": phases,
        }


DEFAULT_TRAIN_STEPS = 100  # the trainer's default run length (TrainConfig.steps)


def late_phases(cur: Curriculum, steps: int) -> list[str]:
    """Phases a run of ``steps`` steps reaches only if a promotion rule fires: the phase before
    each ends at no fixed step, or at one the run does not get to."""
    out = []
    for prev, p in zip(cur.phases, cur.phases[1:], strict=False):
        if prev.until_step is None or prev.until_step >= steps:
            out.append(p.name)
    return out


def default_phases(
    buckets: list[Bucket] | tuple[Bucket, ...],
    *,
    phase_steps: list[int] | None = None,
    window: int = 10,
    max_phase_steps: int | None = None,
) -> tuple[Phase, ...]:
    """An easy -> hard progression: one phase per bucket, easiest first.

    Phase i puts 0.6 on its focus bucket, 0.3 on the next harder one and spreads the rest over
    the easier ones (so solved skills keep being rehearsed).  Each phase but the last ends after
    ``phase_steps[i]`` steps when given, else when the focus bucket's accuracy over ``window``
    steps reaches the bucket's upper edge (the model now solves it like the easiest tasks in it),
    or at the latest at step ``(i + 1) * max_phase_steps``: a model too weak to reach the edge must
    not stall on phase 0 forever.  The default bound splits :data:`DEFAULT_TRAIN_STEPS` (the trainer's
    default ``steps``) evenly over the phases (at least ``window`` steps each), so a run of the
    default length reaches the last phase.
    """
    buckets = list(buckets)
    if max_phase_steps is None:  # every phase fits a default-length training run, or the last never trains
        max_phase_steps = max(window, DEFAULT_TRAIN_STEPS // max(len(buckets), 1))
    if max_phase_steps < 1:
        raise CurriculumError("max_phase_steps", f"must be >= 1, got {max_phase_steps}")
    buckets = list(buckets)
    if not all(b.has_edges for b in buckets):
        raise CurriculumError(
            "buckets", "default phases order buckets by their edges: give every bucket low and high"
        )
    order = sorted(buckets, key=lambda b: -b.high)  # easiest (highest pass rate) first
    m = len(order)
    if phase_steps is not None and len(phase_steps) != m - 1:
        raise CurriculumError(
            "phase_steps", f"need {m - 1} step boundaries for {m} buckets, got {len(phase_steps)}"
        )
    phases = []
    for i, focus in enumerate(order):
        w = {b.name: 0.0 for b in order}
        w[focus.name] = 0.6
        if i + 1 < m:
            w[order[i + 1].name] = 0.3
        rest = 1.0 - sum(w.values())
        if i > 0:
            for b in order[:i]:
                w[b.name] += rest / i
        total = sum(w.values())
        w = {k: round(v / total, 4) for k, v in w.items()}
        last = i == m - 1
        until = (
            None if last else int(phase_steps[i]) if phase_steps is not None else (i + 1) * max_phase_steps
        )
        promote = None
        if not last and phase_steps is None:
            promote = Promotion(bucket=focus.name, threshold=round(min(focus.high, 1.0), 4), window=window)
        phases.append(Phase(name=focus.name, weights=w, until_step=until, promote_when=promote))
    return tuple(phases)


# ---- load / save -------------------------------------------------------------------------------
_TOP = {"version", "selection", "seed", "sampler", "buckets", "phases"}
_BUCKET = {"name", "low", "high", "count"}
_PHASE = {"name", "weights", "until_step", "promote_when"}
_PROMOTE = {"bucket", "metric", "window", "threshold"}


def _check_keys(d: Any, allowed: set[str], required: set[str], where: str) -> None:
    if not isinstance(d, Mapping):
        raise CurriculumError(where or None, f"expected a mapping, got {type(d).__name__}")
    pre = f"{where}." if where else ""
    for k in d:
        if k not in allowed:
            raise CurriculumError(f"{pre}{k}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
    for k in sorted(required):
        if k not in d:
            raise CurriculumError(f"{pre}{k}", "missing required key")


def _build(cls, where: str, **kw):
    """Construct a config object, prefixing its validation error's key with its place in the file."""
    try:
        return cls(**kw)
    except CurriculumError as e:
        raise CurriculumError(f"{where}.{e.key}" if e.key else where, e.reason) from None


def from_dict(d: Any) -> Curriculum:
    """Validate a parsed ``buckets.yaml`` and build the Curriculum; errors carry the key path."""
    _check_keys(d, _TOP, {"buckets", "phases"}, "")
    for k in ("buckets", "phases"):
        if not isinstance(d[k], list):
            raise CurriculumError(k, f"expected a list, got {type(d[k]).__name__}")
    buckets = []
    for i, b in enumerate(d["buckets"]):
        # edges are optional (old files carry them), but one without the other is half a bucket
        edges = {"low", "high"} if isinstance(b, Mapping) and ({"low", "high"} & set(b)) else set()
        _check_keys(b, _BUCKET, {"name"} | edges, f"buckets[{i}]")
        buckets.append(_build(Bucket, f"buckets[{i}]", **b))
    phases = []
    for i, p in enumerate(d["phases"]):
        where = f"phases[{i}]"
        _check_keys(p, _PHASE, {"name", "weights"}, where)
        promote = None
        if p.get("promote_when") is not None:
            _check_keys(p["promote_when"], _PROMOTE, {"bucket", "threshold"}, f"{where}.promote_when")
            promote = _build(Promotion, f"{where}.promote_when", **p["promote_when"])
        phases.append(_build(Phase, where, **{**p, "promote_when": promote}))
    top = {k: d[k] for k in ("version", "selection", "seed", "sampler") if k in d}
    if top.get("selection") is not None and not isinstance(top["selection"], str):
        raise CurriculumError("selection", f"must be a string, got {top['selection']!r}")
    return Curriculum(buckets=tuple(buckets), phases=tuple(phases), **top)


def load(path: str | os.PathLike) -> Curriculum:
    """Read and validate a ``buckets.yaml``; every problem is an InputError naming file and key."""
    path = str(path)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(path, None, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(path, f"byte {e.start}", "not a text file (not valid UTF-8)") from None
    try:
        data = yaml_safe.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        raise InputError(path, where, f"invalid YAML: {getattr(e, 'problem', None) or e}") from None
    if data is None:
        raise InputError(path, None, "empty file")
    try:
        return from_dict(data)
    except CurriculumError as e:
        raise InputError(path, e.key, e.reason) from None


def dumps(curriculum: Curriculum) -> str:
    """The curriculum file's text (YAML)."""
    return "# rldata curriculum (buckets.yaml); schema: docs/filter.md\n" + yaml.safe_dump(
        curriculum.to_dict(), sort_keys=False, default_flow_style=False
    )


def save(curriculum: Curriculum, path: str | os.PathLike) -> Path:
    """Write the curriculum as YAML (atomically: a reader never sees half a file; a device or pipe
    such as /dev/stdout is written, never replaced)."""
    check_writable(path)
    with staged_output(path, dumps(curriculum), name="curriculum"):
        pass
    return Path(path)


def check_writable(path: str | os.PathLike) -> None:
    """Raise unless ``path`` can be written as a file: checked before any commit that precedes it."""
    path = Path(path)
    if path.is_dir():
        raise InputError(str(path), None, "is a directory; give a file path (e.g. buckets.yaml)")
    parent = path.parent
    if not parent.is_dir():
        raise InputError(str(path), None, f"directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(str(path), None, "not writable")


def selection_buckets(store, cur: Curriculum, path: str | os.PathLike) -> dict[str, list[str]]:
    """bucket -> task ids of the store's selection that ``cur`` (read from ``path``) names: the kept
    rows with a bucket (stratify's).  Refuses a file that names no selection, and a selection the
    store does not hold or that has no bucketed kept tasks, as ``rldata train`` does before it
    starts (``rldata curriculum FILE`` with a store checks the same)."""
    if not cur.selection:
        raise RldataError(f"{path}: no 'selection' named; bucket membership lives in a selection")
    rows = store.sql(
        "SELECT task_id, bucket FROM selections WHERE selection = $1 AND decision = 'keep' "
        "AND bucket IS NOT NULL ORDER BY task_id",
        params=[cur.selection],
    ).fetchall()
    if not rows:
        raise RldataError(empty_selection_reason(store, cur.selection, named_in=path), field="selection")
    buckets: dict[str, list[str]] = {}
    for task_id, bucket in rows:
        buckets.setdefault(bucket, []).append(task_id)
    return buckets


def empty_selection_reason(store, selection: str, *, named_in: str | os.PathLike | None = None) -> str:
    """Why ``selection`` gives a run no task, and what works instead: a selection the store does not
    hold, one that keeps nothing (stratify cannot bucket it either: filter again), or kept tasks without
    buckets.  ``named_in``: the curriculum file that names it."""
    who = f"selection {selection!r}" + (f" (named in {os.fspath(named_in)})" if named_in is not None else "")
    ((total, kept),) = store.sql(
        "SELECT count(*), count(*) FILTER (decision = 'keep') FROM selections WHERE selection = $1",
        params=[selection],
    ).fetchall()
    if not total:
        known = [s for (s,) in store.sql("SELECT DISTINCT selection FROM selections ORDER BY 1").fetchall()]
        return f"{who} is not in the store {store.root}; its selections: " + (
            ", ".join(known[:20]) or "(none: run rldata filter)"
        )
    if not kept:
        return (
            f"{who} keeps no tasks ({total} dropped, see rldata stats --selection {selection}), so "
            "stratify cannot bucket it either: filter again with a wider band (rldata filter --band "
            f"0.05,0.95 --name {selection}) or sample more, or train on every task without a curriculum "
            "(rldata train, no --curriculum)"
        )
    return (
        f"{who} keeps {kept} tasks but none has a bucket: rldata stratify --selection {selection} "
        f"--quantiles 3 --curriculum buckets.yaml, or train on them uniformly: rldata train --selection "
        f"{selection}"
    )
