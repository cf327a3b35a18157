"""The curriculum sampler: which tasks the trainer trains on at each step.

Deterministic for a seed.  Its whole state (phase, per-bucket cursors through seeded shuffles, RNG
state, promotion windows) is a JSON-able dict, so a resumed run draws exactly what an
uninterrupted run would have drawn.  Samplers are plain functions in a small registry:
``mixture`` (the phase's bucket weights), ``uniform`` (all tasks, buckets ignored: the baseline),
``live:band``, ``live:learnability``, ``live:skip`` (the phase's bucket weights, then a task by
its live pass-rate posterior: :mod:`rldata.curriculum.live`), and ``gaussian`` (the phase's bucket
weights, fixed domain shares, then a task by a Gaussian over its pass rate whose mean moves from easy
to hard over the run: :mod:`rldata.curriculum.gaussian`).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rldata.curriculum.config import DEFAULT_TRAIN_STEPS, Curriculum, Phase, _number
from rldata.curriculum.gaussian import domain_quota, gaussian_weight, target_rate
from rldata.curriculum.live import LiveState, skip_probability
from rldata.errors import ConfigError, RldataError
from rldata.registry import Registry

__all__ = ["SAMPLERS", "CurriculumSampler", "register_sampler", "uses_live"]


DrawFn = Callable[["CurriculumSampler", int], list[tuple[str, str]]]
SAMPLERS: Registry = Registry("sampler", field="sampler", sort_known=False)


def register_sampler(name: str) -> Callable[[DrawFn], DrawFn]:
    """Function decorator: ``@register_sampler("mixture")``."""
    return SAMPLERS.register(name)


def uses_live(name: str) -> bool:
    """Whether sampler ``name`` reads per-task pass rates (a :class:`LiveState`)."""
    return name.startswith("live:") or name == "gaussian"


def _pick(rng: random.Random, items: list[tuple[Any, float]]) -> Any:
    """One item drawn with probability proportional to its weight (one uniform draw)."""
    total = sum(w for _, w in items)
    u, acc = rng.random() * total, 0.0
    for item, w in items:
        acc += w
        if u < acc:
            return item
    return items[-1][0]


def _phase_buckets(s: CurriculumSampler) -> list[tuple[str, float]]:
    weights = [(b, w) for b, w in s.phase.weights.items() if w > 0 and s.bucket_size(b) > 0]
    if not weights:
        raise RldataError(f"phase {s.phase.name!r}: every bucket with a positive weight is empty")
    return weights


@register_sampler("mixture")
def _draw_mixture(s: CurriculumSampler, k: int) -> list[tuple[str, str]]:
    """Each draw picks a bucket by the phase's weights (empty buckets skipped), then its next task."""
    weights = _phase_buckets(s)
    out = []
    for _ in range(k):
        pick = _pick(s.rng, weights)
        out.append((s.take(pick), pick))
    return out


@register_sampler("uniform")
def _draw_uniform(s: CurriculumSampler, k: int) -> list[tuple[str, str]]:
    """The baseline that ignores buckets and phases: one shuffled pass over all tasks after another."""
    return [s.take_pooled() for _ in range(k)]


def _live_weighted(mode: str) -> DrawFn:
    def draw(s: CurriculumSampler, k: int) -> list[tuple[str, str]]:
        """The phase's weights pick a bucket; the live posterior's weights pick a task in it."""
        buckets = _phase_buckets(s)
        per_bucket = {b: [(t, s.live.weight(t, mode)) for t in s.bucket_tasks(b)] for b, _ in buckets}
        out = []
        for _ in range(k):
            b = _pick(s.rng, buckets)
            t = _pick(s.rng, per_bucket[b])
            s.live.note_draw(t)
            out.append((t, b))
        return out

    return draw


register_sampler("live:band")(_live_weighted("band"))
register_sampler("live:learnability")(_live_weighted("learnability"))


@register_sampler("live:skip")
def _draw_skip(s: CurriculumSampler, k: int) -> list[tuple[str, str]]:
    """GRESO-style: the phase picks a bucket, its shuffled order the next task, which is skipped with
    :func:`rldata.curriculum.live.skip_probability` of its zero-variance run (re-probed otherwise)."""
    cfg = s.live.config
    buckets = _phase_buckets(s)
    out = []
    for _ in range(k):
        b = _pick(s.rng, buckets)
        for _tries in range(10 * s.bucket_size(b)):  # the floor makes a pass always possible
            t = s.take(b)
            run = s.live.zero_run(t)
            if run == 0:
                break
            if s.rng.random() >= skip_probability(run, skip_p=cfg.skip_p, floor=cfg.floor):
                s.live.reprobed += 1
                break
            s.live.skipped += 1
        s.live.note_draw(t)
        out.append((t, b))
    return out


