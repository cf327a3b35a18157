"""Verification on Ray: deduplicate in the driver, check chunks of distinct work in Ray tasks.

``verify_on_ray(items)`` takes dicts ``{"key", "verifier", "domain", "completion", "answer",
"tests"}`` (and ``"metadata"``, read by verifiers with ``uses_metadata``, and ``"prompt"``, whose quoted boxes the math verifier skips) and returns ``{key: [Verdict, ...]}``.  Answers are extracted in the driver (cheap,
bounded), identical (verifier, extracted answer, gold, tests) units are verified once, and the
distinct units go out in chunks as plain Ray tasks (``num_cpus=1``), outside the engine actors.

Failure handling, so one bad sample never takes a job down and never becomes a silent 0:

- a verifier exception, a timeout, or a check that kills its process -> an error verdict for that
  unit's items, inside the task, exactly as in :func:`rldata.verify.run.verify_many` (checks run
  in a killable child process of the Ray worker, see :mod:`rldata.verify.isolate`);
- a chunk whose Ray worker itself died (out of memory, a lost node) or whose task failed -> split
  in halves and resubmitted, down to the single unit that fails; that unit is retried
  ``max_retries`` more times and then gets an error verdict.  The others pass normally.

Where the distinct units run (``where``): ``"ray"`` sends them out as Ray tasks; ``"driver"`` checks
them in this process's persistent verifier child (:func:`~rldata.verify.isolate.shared_isolate`,
started once, killable, the same guards) with no Ray task at all; ``"auto"`` (the default) picks
the driver when every verifier involved declares ``cheap = True`` (math, exact, regex,
reasoning-gym: well under a millisecond per distinct answer once extracted) and Ray otherwise (code
runs tests in a sandbox).  A Ray task per batch costs scheduling, a worker process and a pickled
round trip: more than the whole check for a batch of short answers, and on a small machine those
workers compete with the engines for the cores.  Pass ``where="ray"`` when a job's cheap checks
outgrow one core (many engines on a large cluster).

Without an initialized Ray (``ray.is_initialized()`` false), everything runs on this machine
through :func:`~rldata.verify.run.verify_many`'s code path: the same results, no parallelism.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from rldata.errors import ConfigError, RldataError
from rldata.heavy import ray
from rldata.verify.base import REGISTRY, Verdict
from rldata.verify.isolate import dump_factories, shared_isolate
from rldata.verify.run import (
    DEFAULT_TIMEOUT_S,
    Unit,
    VerifyStats,
    count_errors,
    expand,
    plan,
    resolve_verifier,
    run_units,
)

__all__ = ["MIN_CHUNK", "WHERE", "verify_on_ray", "warm_driver_verifiers"]

MIN_CHUNK = 16  # units per Ray task at least: a task costs ~1 ms of scheduling, a unit ~0.5 ms
WHERE = ("auto", "driver", "ray")  # where distinct units are checked (module docstring)


def _requests(items: Sequence[Mapping[str, Any]]) -> tuple[list[Hashable], list[tuple[str, Any, dict]]]:
    keys, requests, seen = [], [], set()
    for i, it in enumerate(items):
        if "key" not in it:
            raise RldataError(f"verify item {i}: missing 'key'")
        key = it["key"]
        if key in seen:
            raise RldataError(f"verify item {i}: duplicate key {key!r}")
        seen.add(key)
        name = it.get("verifier") or it.get("domain")
        if not name:
            raise RldataError(f"verify item {i} (key {key!r}): neither 'verifier' nor 'domain' is set")
        try:
            name = resolve_verifier(name)
        except KeyError as e:
            raise RldataError(f"verify item {i} (key {key!r}): {e.args[0]}") from None
        keys.append(key)
        requests.append(
            (
                name,
                it.get("completion"),
                {
                    "answer": it.get("answer"),
                    "tests": it.get("tests"),
                    "metadata": it.get("metadata"),
                    "prompt": it.get("prompt"),  # math: boxes quoted from it are not answers
                },
            )
        )
    return keys, requests


def verify_on_ray(
    items: Sequence[Mapping[str, Any]],
    *,
    num_tasks: int | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    max_retries: int = 1,
    stats: VerifyStats | None = None,
    where: str = "auto",
) -> dict[Hashable, list[Verdict]]:
    """Verify items on the current Ray cluster (or locally without one); ``{key: verdicts}``.

    ``num_tasks``: how many Ray tasks to split the distinct work into (default: 4 per cluster
    CPU, at least :data:`MIN_CHUNK` units each).  ``timeout_s``: soft limit per distinct check.
    ``where``: ``auto`` | ``driver`` | ``ray``, where the distinct units are checked (module
    docstring).  Raises :class:`RldataError` on malformed items (missing key, duplicate key, unknown
    verifier or domain) or an unknown ``where`` before any work starts; verifier failures never raise.
    """
    if where not in WHERE:
        raise ConfigError(f"where must be one of {', '.join(WHERE)}, got {where!r}", field="where")
    keys, requests = _requests(items)
    names = {r[0] for r in requests}
    factories = {n: REGISTRY[n] for n in names}  # shipped: verifiers registered at run time work too
    units, slots = plan(requests, factories=factories)
    st = stats if stats is not None else VerifyStats()
    st.items += len(items)
    st.unique += len(units)
    here = where == "driver" or (where == "auto" and all(_cheap(factories[n]) for n in names))
    if not units:
        results: list[list[Verdict]] = []
    elif here or not ray.is_initialized():
        results = run_units(units, timeout_s=timeout_s, factories=factories)
        st.computed += len(units)
        st.in_driver += len(units)
    else:
        results = _run_on_ray(
            units, factories, num_tasks=num_tasks, timeout_s=timeout_s, max_retries=max_retries, st=st
        )
    out = expand(slots, results)
    st.errors += count_errors(out)
    return dict(zip(keys, out))


def warm_driver_verifiers(names: Sequence[str]) -> None:
    """Start this process's verifier child and import the cheap verifiers among ``names`` in a
    background thread, so that a job's first batch does not wait for it (math-verify's import takes
    a second or two).  Verifiers that run in this process or on Ray need nothing."""
    import threading

    factories = {}
    for n in names:
        f = REGISTRY.get(resolve_verifier(n))
        if f is not None and _cheap(f) and getattr(f, "in_process", False) is not True:
            factories[n] = f
    if factories:
        threading.Thread(
            target=shared_isolate().warm, args=(factories,), name="rldata-verify-warm", daemon=True
        ).start()


def _cheap(factory: Callable) -> bool:
    """A verifier class that says its checks are cheap (``cheap = True``); others go to Ray."""
    return getattr(factory, "cheap", False) is True


def _chunks(n: int, num_tasks: int) -> list[list[int]]:
    size = max(MIN_CHUNK, -(-n // max(num_tasks, 1)))
    return [list(range(i, min(i + size, n))) for i in range(0, n, size)]


def _run_on_ray(
    units: list[Unit],
    factories: Mapping[str, Callable],
    *,
    num_tasks: int | None,
    timeout_s: float | None,
    max_retries: int,
    st: VerifyStats,
) -> list[list[Verdict]]:
    if num_tasks is None:
        num_tasks = 4 * max(1, int(ray.cluster_resources().get("CPU", 1)))
    task = _remote_chunk()
    factories_ref = ray.put(dump_factories(factories))
    results: list[list[Verdict] | None] = [None] * len(units)
    pending: dict[Any, tuple[list[int], int]] = {}  # ref -> (unit indices, singleton failures)

    def submit(idx: list[int], failures: int) -> None:
        ref = task.remote([units[i] for i in idx], factories_ref, timeout_s)
        pending[ref] = (idx, failures)
        st.chunks += 1

    for idx in _chunks(len(units), num_tasks):
        submit(idx, 0)
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        ref = ready[0]
        idx, failures = pending.pop(ref)
        try:
            got = ray.get(ref)
        except ray.exceptions.RayError as e:
            st.worker_failures += 1
            reason = _reason(e)
            if len(idx) > 1:  # which unit killed it? halve until it is alone
                half = len(idx) // 2
                submit(idx[:half], 0)
                submit(idx[half:], 0)
                st.retried += 2
            elif failures < max_retries:
                submit(idx, failures + 1)
                st.retried += 1
            else:
                results[idx[0]] = [
                    Verdict.failure(
                        f"verifier worker failed {failures + 1} times: {reason}",
                        extracted=units[idx[0]].payload if units[idx[0]].two_phase else None,
                    )
                ]
            continue
        for i, vs in zip(idx, got):
            results[i] = vs
        st.computed += len(idx)
    return results  # type: ignore[return-value]  # every slot is filled: each index ends in one branch


_REMOTE = None


def _remote_chunk():
    """The Ray task, defined once per process (each definition is exported to the cluster)."""
    global _REMOTE
    if _REMOTE is None:
        _REMOTE = ray.remote(num_cpus=1, max_retries=0)(_verify_chunk)  # retries are ours: we split first
    return _REMOTE


def _reason(e: Exception) -> str:
    if isinstance(e, ray.exceptions.WorkerCrashedError):
        return "the Ray worker died (crash, out of memory, lost node)"
    return f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}"


def _verify_chunk(units: list[Unit], factories: bytes, timeout_s: float | None) -> list[list[Verdict]]:
    """Ray task body: the units, in order, through :func:`run_units` (killable child included)."""
    return run_units(units, timeout_s=timeout_s, factories=pickle.loads(factories))
