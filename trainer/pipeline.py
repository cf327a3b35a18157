"""Rollouts produced ahead of the learners with bounded staleness: the async mode, and with K = 0
the sync mode, through the same code.

A producer thread calls ``produce(step)`` for step after step and queues the results; the learner
side takes them in step order with ``get()`` and reports each step done with ``consumed(step)``.
The pipeline does not know what a rollout is: ``produce`` returns any payload (one step's groups
today; multi-turn episodes can plug in unchanged).  ``prepare(step)`` runs in the producer thread
before each ``produce``, i.e. between generate calls: the driver loads newer weights into the engines
there (no request ever sees half-updated weights) and returns the policy version the step will be
generated with.

Capacity control (as in AReaL): step s may start once step s-1-K has been consumed, or step s-1 when
that step is a *hold* (a checkpoint: its saved sampler state must not contain later draws).  The
policy version advances at most once per consumed step, so a rollout generated for step s is at most
K versions behind the weights that update with it; ``stale`` flags any that would be (a defence:
capacity control makes it impossible by construction).  With K = 0 the producer waits for every
update: the sync loop, deterministic for a seed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rldata.errors import ConfigError

__all__ = ["Pipeline", "Produced", "can_start", "is_stale", "staleness_metrics"]


@dataclass(frozen=True)
class Produced:
    step: int  # the step the rollouts were drawn for, and the step that consumes them
    version: int  # the policy version that generated them (what ``prepare`` returned)
    payload: Any
    ahead: int  # steps produced but not yet consumed when this one started (<= K)


def can_start(step: int, consumed: int, max_staleness: int, hold: Callable[[int], bool]) -> bool:
    """Capacity control: may generation of ``step`` start when steps up to ``consumed`` are done?"""
    need = step - 1 if hold(step - 1) else step - 1 - max_staleness
    return consumed >= need


def is_stale(learner_version: int, generated_by: int, max_staleness: int) -> bool:
    """A rollout is dropped when the version gap at update time exceeds K."""
    return learner_version - generated_by > max_staleness


def staleness_metrics(gap: int, samples: int, max_staleness: int) -> dict[str, float]:
    """One step's staleness histogram (``staleness/<gap>``: rollouts per version gap, every bin up to
    K written so steps are comparable) and its gap."""
    bins = {f"staleness/{k}": 0.0 for k in range(max(max_staleness, gap) + 1)}
    bins[f"staleness/{gap}"] = float(samples)
    return {"staleness": float(gap), **bins}


class Pipeline:
    """``produce`` for steps ``first..last`` in a background thread, at most ``max_staleness`` steps
    ahead of ``consumed``.  Errors in the thread are raised by ``get``."""

    def __init__(
        self,
        produce: Callable[[int], Any],
        *,
        first: int,
        last: int,
        max_staleness: int,
        prepare: Callable[[int], int],
        hold: Callable[[int], bool] = lambda step: False,
    ):
        if max_staleness < 0:
            raise ConfigError(f"max_staleness must be >= 0, got {max_staleness}", field="max_staleness")
        self._produce, self._prepare, self._hold = produce, prepare, hold
        self.first, self.last, self.max_staleness = first, last, max_staleness
        self._cond = threading.Condition()
        self._ready: deque[Produced] = deque()
        self._consumed = first - 1
        self._stop = False
        self._error: BaseException | None = None
        self._engine_idle = 0.0  # seconds the producer waited on capacity (finished waits)
        self._waiting_since: float | None = None
        self.learner_idle = 0.0  # seconds ``get`` waited for the producer
        self._thread = threading.Thread(target=self._run, name="rldata-rollouts", daemon=True)

    def start(self) -> Pipeline:
        self._thread.start()
        return self

    # --- producer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            for step in range(self.first, self.last + 1):
                with self._cond:
                    self._waiting_since = time.monotonic()
                    while not self._stop and not can_start(
                        step, self._consumed, self.max_staleness, self._hold
                    ):
                        self._cond.wait()
                    self._engine_idle += time.monotonic() - self._waiting_since
                    self._waiting_since = None
                    if self._stop:
                        return
                    ahead = step - 1 - self._consumed
                version = self._prepare(step)
                payload = self._produce(step)
                with self._cond:
                    self._ready.append(Produced(step=step, version=version, payload=payload, ahead=ahead))
                    self._cond.notify_all()
        except BaseException as e:  # noqa: BLE001 - handed to the learner side by get()
            with self._cond:
                self._error = e
                self._cond.notify_all()

    # --- learner side ---------------------------------------------------------------------------
    def get(self) -> Produced:
        """The next step's rollouts, in step order (blocks; the wait counts as learner idle time)."""
        t0 = time.monotonic()
        with self._cond:
            while not self._ready and self._error is None:
                self._cond.wait()
            self.learner_idle += time.monotonic() - t0
            if self._error is not None and not self._ready:
                raise self._error
            return self._ready.popleft()

    def consumed(self, step: int) -> None:
        """Step ``step`` is done (its update published, its checkpoint saved if it is a hold)."""
        with self._cond:
            if step != self._consumed + 1:
                raise ValueError(
                    f"step {step} consumed after step {self._consumed}: steps must follow each other"
                )
            self._consumed = step
            self._cond.notify_all()

    def engine_idle(self) -> float:
        """Seconds the producer has waited on capacity so far, the current wait included."""
        with self._cond:
            since = self._waiting_since
            return self._engine_idle + (time.monotonic() - since if since is not None else 0.0)

    def close(self, timeout: float | None = None) -> None:
        """Stop producing; wait (up to ``timeout``) for a produce call in flight to return."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
