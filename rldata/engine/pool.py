"""Warm engines: a pool of vLLM engine actors that jobs borrow instead of starting their own.

An engine start costs seconds to minutes (importing vLLM, loading the model, building the KV cache);
a notebook that samples, evaluates, judges and samples again with one model pays it every time.  A
:class:`EnginePool` starts the engines of one model and one set of engine settings once, and lends
them to every job that asks for that model with those settings (``rldata.sample``, ``rldata.judge``,
``rldata.train`` and its evaluations, ``rldata demo``):

>>> with rldata.engines(model="my-model", engines=2) as pool:
...     rldata.sample(store, n=16, engines=pool)
...     rldata.sample(store, n=32, engines=pool)  # no engine starts: the same two engines

A pool is keyed by the model (its resolved directory and weights revision) and the engine settings
(context length, dtype, tensor parallelism, KV cache: :class:`rldata.configs.sampling.EngineConfig`);
a job asking for another key is refused, naming the first setting that differs.  Between users the
pool resets what a user may have changed, so a job on borrowed engines writes exactly the rows a job
on fresh engines writes:

- weights: an engine whose weights a trainer synced is reloaded from the model's own files (vLLM's
  loader, as at start);
- the prefix cache is dropped (its KV blocks belong to the previous user's prompts and weights);
- the random state is reseeded from the borrowing job's seed, as a fresh engine is seeded
  (``seed + i`` for engine i), so even unseeded requests draw what they would on fresh engines.

A pool's engines do not restart: one whose process died makes the pool refuse every later loan with
the cause (close it and open a new one), and it never hands out a dead actor.

:class:`EnginePools` keeps one pool per key, started on first use and closed least used first
when room is needed: ``with pools.active():`` makes every job in the block that would start engines on the local
Ray borrow them from there instead (the test suite runs that way; a long notebook may too).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Self

import psutil

from rldata.configs.fields import load
from rldata.configs.sampling import EngineConfig, VllmConfig
from rldata.errors import ConfigError, RldataError
from rldata.heavy import ray

__all__ = ["EngineDied", "EnginePool", "EnginePools", "Lease", "PoolKey", "borrow", "shared_pool"]

# Logical CPUs (Ray scheduling slots, not cores) of the local Ray a pool starts when none runs: the
# trainer's default run (an engine, a learner, verification) and one more, so one Ray serves a pool's
# sampling and a training run that borrows from it (rldata demo).
LOCAL_RAY_CPUS = 4
SHED_WAIT_S = 5.0  # how long shedding a pool waits for its engines' memory to come back
_GIB = 2**30
PING_TIMEOUT_S = 120.0  # how long a loan waits for an engine to answer (a busy one finishes its call first)

_ids = itertools.count()


class EngineDied(RldataError):
    """An engine of a pool died: the pool refuses every loan from then on."""


@dataclass(frozen=True)
class PoolKey:
    """What a pool's engines hold and how they were built: a job borrows only engines of its own key."""

    model: str  # the model directory vLLM loaded (resolved)
    revision: str  # rldata.engine.core.model_revision of its weights
    max_model_len: int
    dtype: str
    tensor_parallel_size: int
    kv_cache_gib: float | None

    @classmethod
    def of(cls, model: str | Path | None, *, max_model_len: int | None, vllm: VllmConfig) -> PoolKey:
        """The key of ``model`` (None: the bundled model; a hub id: its cached snapshot) with these
        settings; ``max_model_len`` None: the model's own context (rldata.engine.core.model_context)."""
        # start-up: `rldata tables` does not load rldata.engine.core
        from rldata.engine.core import model_context, model_identity

        ident = model_identity(model)
        return cls(
            model=str(Path(ident.load).resolve()),
            revision=ident.revision,
            max_model_len=int(max_model_len or model_context(ident.path)),
            dtype=vllm.dtype,
            tensor_parallel_size=vllm.tensor_parallel_size,
            kv_cache_gib=vllm.kv_cache_gib,
        )

    def differs(self, other: PoolKey) -> tuple[str, Any, Any] | None:
        """(field, this value, the other's) of the first setting that differs, named as
        :class:`EngineConfig` names it; None when the keys are equal."""
        names = {"dtype": "vllm.dtype", "tensor_parallel_size": "vllm.tensor_parallel_size"}
        names["kv_cache_gib"] = "vllm.kv_cache_gib"
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                return ("model" if f.name == "revision" else names.get(f.name, f.name), a, b)
        return None

    def engine_kwargs(self) -> dict[str, Any]:
        """The rldata.engine.core.Engine keywords of this key (tensor parallelism goes to start_engines)."""
        return {"max_model_len": self.max_model_len, "dtype": self.dtype, "kv_cache_gib": self.kv_cache_gib}


