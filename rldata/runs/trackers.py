"""Experiment trackers: every metric row the trainer writes, streamed to TensorBoard, W&B or MLflow.

The store stays the source of truth: a tracker only mirrors the ``metrics`` rows as they land, and
:func:`replay` writes a finished run into one afterwards.  Every tracker runs offline: a
TensorBoard event dir, a W&B offline run (``WANDB_MODE=offline``) and an MLflow file store, all
under one local directory.  Add a tracker by subclassing :class:`Tracker` and naming it in
:data:`TRACKERS`.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rldata.console import log
from rldata.errors import RldataError
from rldata.heavy import Lazy
from rldata.registry import Registry
from rldata.store.core import Store
from rldata.store.outputs import check_output_path

__all__ = ["TRACKERS", "Tracker", "check_tracker", "open_tracker", "replay", "tracker_names"]

_tensorboard = Lazy("torch.utils.tensorboard")  # the tensorboard tracker's writer (torch's)


class Tracker:
    """One run's tracker.  ``log`` may be called from the trainer's write-back thread and from the
    main thread (evaluations), hence the lock.  A tracker that fails is switched off with one
    warning: the run goes on, its metrics are in the store and can be replayed."""

    name = ""
    extra = ""  # the pyproject extra that installs the tracker's library
    module = ""  # the library's top-level module, checked before a run starts

    def __init__(self, out: str | os.PathLike, *, run_id: str, config: Mapping[str, Any]):
        self.out = Path(out)
        self.run_id = run_id
        self._lock = threading.Lock()
        self._broken = False
        self.out.mkdir(parents=True, exist_ok=True)
        self._open(dict(config))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        with self._lock:
            if self._broken or not metrics:
                return
            try:
                self._log(int(step), {k: float(v) for k, v in metrics.items()})
            except Exception as e:  # noqa: BLE001 - a tracker must never stop a training run
                self._broken = True
                log(
                    f"warning: tracker {self.name} failed ({type(e).__name__}: {e}); it is off for this run. "
                    f"The metrics are in the store: rldata metrics export --run {self.run_id} --to {self.name}"
                )

    def close(self) -> None:
        with self._lock:
            self._close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _open(self, config: dict) -> None:
        pass

    def _log(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def _close(self) -> None:
        pass


class NoTracker(Tracker):
    name = "none"

    def __init__(self, out=None, *, run_id: str = "", config: Mapping[str, Any] | None = None):
        self.run_id, self._lock, self._broken = run_id, threading.Lock(), True


class TensorBoardTracker(Tracker):
    """Scalars in an event dir (``tensorboard --logdir OUT``); the config as a text summary."""

    name, extra, module = "tensorboard", "tensorboard", "tensorboard"

    def _open(self, config: dict) -> None:
        self._w = _tensorboard.SummaryWriter(log_dir=str(self.out))
        self._w.add_text("config", "```\n" + json.dumps(config, indent=1, default=str) + "\n```", 0)

    def _log(self, step: int, metrics: dict[str, float]) -> None:
        for k, v in metrics.items():
            self._w.add_scalar(k, v, step)
        self._w.flush()  # "as it lands": a live tensorboard sees the step now, not at close

    def _close(self) -> None:
        self._w.close()


class WandbTracker(Tracker):
    """A W&B offline run under OUT/wandb (``wandb sync`` uploads it later, if wanted)."""

    name, extra, module = "wandb", "wandb", "wandb"

    def _open(self, config: dict) -> None:
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        mode = "online" if os.environ.get("WANDB_MODE") == "online" else "offline"  # offline unless asked
        self._run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "rldata"),
            name=self.run_id,
            id=_wandb_id(self.run_id),
            dir=str(self.out),
            mode=mode,
            config=config,
            reinit="create_new",
        )

    def _log(self, step: int, metrics: dict[str, float]) -> None:
        self._run.log(metrics, step=step)

    def _close(self) -> None:
        self._run.finish()


def _wandb_id(run_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", run_id)[:128]


class MlflowTracker(Tracker):
    """An MLflow run in a file store (``mlflow ui --backend-store-uri OUT``), experiment ``rldata``."""

    name, extra, module = "mlflow", "mlflow", "mlflow"

    def _open(self, config: dict) -> None:
        # MLflow 3 refuses the file store unless asked; it is the one backend mlflow-skinny runs offline
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow import MlflowClient
        from mlflow.entities import Param

        self._c = MlflowClient(tracking_uri=self.out.resolve().as_uri())
        exp = self._c.get_experiment_by_name("rldata")
        exp_id = exp.experiment_id if exp else self._c.create_experiment("rldata")
        self._run = self._c.create_run(
            exp_id, run_name=self.run_id, tags={"rldata.run_id": self.run_id}
        ).info.run_id
        params = [Param(k[:250], str(v)[:6000]) for k, v in _flatten(config).items()]
        for i in range(0, len(params), 100):  # log_batch takes at most 100 params per call
            self._c.log_batch(self._run, params=params[i : i + 100])
        self._c.log_dict(self._run, config, "config.json")

    def _log(self, step: int, metrics: dict[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        ms = [Metric(_mlflow_key(k), v, now, step) for k, v in metrics.items()]
        for i in range(0, len(ms), 1000):
            self._c.log_batch(self._run, metrics=ms[i : i + 1000])

    def _close(self) -> None:
        self._c.set_terminated(self._run)


def _mlflow_key(name: str) -> str:
    # MLflow allows letters, digits, _ - . / and space in a key; bucket names may hold anything else
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", name)


def _flatten(d: Mapping, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out |= _flatten(v, key + ".")
        else:
            out[key] = v
    return out


TRACKERS: Registry = Registry("tracker", error=RldataError, sort_known=False)
TRACKERS.register("none", NoTracker)
TRACKERS.register("tensorboard", TensorBoardTracker)
TRACKERS.register("wandb", WandbTracker)
TRACKERS.register("mlflow", MlflowTracker)


def tracker_names() -> list[str]:
    return TRACKERS.names()


def check_tracker(name: str) -> None:
    """Fail now, with the install hint, when ``name`` is unknown or its library is missing."""
    import importlib.util

    cls = TRACKERS.resolve(name)
    if cls.module and importlib.util.find_spec(cls.module) is None:
        raise RldataError(f"tracker {name} needs {cls.module}: pip install 'rldata[{cls.extra}]'")


def open_tracker(
    name: str, out: str | os.PathLike | None, *, run_id: str, config: Mapping[str, Any]
) -> Tracker:
    """The tracker ``name`` writing under ``out``; a clear error when its extra is not installed."""
    check_tracker(name)
    cls = TRACKERS[name]
    if cls is NoTracker:
        return NoTracker(run_id=run_id)
    if out is None:
        raise RldataError(f"tracker {name} needs a directory to write to")
    try:
        return cls(out, run_id=run_id, config=config)
    except ImportError as e:
        raise RldataError(
            f"tracker {name} needs its library ({e.name or e}): pip install 'rldata[{cls.extra}]'"
        ) from None


def replay(store: Store, run_id: str, name: str, out: str | os.PathLike) -> dict[str, int]:
    """Write a stored run's metrics, step by step, and its config into tracker ``name`` under ``out``."""
    check_output_path(out, store=store, name="out")
    runs = store.sql("SELECT args FROM runs WHERE run_id = $1", params=[run_id]).fetchall()
    rows = store.sql(
        "SELECT step, name, value FROM metrics WHERE run_id = $1 AND value IS NOT NULL ORDER BY step, name",
        params=[run_id],
    ).fetchall()
    if not runs and not rows:
        raise RldataError(f"run {run_id!r}: not in the runs table and no metrics rows (see rldata runs)")
    config = json.loads(runs[0][0]) if runs and runs[0][0] else {}
    by_step: dict[int, dict[str, float]] = {}
    for step, key, value in rows:
        by_step.setdefault(int(step), {})[key] = value
    with open_tracker(name, out, run_id=run_id, config=config) as tracker:
        for step in sorted(by_step):
            tracker.log(step, by_step[step])
        if tracker._broken and name != "none":
            raise RldataError(f"tracker {name} failed while replaying {run_id}; see the warning above")
    return {"steps": len(by_step), "values": len(rows)}
