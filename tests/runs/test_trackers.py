"""Trackers: a stored run replayed (``rldata metrics export``) into TensorBoard, W&B (offline) and
MLflow (file store), each read back with the tracker's own reader; a failing tracker never stops a
run.  The trainer's streaming path is tests/trainer/test_train_report.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rldata.cli import main
from rldata.runs.core import record_run
from rldata.runs.trackers import TRACKERS, Tracker, open_tracker

VALUES = {1: {"reward_mean": 0.25, "kl": 0.01, "accuracy/b 1": 0.5}, 2: {"reward_mean": 0.5, "kl": 0.02}}


def _stored_run(store, run_id="r1"):
    with record_run(
        store, "train", {"config": {"lr": 1e-4, "group_size": 8}, "options": {"tag": "t"}}, run_id=run_id
    ):
        store.append(
            "metrics",
            [
                {"run_id": run_id, "step": s, "name": k, "value": v}
                for s, m in VALUES.items()
                for k, v in m.items()
            ],
        )


def _export(capsys, store, to, out):
    code = main(["--store", store.root, "metrics", "export", "--run", "r1", "--to", to, str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "exported 5 values over 2 steps" in err


@pytest.mark.slow  # torch.utils.tensorboard imports torch
def test_tensorboard_export_reads_back_with_event_accumulator(store, tmp_path, capsys):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _stored_run(store)
    _export(capsys, store, "tensorboard", tmp_path / "tb")
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert {"reward_mean", "kl", "accuracy/b 1"} <= set(acc.Tags()["scalars"])
    assert [(e.step, e.value) for e in acc.Scalars("reward_mean")] == [(1, 0.25), (2, 0.5)]
    assert [e.step for e in acc.Scalars("accuracy/b 1")] == [1]
    assert "config/text_summary" in acc.Tags()["tensors"]  # the run's config, as text


@pytest.mark.slow  # mlflow's import takes a few seconds
def test_mlflow_export_reads_back_with_the_mlflow_client(store, tmp_path, capsys):
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    from mlflow import MlflowClient

    _stored_run(store)
    _export(capsys, store, "mlflow", tmp_path / "ml")
    c = MlflowClient(tracking_uri=(tmp_path / "ml").resolve().as_uri())
    exp = c.get_experiment_by_name("rldata")
    (run,) = c.search_runs([exp.experiment_id], filter_string="tags.`rldata.run_id` = 'r1'")
    hist = c.get_metric_history(run.info.run_id, "reward_mean")
    assert sorted((m.step, m.value) for m in hist) == [(1, 0.25), (2, 0.5)]
    assert [m.step for m in c.get_metric_history(run.info.run_id, "accuracy/b 1")] == [1]
    assert run.data.params["config.lr"] == "0.0001" and run.data.params["options.tag"] == "t"
    assert run.info.status == "FINISHED"


@pytest.mark.slow  # wandb starts its wandb-core service
def test_wandb_offline_export_reads_back_with_wandb_leet_inspect(store, tmp_path, capsys, monkeypatch):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    monkeypatch.setenv("WANDB_MODE", "offline")
    _stored_run(store)
    _export(capsys, store, "wandb", tmp_path / "wb")
    (log,) = (tmp_path / "wb" / "wandb").glob("offline-run-*/run-r1.wandb")
    # wandb's own reader of its transaction log (wandb >= 0.25 has no Python datastore reader)
    wandb_cli = str(Path(sys.executable).with_name("wandb"))
    out = subprocess.run(
        [wandb_cli, "leet", "inspect", "--json", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    records = [json.loads(x) for x in out.splitlines() if x.strip()]
    history = [r["history"] for r in records if r["type"] == "history"]
    got = {
        h["step"].get("num", 0): {k: v for k, v in h["item"].items() if not k.startswith("_")}
        for h in history
    }
    assert got == VALUES
    (run,) = [r["run"] for r in records if r["type"] == "run"]
    assert run["config"]["update"]["config"]["lr"] == 1e-4 and run["run_id"] == "r1"


class _Failing(Tracker):
    name = "failing"

    def _log(self, step, metrics):
        raise OSError("disk full")


def test_a_failing_tracker_is_switched_off_with_one_warning(tmp_path, capsys):
    t = _Failing(tmp_path / "f", run_id="r", config={})
    t.log(1, {"a": 1.0})
    t.log(2, {"a": 2.0})  # no second warning, no exception
    t.close()
    err = capsys.readouterr().err
    assert err.count("tracker failing failed") == 1 and "metrics export --run r" in err


class _Missing(Tracker):
    name, extra, module = "missing", "x", "no_such_module_rldata"


def test_unknown_tracker_and_export_errors(store, tmp_path, capsys, monkeypatch):
    from rldata.errors import RldataError
    from rldata.trainer.config import TrainRun

    assert set(TRACKERS) == {"none", "tensorboard", "wandb", "mlflow"}
    with pytest.raises(RldataError, match="unknown tracker 'neptune'"):
        open_tracker("neptune", tmp_path, run_id="r", config={})
    with pytest.raises(RldataError, match="neptune"):
        TrainRun(tracker="neptune")
    monkeypatch.setitem(TRACKERS, "missing", _Missing)
    with pytest.raises(RldataError, match=r"pip install 'rldata\[x\]'"):  # before any run starts
        TrainRun(tracker="missing")
    code = main(
        ["--store", store.root, "metrics", "export", "--run", "nope", "--to", "tensorboard", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert code == 1 and "nope" in err and err.count("\n") == 1
    code = main(["--store", store.root, "metrics", "export", "--run", "r1", "--to", "none", str(tmp_path)])
    assert code == 1 and "--to" in capsys.readouterr().err
