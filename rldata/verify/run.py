"""Guarded verifier calls, and verifying many completions with identical work done once.

Two-phase verifiers (``extract(completion, task) -> str | None`` and ``check(extracted, task) ->
list[Verdict]``, as math, exact and regex are) let a batch be deduplicated on what decides the
result: ``(verifier, extracted answer, gold answer, tests)``.  A model's 16 samples of one task
often state the same two or three answers, so most checks are repeats.  Verifiers with only
``verify`` are deduplicated on the whole completion instead.

Verifiers must depend only on the completion and the task's ``answer`` and ``tests`` (that is all
a work unit carries), plus its ``metadata`` for a verifier class that sets ``uses_metadata = True``
(reasoning-gym: the entry it scores against).  Others never see metadata, so tasks that differ
only in metadata still share their checks.  A crash or a timeout of one call becomes an error verdict for the items of
that call (``passed=None``), never a 0 and never an exception out of :func:`verify_many`.

Where checks run: a verifier class with ``in_process = True`` (exact, regex: they cannot hang) is
called here under a soft timeout; every other one (math, and by default any custom verifier) runs
in a killable child process (:mod:`rldata.verify.isolate`), which bounds the time of a check that
is stuck in C code, in any thread.  :func:`run_verifier` is the in-process guard for one call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from rldata.verify.base import (
    DOMAIN_DEFAULTS,
    REGISTRY,
    UnknownVerifier,
    Verdict,
    Verifier,
    known_verifiers,
    resolve_name,
)
from rldata.verify.deadline import VerifierTimeout, call_with_deadline

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Unit",
    "VerifyStats",
    "count_errors",
    "expand",
    "get_instance",
    "plan",
    "prepare_verifiers",
    "resolve_verifier",
    "run_units",
    "run_units_here",
    "run_verifier",
    "verify_many",
]

DEFAULT_TIMEOUT_S = 5.0  # per distinct (verifier, answer, gold) check


@dataclass
class VerifyStats:
    """What a :func:`verify_many` / ``verify_on_ray`` call did (pass one in to have it filled)."""

    items: int = 0  # completions asked about
    unique: int = 0  # distinct work units after dedup
    computed: int = 0  # units whose verification ran to a result (<= unique; crashes excluded)
    errors: int = 0  # items whose verdicts carry an error
    chunks: int = 0  # Ray tasks submitted, retries included
    retried: int = 0  # of those, resubmissions after a failed chunk
    worker_failures: int = 0  # chunks lost to a dead worker or a task-level error
    in_driver: int = 0  # units checked in this process's verifier child, not in a Ray task


class Unit(NamedTuple):
    """One deduplicated piece of work: ``payload`` is the extracted answer (two-phase) or completion."""

    verifier: str
    two_phase: bool
    payload: str | None
    answer: str | None
    tests: str | None
    metadata: str | None = None  # only for verifiers with ``uses_metadata = True``

    def task(self) -> dict[str, Any]:
        return {"answer": self.answer, "tests": self.tests, "metadata": self.metadata}


def resolve_verifier(name_or_domain: str) -> str:
    """Registry name for a verifier name, a ``module:Class`` path or a task domain ("arith" -> "math").

    Registered and built-in names come first, then domains, then installed plugins: a per-item
    call with a domain never scans the installed packages' metadata.
    """
    try:
        return resolve_name(name_or_domain, plugins=False)
    except UnknownVerifier:
        pass
    if name_or_domain in DOMAIN_DEFAULTS:
        return resolve_name(DOMAIN_DEFAULTS[name_or_domain])
    try:
        return resolve_name(name_or_domain)
    except UnknownVerifier:
        raise UnknownVerifier(
            f"no verifier named {name_or_domain!r} and no verifier for a domain of that name; "
            f"verifiers: {', '.join(known_verifiers())}; domains: {', '.join(sorted(DOMAIN_DEFAULTS))}; "
            "or give a verifier as module:Class"
        ) from None


_INSTANCES: dict[str, tuple[Callable, Any]] = {}  # per process: verifier name -> (factory, instance)


def get_instance(name: str, factories: Mapping[str, Callable] | None = None) -> Verifier:
    """One instance per verifier per process (some hold caches or sandboxes)."""
    factory = _factory(name, factories)
    cached = _INSTANCES.get(name)
    if cached is None or cached[0] is not factory:
        cached = _INSTANCES[name] = (factory, factory())
    return cached[1]


def _is_two_phase(v: Any) -> bool:
    return callable(getattr(v, "extract", None)) and callable(getattr(v, "check", None))


def _budget(v: Any, timeout_s: float | None) -> float | None:
    """A verifier may declare a longer own budget (``timeout_s``), e.g. one that runs tests."""
    own = getattr(v, "timeout_s", None)
    if timeout_s is None or own is None:
        return timeout_s
    return max(timeout_s, float(own))


def _guarded(fn: Callable[[], Any], *, timeout_s: float | None, extracted: str | None) -> list[Verdict]:
    try:
        out = call_with_deadline(timeout_s, fn)
    except VerifierTimeout:
        return [Verdict.failure(f"timeout after {timeout_s:g}s", extracted=extracted)]
    except Exception as e:  # noqa: BLE001 - a verifier bug must not take the job down: record it on the sample
        return [Verdict.failure(f"{type(e).__name__}: {str(e)[:200]}", extracted=extracted)]
    if not isinstance(out, list) or not out or not all(isinstance(v, Verdict) for v in out):
        return [
            Verdict.failure(
                f"verifier returned {type(out).__name__}, not a list of Verdicts", extracted=extracted
            )
        ]
    return out


def run_verifier(
    verifier: Verifier,
    completion: str | None,
    task: Mapping[str, Any],
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> list[Verdict]:
    """``verifier.verify(completion, task)``; a crash or a timeout comes back as an error verdict.

    Two-phase verifiers run as extract, then check, so an error verdict still shows the answer.
    """
    budget = _budget(verifier, timeout_s)
    if not _is_two_phase(verifier):
        return _guarded(lambda: verifier.verify(completion, task), timeout_s=budget, extracted=None)
    try:
        extracted = call_with_deadline(budget, verifier.extract, completion, task)
    except VerifierTimeout:
        return [Verdict.failure(f"timeout after {budget:g}s (extracting)")]
    except Exception as e:  # noqa: BLE001 - same: an error verdict, not a crash
        return [Verdict.failure(f"extract failed: {type(e).__name__}: {str(e)[:200]}")]
    return _guarded(lambda: verifier.check(extracted, task), timeout_s=budget, extracted=extracted)


def prepare_verifiers(names: Iterable[str], factories: Mapping[str, Callable] | None = None) -> None:
    """Create (and ``prepare()``, if they have it) the named verifiers, outside any deadline.

    Preparation imports heavy libraries; a timeout that lands inside an import leaves a
    half-initialized module behind for the rest of the process.  Failures are left for
    :func:`run_units_here` to report per unit.
    """
    for name in names:
        try:
            v = get_instance(name, factories)
            if callable(getattr(v, "prepare", None)) and not getattr(v, "_rldata_prepared", False):
                v.prepare()
                try:
                    v._rldata_prepared = True
                except (AttributeError, TypeError):  # frozen or slotted: prepare() must be idempotent
                    pass
        except Exception:  # noqa: BLE001, S110 - reported per unit by run_units_here
            pass


def run_units_here(
    units: Sequence[Unit],
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    factories: Mapping[str, Callable] | None = None,
) -> list[list[Verdict]]:
    """Verify each unit in this process, in order, each call under a soft timeout."""
    prepare_verifiers({u.verifier for u in units}, factories)
    out = []
    for u in units:
        try:
            v = get_instance(u.verifier, factories)
        except Exception as e:  # noqa: BLE001 - an error verdict per unit
            out.append([Verdict.failure(f"cannot create verifier {u.verifier!r}: {type(e).__name__}: {e}")])
            continue
        task = u.task()
        if u.two_phase:
            fn = lambda v=v, u=u, task=task: v.check(u.payload, task)
            out.append(_guarded(fn, timeout_s=_budget(v, timeout_s), extracted=u.payload))
        else:
            out.append(
                _guarded(
                    lambda v=v, u=u, task=task: v.verify(u.payload, task),
                    timeout_s=_budget(v, timeout_s),
                    extracted=None,
                )
            )
    return out


def _factory(name: str, factories: Mapping[str, Callable] | None) -> Callable:
    f = (factories or {}).get(name) or REGISTRY.get(name)
    return f if f is not None else REGISTRY[resolve_name(name)]


def run_units(
    units: Sequence[Unit],
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    factories: Mapping[str, Callable] | None = None,
) -> list[list[Verdict]]:
    """Verify units in order: ``in_process`` verifiers here, the others in the killable child."""
    from rldata.verify.isolate import shared_isolate  # cycle: rldata.verify.isolate imports this one

    local = [getattr(_factory(u.verifier, factories), "in_process", False) is True for u in units]
    out: list[list[Verdict] | None] = [None] * len(units)
    here = [i for i, loc in enumerate(local) if loc]
    away = [i for i, loc in enumerate(local) if not loc]
    if here:
        for i, vs in zip(
            here, run_units_here([units[i] for i in here], timeout_s=timeout_s, factories=factories)
        ):
            out[i] = vs
    if away:
        sent = {u.verifier: _factory(u.verifier, factories) for u in (units[i] for i in away)}
        got = shared_isolate().run([units[i] for i in away], sent, timeout_s=timeout_s)
        for i, vs in zip(away, got):
            out[i] = vs
    return out  # type: ignore[return-value]  # every index is in here or away


def plan(
    requests: Sequence[tuple[str, str | None, Mapping[str, Any]]],
    *,
    factories: Mapping[str, Callable] | None = None,
) -> tuple[list[Unit], list[int | list[Verdict]]]:
    """Deduplicate ``(verifier name, completion, task)`` requests into units.

    Returns the units and, per request, the index of its unit, or its final verdicts when it
    never reaches a unit (the extraction itself failed).
    """
    units: list[Unit] = []
    index: dict[Unit, int] = {}
    where: list[int | list[Verdict]] = []
    for name, completion, task in requests:
        v = get_instance(name, factories)
        if completion is not None and not isinstance(completion, str):
            completion = str(completion)
        answer, tests = task.get("answer"), task.get("tests")
        answer = None if answer is None else str(answer)
        meta = task.get("metadata") if getattr(v, "uses_metadata", False) is True else None
        meta = None if meta is None else str(meta)
        if _is_two_phase(v):
            try:  # extraction is rldata's bounded code, but a custom verifier's may not be
                payload = v.extract(completion, task)
            except Exception as e:  # noqa: BLE001 - an error verdict for this item
                where.append([Verdict.failure(f"extract failed: {type(e).__name__}: {str(e)[:200]}")])
                continue
            unit = Unit(name, True, payload, answer, tests, meta)
        else:
            unit = Unit(name, False, completion, answer, tests, meta)
        if unit not in index:
            index[unit] = len(units)
            units.append(unit)
        where.append(index[unit])
    return units, where


def expand(where: Sequence[int | list[Verdict]], results: Sequence[list[Verdict]]) -> list[list[Verdict]]:
    """Per request, the verdicts of its unit (or the verdicts :func:`plan` already gave it)."""
    return [results[w] if isinstance(w, int) else w for w in where]


def count_errors(verdicts: Sequence[list[Verdict]]) -> int:
    return sum(any(v.passed is None for v in vs) for vs in verdicts)


def verify_many(
    items: Sequence[tuple[str, str | None, Mapping[str, Any]]],
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    stats: VerifyStats | None = None,
) -> list[list[Verdict]]:
    """Verify ``(domain or verifier name, completion, task)`` items on this machine (see module doc).

    Each distinct (verifier, extracted answer, gold, tests) is checked once and its verdicts are
    shared by every item that maps to it.  Returns one verdict list per item, in order.
    """
    requests = [(resolve_verifier(name), completion, task) for name, completion, task in items]
    units, where = plan(requests)
    results = run_units(units, timeout_s=timeout_s)
    out = expand(where, results)
    if stats is not None:
        stats.items += len(items)
        stats.unique += len(units)
        stats.computed += len(units)
        stats.errors += count_errors(out)
    return out
