"""rldata predict --backtest: the held-out split never leaks into the fit, later policy versions are
scored, the metrics land in the store and on the report page."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

import rldata.predict.backtest as bt
from rldata.engine.core import model_identity
from rldata.ledger.core import passrate_row
from rldata.predict import PredictConfig, backtest_store
from rldata.predict.backtest import holdout_split

FAST = {"features": "text,meta"}


def test_holdout_split_is_a_stable_partition():
    ids = [f"t{i}" for i in range(1000)]
    train, held = holdout_split(ids, seed=0, share=0.2)
    assert sorted(train + held) == sorted(ids) and not set(train) & set(held)
    assert 150 < len(held) < 250
    more_train, more_held = holdout_split(ids + [f"x{i}" for i in range(500)], seed=0, share=0.2)
    assert set(held) <= set(more_held) and set(train) <= set(more_train)  # adding tasks moves none
    assert holdout_split(ids, seed=1, share=0.2)[1] != held


def test_a_held_out_task_never_reaches_the_fit(arith_store, monkeypatch):
    seen_by_fit = []
    real = bt.fit_predictor

    def spy(feats, counts, **kw):
        seen_by_fit.append(set(counts["task_id"].to_list()))
        return real(feats, counts, **kw)

    monkeypatch.setattr(bt, "fit_predictor", spy)
    res = backtest_store(arith_store, PredictConfig(**FAST, dry_run=True))
    _, held = holdout_split(sorted(arith_store.read("tasks")["task_id"].to_list()), seed=0, share=0.2)
    assert len(seen_by_fit) == 1 and seen_by_fit[0] and not seen_by_fit[0] & set(held)
    tasks = res.splits["tasks"]
    assert tasks["model"]["tasks"] == len(held) and tasks["model"]["fit_tasks"] == 240 - len(held)
    # the model beats the baselines that see less of the task
    assert tasks["model"]["spearman"] > 0.5 and tasks["model"]["brier"] < tasks["global mean"]["brier"]
    assert tasks["global mean"]["spearman"] is None and tasks["global mean"]["auc"] == 0.5
    assert set(res.table["predictor"]) == {
        "model",
        "global mean",
        "per-source mean",
        "per-category mean",
        "prompt length",
    }


def _run_history(store, tasks, versions=8, seed=0):
    """A training run's ledger rows: 8-sample groups of random tasks at policy versions 0..versions,
    pass rates drifting up as a trained policy's do."""
    rng = np.random.default_rng(seed)
    base = model_identity(None).name
    rows = []
    for v in range(versions + 1):
        for t in rng.choice(tasks, size=40, replace=False):
            k = int(rng.binomial(8, min(0.95, 0.2 + 0.05 * v)))
            rows.append(
                passrate_row(
                    str(t),
                    model=f"{base}+run1/v{v}",
                    params_hash="ph0",
                    verifier_key="math@1",
                    n=8,
                    n_correct=k,
                    n_error=0,
                    run_id="run1",
                )
            )
    store.upsert("passrates", rows)


def test_later_policy_versions_are_scored_and_everything_is_stored(arith_store, tmp_path):
    store = arith_store
    _run_history(store, store.read("tasks")["task_id"].to_list())
    res = backtest_store(store, PredictConfig(**FAST))
    windows = [s for s in res.splits if s.startswith("versions")]
    assert windows == [
        "versions 1-2 (k=1-2)",
        "versions 3-4 (k=3-4)",
        "versions 5-6 (k=5-6)",
        "versions 7-8 (k=7-8)",
    ]
    for w in windows:
        assert set(res.splits[w]) == {"fit@v0", f"live@v{int(w.split()[1].split('-')[0]) - 1}"}
    # pass rates drift up: the stale fit's bias grows with the versions since its cutoff
    bias = [res.splits[w]["fit@v0"]["bias"] for w in windows]
    assert bias[-1] > bias[0] > -0.2
    run = store.sql(
        "SELECT kind, status, summary FROM runs WHERE run_id = $1", params=[res.run_id]
    ).fetchall()
    assert run[0][:2] == ("predict-backtest", "done")
    summary = json.loads(run[0][2])
    assert summary["splits"]["tasks"]["model"]["reliability"] and summary["run"] == "run1"
    names = {
        n for (n,) in store.sql("SELECT name FROM metrics WHERE run_id = $1", params=[res.run_id]).fetchall()
    }
    assert "backtest/tasks/model/spearman" in names and "backtest/versions_7-8_k=7-8_/fit@v0/brier" in names
    # the report page draws the newest backtest
    from rldata.predict.page import add_to_report

    page = tmp_path / "r.html"
    page.write_text("<html><body><h1>x</h1></body></html>")
    add_to_report(page, store, tmp_path)
    text = page.read_text()
    assert '<section id="predict">' in text and "data:image/png;base64," in text and res.run_id in text
    assert (tmp_path / "predict_backtest.png").stat().st_size > 1000


def test_the_cli_prints_the_backtest_table(arith_store, capsys):
    from rldata.cli import main

    assert (
        main(
            [
                "--store",
                str(arith_store.root),
                "predict",
                "--backtest",
                "--features",
                "text,meta",
                "--format",
                "csv",
                "--dry-run",
            ]
        )
        == 0
    )
    df = pl.read_csv(capsys.readouterr().out.encode())
    assert df.columns == list(bt.TABLE_COLUMNS) and df.height == 5
    assert arith_store.count("runs") == 0  # a dry run records nothing


def test_too_few_tasks_is_one_line(store):
    from tests.predict.conftest import add_ledger, add_tasks

    add_ledger(store, add_tasks(store, 3))
    with pytest.raises(Exception, match="too few tasks to backtest") as e:
        backtest_store(store, PredictConfig(**FAST, dry_run=True))
    assert "\n" not in str(e.value)