class Lease:
    """Engines lent to one job: ``actors`` until :meth:`close` gives them back (a context manager)."""

    def __init__(self, actors: Sequence, pool: EnginePool | None = None, model_id: str | None = None):
        self.actors = list(actors)
        self._pool = pool
        self._model_id = model_id  # the id an engine started for the job would record (None: the actor's)

    def remote(self, i: int = 0):
        """Engine ``i`` as a local engine (:class:`rldata.engine.actors.RemoteEngine`, what the
        generative judge runs on), named as an engine the job started itself would name its model."""
        # start-up: `rldata tables` does not load rldata.engine.actors
        from rldata.engine.actors import RemoteEngine

        engine = RemoteEngine(self.actors[i])
        if self._model_id is not None:
            engine.model_id = self._model_id
        return engine

    def close(self) -> None:
        if self._pool is not None:
            self._pool._give_back(self)
            self._pool = None

    def __enter__(self) -> list:
        return self.actors

    def __exit__(self, *exc) -> None:
        self.close()


class EnginePool:
    """Engine actors of one model and one set of engine settings, started once and lent to jobs.

    ``config``: an :class:`EngineConfig` (or a mapping, or a YAML/TOML file of its fields) and
    ``settings`` its fields by name (``model``, ``engines``, ``max_model_len``, ``dtype``,
    ``kv_cache_gib``, ``tensor_parallel_size``), winning over it.  ``engines`` None: one per GPU, on
    CPU one per core (at most 4).  ``address``: the Ray cluster (default: $RAY_ADDRESS, else a local
    Ray, started with at least :data:`LOCAL_RAY_CPUS` logical CPUs when none runs).  ``seed``: the
    engines' seed until a job borrows them (each loan reseeds them from the job's own seed).

    The engines start when the pool is made (it returns once they are loaded) and stop at
    :meth:`close` (or at the end of a ``with`` block).
    """

    def __init__(self, config: Any = None, /, *, address: str | None = None, seed: int = 0, **settings: Any):
        cfg = load(EngineConfig, config, **settings)
        self.key = PoolKey.of(cfg.model, max_model_len=cfg.max_model_len, vllm=cfg.vllm)
        # start-up: `rldata tables` does not load rldata.engine.core
        from rldata.engine.core import default_model_path

        # what the engines load, given as a job starting its own would give it (None: the bundled
        # model, which its engines then record under its own id)
        self._load = None if self.key.model == str(default_model_path().resolve()) else self.key.model
        # the settings as given, with the context resolved: what a job's own defaults follow (the
        # bundled model as None, however it was named, so a job following the pool names it as its own)
        model = None if self._load is None else cfg.model
        self.config = replace(cfg, model=model, max_model_len=self.key.max_model_len)
        self.address = address
        self.name = f"rldata-pool-{os.getpid()}-{next(_ids)}"
        self._lock = threading.Lock()
        self._lent: Lease | None = None
        self._dead: str | None = None  # why the pool refuses loans (an engine died), once known
        self._closed = False
        self._seed = seed
        self.actors: list = []
        self._start(cfg.engines)

    # ---- lifecycle ---------------------------------------------------------------------------------
    def _start(self, k: int | None) -> None:
        """Start ``k`` engines (None: :func:`rldata.engine.actors.default_engines`), as a job would."""
        # start-up: `rldata tables` does not load rldata.engine.actors
        from rldata.engine.actors import ensure_ray, hold_local_ray, start_engines

        ensure_ray(self.address, num_cpus=max(LOCAL_RAY_CPUS, os.cpu_count() or 1))
        hold_local_ray(self, True)  # rldata never restarts the local Ray under a running pool
        try:
            self.actors = start_engines(
                k,
                self._load,
                seed=self._seed,
                tensor_parallel_size=self.key.tensor_parallel_size,
                engine_kwargs=self.key.engine_kwargs(),
                max_restarts=0,  # a dead engine is reported, never silently replaced under a job
                name_prefix=self.name,
            )
        except BaseException:
            self.close()
            raise

    @property
    def size(self) -> int:
        """How many engines the pool holds."""
        return len(self.actors)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop the engines (a job holding them fails); a closed pool lends nothing."""
        if self._closed:
            return
        self._closed = True
        # start-up: `rldata tables` does not load rldata.engine.actors
        from rldata.engine.actors import hold_local_ray

        try:
            if ray.is_initialized():
                for a in self.actors:
                    ray.kill(a)
        finally:
            hold_local_ray(self, False)
            self.actors = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "dead" if self._dead else "lent" if self._lent else "idle"
        return f"EnginePool({self.key.model!r}, engines={self.size}, {state})"

    # ---- lending -----------------------------------------------------------------------------------
    def follow(self, config: EngineConfig) -> EngineConfig:
        """``config`` with the settings it leaves at their defaults taken from the pool's: a job given
        a pool need not repeat the model or the context."""
        default = EngineConfig()
        given = {f.name: getattr(config, f.name) for f in fields(EngineConfig)}
        own = {f.name: getattr(self.config, f.name) for f in fields(EngineConfig)}
        out = {k: (own[k] if v == getattr(default, k) else v) for k, v in given.items()}
        out["engines"] = given["engines"]  # how many to borrow is the job's (None: as many as it can use)
        return replace(config, **out)

    def check(self) -> None:
        """Raise (closed pool, dead engine) unless every engine answers; an engine that died makes
        the pool refuse this and every later loan, naming the engine and the cause."""
        if self._closed:
            raise RldataError(f"{self.name}: the pool is closed")
        if self._dead is not None:
            raise EngineDied(self._dead)
        refs = [a.ping.remote() for a in self.actors]
        for i, ref in enumerate(refs):
            try:
                ray.get(ref, timeout=PING_TIMEOUT_S)
            except ray.exceptions.RayError as e:
                if not engine_gone(e):
                    raise RldataError(
                        f"engine {i} of {self.name} did not answer in {PING_TIMEOUT_S:g} s (still busy "
                        "with an earlier job's call?)"
                    ) from None
                cause = " ".join(str(e).split())[:600]
                self._dead = (
                    f"engine {i} of {self.name} ({Path(self.key.model).name}) died, so the pool lends "
                    f"nothing more (close it and open a new one): {type(e).__name__}: {cause}"
                )
                raise EngineDied(self._dead) from None

    def lend(
        self,
        *,
        model: str | Path | None,
        max_model_len: int | None,
        vllm: VllmConfig | None = None,
        engines: int | None = None,
        batches: int | None = None,
        seed: int | None = 0,
        name_as: str | Path | None = None,
    ) -> Lease:
        """Engines for a job that would start ``engines`` engines of ``model`` with these settings
        (``engines`` None: as many as the pool has, at most ``batches``); refused when the settings
        differ from the pool's (a ConfigError naming the first), when the pool is lent, closed or one
        of its engines died.  Each engine lent is reset: its own weights back if a user changed them,
        the prefix cache dropped, the random state seeded ``seed + i`` as start_engines seeds engine i.
        ``name_as``: the model the job loads into them itself (a resumed run's checkpoint; default
        ``model``), which :meth:`Lease.remote` names them by."""
        if self._dead is not None:
            raise EngineDied(self._dead)
        want = PoolKey.of(model, max_model_len=max_model_len, vllm=vllm or VllmConfig())
        diff = self.key.differs(want)
        if diff is not None:
            name, have, asked = diff
            raise ConfigError(
                f"{name}: the engine pool holds {have!r}, this job asks for {asked!r} (borrow from a "
                "pool of the job's settings, or give the job none)",
                field=name,
            )
        if engines is not None and engines > self.size:
            raise ConfigError(
                f"engines: the pool has {self.size} engine(s), this job asks for {engines}", field="engines"
            )
        k = engines or (self.size if batches is None else max(1, min(self.size, batches)))
        with self._lock:
            if self._lent is not None:
                raise RldataError(f"{self.name}: its engines are lent to another job (one job at a time)")
            self.check()
            # start-up: `rldata tables` does not load rldata.engine.core
            from rldata.engine.core import model_identity

            named = model_identity(name_as if name_as is not None else model).model_id
            lease = self._lent = Lease(self.actors[:k], self, named)
        try:
            self._reset(lease.actors, 0 if seed is None else seed)
        except BaseException:
            lease.close()
            raise
        return lease

    def _reset(self, actors: Sequence, seed: int) -> None:
        ray.get([a.reset.remote(seed + i) for i, a in enumerate(actors)])

    def _give_back(self, lease: Lease) -> None:
        with self._lock:
            if self._lent is lease:
                self._lent = None


class EnginePools:
    """One :class:`EnginePool` per key, started on first use; at most ``max_engines`` engines live at
    once (the least used pools close first to make room), and idle ones close while the machine
    has less than ``min_free_gib`` of memory available (:meth:`shed`).  ``with pools.active():``
    lends from here to every job in the block that would start engines on its local Ray."""

    def __init__(self, *, max_engines: int = 3, min_free_gib: float = 0.0):
        self.max_engines = max_engines
        self.min_free_gib = min_free_gib
        self.shed_pools = 0  # idle pools closed because the machine ran short of memory (shed)
        self._pools: OrderedDict[PoolKey, EnginePool] = OrderedDict()  # least recently used first
        self._loans: dict[PoolKey, int] = {}  # jobs served per key, over the pools' lives
        self._sizes: dict[PoolKey, int] = {}  # the most engines a pool of each key was started with
        self.started = 0  # pools started so far (each an engine start paid once)
        self.died: list[str] = []  # the cause of each pool closed and started anew because an engine died

    def pool_for(self, key: PoolKey, *, engines: int = 1) -> EnginePool:
        """The pool of ``key`` with at least ``engines`` engines.  A pool is started with as many as
        the job asks for, and restarted with more when a later job asks for more: its engines are
        then laid out (threads, CPU slots) as a job starting that many lays out its own.  A pool
        closed (for room or memory) and started again comes back at the most it ever had, so the
        jobs it served before do not restart it to grow again.  An idle pool
        one of whose engines died (killed, or out of memory) is closed and started anew, its cause
        kept in ``died``: one death fails the job it happened under, not every later one."""
        pool = self._pools.pop(key, None)
        if pool is not None and not pool.closed and not _alive(pool):
            self.died.append(pool._dead)
        if pool is not None and (pool.closed or pool._dead is not None or engines > pool.size):
            pool.close()
            pool = None
        if pool is None:
            engines = self._sizes[key] = max(engines, self._sizes.get(key, 0))
            self.make_room(engines)
            pool = EnginePool(
                EngineConfig(
                    model=key.model,
                    engines=engines,
                    max_model_len=key.max_model_len,
                    vllm=VllmConfig(key.dtype, key.tensor_parallel_size, key.kv_cache_gib),
                )
            )
            self.started += 1
        self._pools[key] = pool
        self._loans[key] = self._loans.get(key, 0) + 1
        return pool

    def make_room(self, engines: int) -> None:
        """Close idle pools until one of ``engines`` fits beside the others under ``max_engines``:
        the least used first (fewest jobs served), of those the least recently used; then
        :meth:`shed` what memory asks."""
        for key in self._least_used():
            if self.live_engines + engines <= self.max_engines:
                break
            self._close_idle(key)
        self.shed()

    def shed(self) -> int:
        """Close idle pools, the least used first, while the machine has less than ``min_free_gib``
        of memory available (each engine holds its KV cache and a copy of the weights: warm ones
        left running would leave a job starting its own engines, or a trainer, short).  Returns how
        many it closed; ``shed_pools`` counts them all."""
        closed = 0
        for key in self._least_used():
            before = psutil.virtual_memory().available
            if before >= self.min_free_gib * _GIB:
                break
            if self._close_idle(key):
                closed += 1
                deadline = time.monotonic() + SHED_WAIT_S  # Ray stops the actors' processes after kill
                while psutil.virtual_memory().available < before + _GIB / 2 and time.monotonic() < deadline:
                    time.sleep(0.2)
        self.shed_pools += closed
        return closed

    def _least_used(self) -> list[PoolKey]:
        return sorted(self._pools, key=lambda k: self._loans.get(k, 0))  # stable: least recent first

    def _close_idle(self, key: PoolKey) -> bool:
        if self._pools[key]._lent is not None:
            return False
        self._pools.pop(key).close()
        return True

    def release(self, cpus: float) -> None:
        """Close idle pools, least recently used first, until the local Ray has ``cpus`` logical CPUs
        free (room for a job that starts engines of its own)."""
        for key in list(self._pools):
            if not ray.is_initialized() or ray.available_resources().get("CPU", 0) >= cpus:
                return
            self._close_idle(key)

    @property
    def loans(self) -> int:
        """Jobs served so far (each a loan; ``started`` of them paid a pool start)."""
        return sum(self._loans.values())

    @property
    def live_engines(self) -> int:
        return sum(p.size for p in self._pools.values() if not p.closed)

    def close(self) -> None:
        while self._pools:
            self._pools.popitem(last=False)[1].close()

    @contextmanager
    def active(self) -> Iterator[EnginePools]:
        """Within the block, jobs with no engines given and no Ray address borrow from these pools."""
        _ACTIVE.append(self)
        try:
            yield self
        finally:
            _ACTIVE.remove(self)


_ACTIVE: list[EnginePools] = []


def engine_gone(error: BaseException) -> bool:
    """Whether ``error``, raised by a call to an engine, says its process is gone: killed (an actor
    error), killed by Ray's memory monitor (an OutOfMemoryError, which is not an actor error), its
    worker or node lost.  A call that timed out (a busy engine) is not."""
    return isinstance(error, ray.exceptions.RayError) and not isinstance(
        error, ray.exceptions.GetTimeoutError
    )


def _alive(pool: EnginePool) -> bool:
    """Whether every engine of an idle ``pool`` answers (one that died, killed or out of memory, is
    replaced, not lent); a lent pool is its borrower's to check."""
    if pool._lent is not None:
        return True
    try:
        pool.check()
    except EngineDied:
        return False
    return True