@register_sampler("gaussian")
def _draw_gaussian(s: CurriculumSampler, k: int) -> list[tuple[str, str]]:
    """Nemotron-style: the phase's weights pick a bucket per draw, a bucket's draws are split over its
    domains by their share (:func:`domain_quota`), and a task of the domain is drawn with the weight of
    a Gaussian over its pass rate around the step's target rate (:mod:`rldata.curriculum.gaussian`)."""
    cfg = s.live.config
    # the batch's own step: a step's replacement draws (dynamic sampling) come after next_batch counted it
    mean = target_rate(s.batch_index, s.total_steps, start=cfg.gauss_start, end=cfg.gauss_end)
    s.live.target = mean
    buckets = _phase_buckets(s)
    picks = [_pick(s.rng, buckets) for _ in range(k)]
    out = []
    for b in dict.fromkeys(picks):  # buckets in order of first pick
        by_domain = s.bucket_domains(b)
        quota = domain_quota(picks.count(b), {d: len(ts) for d, ts in by_domain.items()}, s.rng)
        for d, q in quota.items():
            weights = [(t, gaussian_weight(s.live.rate(t), mean, cfg.gauss_width)) for t in by_domain[d]]
            for _ in range(q):
                t = _pick(s.rng, weights)
                s.live.note_draw(t)
                out.append((t, b))
    return out


_POOL = "*"  # cursor name of the uniform sampler's pooled order


