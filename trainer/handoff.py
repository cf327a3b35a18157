"""What the learner side hands to the rollout producer thread (see rldata.trainer.pipeline): the
newest weights, and the curriculum observations.

Both are applied by whoever is the only thread touching the engines and the sampler at that moment:
the producer between generate calls, or the learner side when the producer is known to be waiting
(sync mode, and a hold step such as a checkpoint).  That keeps every sampler mutation in one thread
at a time without holding a lock across a generate call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from rldata.heavy import ray

__all__ = ["Observations", "Weights"]


class Weights:
    """The learners' newest weights (an object ref) and the version the engines hold."""

    def __init__(self, version: int):
        self._latest: tuple[int, object] = (version, None)  # replaced whole: one atomic assignment
        self.engine_version = version

    def publish(self, version: int, ref) -> None:
        """After an update: ``ref`` resolves to the weights of ``version`` (rank 0's flat_weights)."""
        self._latest = (version, ref)

    def load(self, engines: Sequence) -> float:
        """Newer weights into every engine, in place, if any; returns the seconds it took."""
        version, ref = self._latest
        if ref is None or version == self.engine_version:
            return 0.0
        t0 = time.monotonic()
        # Object store to engines, not through the driver; every engine holds the same version after.
        ray.get([e.reload_weights.remote(ref) for e in engines])
        self.engine_version = version
        return time.monotonic() - t0


class Observations:
    """Per-step curriculum accuracy waiting for ``sampler.observe``, applied in step order."""

    def __init__(self, sampler):
        self.sampler = sampler
        self._pending: list[tuple[int, dict]] = []
        self._lock = threading.Lock()
        self.promotions = 0  # promotion rules fired so far

    def push(self, step: int, per_bucket_accuracy: dict, evidence: Sequence[tuple] = ()) -> None:
        """``evidence``: the step's ``(task_id, version, passes, fails)`` per group, for live posteriors."""
        with self._lock:
            self._pending.append((step, per_bucket_accuracy, list(evidence)))

    def apply(self) -> None:
        """Feed the waiting observations to the sampler (only from the thread that draws)."""
        with self._lock:
            todo, self._pending = self._pending, []
        for step, acc, evidence in todo:  # in consumption order: live posteriors see groups as consumed
            self.promotions += int(self.sampler.observe(step, acc, evidence))