@contextmanager
def shared_pool(config: EngineConfig, *, seed: int = 0) -> Iterator[EnginePool]:
    """The pool a program's stages share (``rldata demo``: its sample and its training run): inside a
    ``with pools.active():`` block (and with no $RAY_ADDRESS), the active pools' pool of ``config``'s
    key, left running after the block; otherwise one started here and closed after it.
    ``config.engines`` None: as many as a job that is not told starts."""
    if _ACTIVE and not os.environ.get("RAY_ADDRESS"):
        key = PoolKey.of(config.model, max_model_len=config.max_model_len, vllm=config.vllm)
        engines = config.engines
        if engines is None:
            # start-up: `rldata tables` does not load rldata.engine.actors
            from rldata.engine.actors import default_engines, ensure_ray

            engines = default_engines(ensure_ray(None), tensor_parallel_size=key.tensor_parallel_size)
        yield _ACTIVE[-1].pool_for(key, engines=engines)
        return
    with EnginePool(config, seed=seed) as pool:
        yield pool


def borrow(
    lent: Any,
    *,
    model: str | Path | None,
    max_model_len: int | None,
    vllm: VllmConfig | None = None,
    engines: int | None = None,
    batches: int | None = None,
    seed: int | None = 0,
    address: str | None = None,
    name_as: str | Path | None = None,
) -> Lease | None:
    """The engines a job runs on when it starts none of its own: ``lent`` as given (a list of running
    actors, e.g. a training run's for its evaluations: used as they are, nothing reset), a loan from
    ``lent`` (an :class:`EnginePool`, or an :class:`EnginePools` picking the pool of the job's key),
    or with ``lent`` None a loan from the active :class:`EnginePools` (none for a job given a Ray
    address); None: the job starts its own.  The other arguments are what the job would start its
    engines with (:meth:`EnginePool.lend`)."""
    if lent is None:
        if not _ACTIVE or address or os.environ.get("RAY_ADDRESS"):
            return None
        lent = _ACTIVE[-1]
    if isinstance(lent, EnginePools):
        key = PoolKey.of(model, max_model_len=max_model_len, vllm=vllm or VllmConfig())
        if engines is None:
            # start-up: `rldata tables` does not load rldata.engine.actors
            from rldata.engine.actors import default_engines, ensure_ray

            tp = (vllm or VllmConfig()).tensor_parallel_size
            engines = default_engines(ensure_ray(address), tensor_parallel_size=tp, batches=batches)
        lent = lent.pool_for(key, engines=engines)
    if isinstance(lent, EnginePool):
        return lent.lend(
            model=model, max_model_len=max_model_len, vllm=vllm, engines=engines, batches=batches,
            seed=seed, name_as=name_as,
        )  # fmt: skip
    if isinstance(lent, Lease):
        return Lease(lent.actors)
    return Lease(list(lent))