class CurriculumSampler:
    """Draws (task_id, bucket) batches under a curriculum; one ``next_batch`` call = one training step.

    Per bucket, tasks are visited in a shuffle seeded by (seed, bucket, epoch) and restart with a
    new shuffle when exhausted, so the state is a cursor, not a permutation.
    """

    def __init__(
        self,
        curriculum: Curriculum,
        bucket_tasks: Mapping[str, list[str]],
        *,
        seed: int | None = None,
        sampler: str | None = None,
        live: LiveState | None = None,
        domains: Mapping[str, str] | None = None,
        total_steps: int | None = None,
    ):
        self.curriculum = curriculum
        self.seed = curriculum.seed if seed is None else int(seed)
        self.sampler = sampler or curriculum.sampler
        SAMPLERS.resolve(self.sampler)
        unknown = [b for b in bucket_tasks if b not in curriculum.bucket_names]
        if unknown:
            raise RldataError(
                f"tasks given for unknown bucket(s) {unknown} (buckets: {curriculum.bucket_names})"
            )
        self._tasks = {b: sorted(set(bucket_tasks.get(b, ()))) for b in curriculum.bucket_names}
        self._pool = sorted({(t, b) for b, ts in self._tasks.items() for t in ts})
        if not self._pool:
            raise RldataError("no tasks in any bucket")
        self._window = max([p.promote_when.window for p in curriculum.phases if p.promote_when] or [1])
        self.rng = random.Random(self.seed)
        self._cursors: dict[str, list[int]] = {b: [0, 0] for b in [*curriculum.bucket_names, _POOL]}
        self._orders: dict[str, tuple[int, list]] = {}
        self._history: dict[str, list[float]] = {b: [] for b in curriculum.bucket_names}
        self.step = 0  # batches drawn so far
        self.batch_index = 0  # 0-based index of the batch the current draws belong to (extra draws keep it)
        self.phase_index = 0
        self.last_observed: int | None = None
        # live:* and gaussian read per-task pass rates (flat ones unless the caller brings a ledger prior)
        self.live = live if live is not None else (LiveState() if uses_live(self.sampler) else None)
        self.domains = dict(domains or {})  # task_id -> domain (gaussian keeps domain shares)
        self.total_steps = int(total_steps or DEFAULT_TRAIN_STEPS)  # gaussian's schedule runs over these
        self._by_domain: dict[str, dict[str, list[str]]] = {}

    @property
    def phase(self) -> Phase:
        return self.curriculum.phases[self.phase_index]

    def bucket_size(self, bucket: str) -> int:
        return len(self._tasks[bucket])

    def bucket_tasks(self, bucket: str) -> list[str]:
        return self._tasks[bucket]

    def bucket_domains(self, bucket: str) -> dict[str, list[str]]:
        """The bucket's tasks by domain (a task of unknown domain in domain '')."""
        got = self._by_domain.get(bucket)
        if got is None:
            got = {}
            for t in self._tasks[bucket]:
                got.setdefault(self.domains.get(t, ""), []).append(t)
            self._by_domain[bucket] = got
        return got

    def pool_tasks(self) -> list[str]:
        """Every task the sampler can draw, sorted."""
        return sorted({t for t, _ in self._pool})

    def _order(self, name: str, epoch: int) -> list:
        cached = self._orders.get(name)
        if cached is None or cached[0] != epoch:
            items = list(self._pool if name == _POOL else self._tasks[name])
            random.Random(f"{self.seed}/{name}/{epoch}").shuffle(items)  # str seeds hash with sha512: stable
            cached = self._orders[name] = (epoch, items)
        return cached[1]

    def _next(self, name: str):
        epoch, pos = self._cursors[name]
        order = self._order(name, epoch)
        item = order[pos]
        self._cursors[name] = [epoch + 1, 0] if pos + 1 == len(order) else [epoch, pos + 1]
        return item

    def take(self, bucket: str) -> str:
        return self._next(bucket)

    def take_pooled(self) -> tuple[str, str]:
        return self._next(_POOL)

    def _advance(self) -> None:
        if self.phase_index + 1 < len(self.curriculum.phases):
            self.phase_index += 1
            self._history = {b: [] for b in self._history}  # judge the new phase on its own steps

    def next_batch(self, k: int) -> list[tuple[str, str]]:
        """The next ``k`` (task_id, bucket) draws; a small bucket wraps around within a batch."""
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k}", field="k")
        self.batch_index = self.step
        batch = SAMPLERS[self.sampler](self, k)
        self.step += 1
        # advance now, so that .phase always names the phase the next batch is drawn from
        while (
            self.phase.until_step is not None
            and self.step >= self.phase.until_step
            and self.phase_index + 1 < len(self.curriculum.phases)
        ):
            self._advance()
        return batch

    def observe(
        self, step: int, per_bucket_accuracy: Mapping[str, float], evidence: Iterable[tuple] = ()
    ) -> bool:
        """Record step ``step``'s accuracy per bucket and its groups' ``(task_id, version, passes,
        fails)`` (fed to the live posteriors, if any); return True when a promotion rule fired."""
        if self.last_observed is not None and step <= self.last_observed:
            raise RldataError(f"step {step} observed after step {self.last_observed}: steps must increase")
        self.last_observed = step
        if self.live is not None:
            self.live.update_groups(evidence)
        for b, acc in per_bucket_accuracy.items():
            if b not in self._history:
                raise RldataError(
                    f"accuracy for unknown bucket {b!r} (buckets: {self.curriculum.bucket_names})"
                )
            if not _number(acc) or not 0.0 <= acc <= 1.0:
                raise RldataError(f"accuracy of bucket {b!r} must be in [0, 1], got {acc!r}")
            self._history[b] = (self._history[b] + [float(acc)])[-self._window :]
        rule = self.phase.promote_when
        if rule is None or self.phase_index + 1 == len(self.curriculum.phases):
            return False
        recent = self._history[rule.bucket][-rule.window :]
        if len(recent) == rule.window and sum(recent) / rule.window >= rule.threshold:
            self._advance()
            return True
        return False

    # ---- checkpointing --------------------------------------------------------------------------
    def _fingerprint(self) -> str:
        blob = json.dumps({b: self._tasks[b] for b in sorted(self._tasks)}).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def state_dict(self) -> dict:
        version, internal, gauss = self.rng.getstate()
        return {
            "version": 1,
            "sampler": self.sampler,
            "seed": self.seed,
            "tasks": self._fingerprint(),
            "step": self.step,
            "phase": self.phase_index,
            "last_observed": self.last_observed,
            "cursors": {b: list(c) for b, c in self._cursors.items()},
            "history": {b: list(h) for b, h in self._history.items()},
            "rng": [version, list(internal), gauss],
            **({"live": self.live.state_dict()} if self.live is not None else {}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a ``state_dict``; refuses one taken with other tasks, seed or sampler."""
        for k, mine in (("sampler", self.sampler), ("seed", self.seed), ("tasks", self._fingerprint())):
            if state.get(k) != mine:
                raise RldataError(
                    f"sampler state does not match this sampler: {k} {state.get(k)!r} != {mine!r}"
                )
        if not 0 <= state["phase"] < len(self.curriculum.phases):
            raise RldataError(
                f"sampler state has phase {state['phase']}, curriculum has {len(self.curriculum.phases)}"
            )
        self.step = int(state["step"])
        self.batch_index = max(self.step - 1, 0)
        self.phase_index = int(state["phase"])
        self.last_observed = state["last_observed"]
        self._cursors = {b: [int(e), int(p)] for b, (e, p) in state["cursors"].items()}
        self._history = {b: [float(x) for x in h] for b, h in state["history"].items()}
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        if self.live is not None and "live" in state:
            self.live.load_state_dict(state["live"])
