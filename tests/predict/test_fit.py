"""rldata predict on a real store: predictions written, reproducible for a seed and cutoff, reused, seen
and unseen tasks layered, and bad input refused in one line."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from rldata.engine.core import model_identity
from rldata.errors import RldataError
from rldata.ledger.core import passrate_row
from rldata.predict import PredictConfig, predict_store
from tests.predict.conftest import KEY, add_ledger, add_tasks

FAST = {"features": "text,meta"}  # the policy's prefill is tested in test_features.py


def test_predictions_are_written_with_their_cutoff(arith_store):
    store = arith_store
    new = add_tasks(store, 60, split="heldout", prefix="u")  # no ledger rows: unseen
    res = predict_store(store, PredictConfig(**FAST))
    assert not res.reused and res.tasks == 300 and res.seen == 240 and res.unseen == 60
    rows = store.read("predictions")
    assert rows.height == 300 and rows["fit_id"].unique().to_list() == [res.fit_id]
    assert rows["store_version"].unique().to_list() == [store.version("passrates")]
    assert rows["policy_version"].unique().to_list() == [0]
    assert rows["model"].unique().to_list() == [model_identity(None).name]
    ok = rows.filter(
        (pl.col("p_low") <= pl.col("p_mean"))
        & (pl.col("p_mean") <= pl.col("p_high"))
        & ((pl.col("alpha") / (pl.col("alpha") + pl.col("beta")) - pl.col("p_mean")).abs() < 1e-12)
    )
    assert ok.height == 300
    unseen = rows.filter(pl.col("task_id").str.starts_with("u"))
    assert set(unseen["predictor"]) == {"prior"} and (unseen["n_seen"] == 0).all()
    assert (unseen["alpha"] == unseen["prior_alpha"]).all()
    # a seen task: its prior (out-of-fold) plus its 16 samples
    seen = rows.filter(pl.col("task_id").str.starts_with("t"))
    assert set(seen["predictor"]) == {"live"} and (seen["n_seen"] == 16).all()
    assert np.allclose(seen["alpha"] + seen["beta"], seen["prior_alpha"] + seen["prior_beta"] + 16)
    # the unseen tasks' means follow their level's pass rate
    levels = [int(t["metadata"].split('"level": ')[1][0]) for t in new]
    by_id = dict(zip(unseen["task_id"], unseen["p_mean"]))
    rho = stats.spearmanr([by_id[t["task_id"]] for t in new], [-lv for lv in levels]).statistic
    assert rho > 0.6


def test_same_seed_and_cutoff_give_the_same_predictions_and_reuse_them(arith_store):
    store = arith_store
    a = predict_store(store, PredictConfig(**FAST, dry_run=True))
    b = predict_store(store, PredictConfig(**FAST, refit=True))
    assert a.fit_id == b.fit_id and not b.reused
    assert a.rows.drop("params").equals(b.rows.drop("params"))
    c = predict_store(store, PredictConfig(**FAST))
    assert (
        c.reused
        and c.fit_id == b.fit_id
        and c.rows.select("task_id", "p_mean").equals(b.rows.select("task_id", "p_mean"))
    )
    # another seed is another fit; new samples move the cutoff, so nothing is reused past them
    assert predict_store(store, PredictConfig(**FAST, seed=1, dry_run=True)).fit_id != a.fit_id
    store.upsert(
        "passrates",
        [passrate_row("t0000", model=model_identity(None).name, **KEY, n=32, n_correct=3, n_error=0)],
    )
    d = predict_store(store, PredictConfig(**FAST))
    assert not d.reused and d.fit_id != a.fit_id and d.store_version > a.store_version
    assert store.read("predictions")["fit_id"].n_unique() == 2


def test_where_selects_the_tasks_predicted(arith_store):
    res = predict_store(arith_store, PredictConfig(**FAST, where="category LIKE 'add/%'", dry_run=True))
    cats = arith_store.sql("SELECT count(*) FROM tasks WHERE category LIKE 'add/%'").fetchall()[0][0]
    assert res.tasks == cats > 0 and arith_store.count("predictions") == 0  # dry run writes nothing


def test_no_rows_to_fit_on_is_one_line(store):
    add_tasks(store, 20)
    with pytest.raises(RldataError, match="no rows to fit on") as e:
        predict_store(store, PredictConfig(**FAST))
    assert "\n" not in str(e.value)


def test_one_class_only_is_one_line(store):
    tasks = add_tasks(store, 30)
    name = model_identity(None).name
    store.upsert(
        "passrates",
        [passrate_row(t["task_id"], model=name, **KEY, n=8, n_correct=0, n_error=0) for t in tasks],
    )
    with pytest.raises(
        RldataError, match="one class only: every one of the 240 samples of 30 tasks failed"
    ) as e:
        predict_store(store, PredictConfig(**FAST))
    assert "\n" not in str(e.value)


def test_several_slices_must_be_named(arith_store):
    tasks = arith_store.sql("SELECT task_id, metadata FROM tasks").pl().to_dicts()
    name = model_identity(None).name
    arith_store.upsert(
        "passrates",
        [
            passrate_row(
                t["task_id"],
                model=name,
                params_hash="ph1",
                verifier_key="math@1",
                n=4,
                n_correct=1,
                n_error=0,
            )
            for t in tasks[:5]
        ],
    )
    with pytest.raises(RldataError, match="several params_hash"):
        predict_store(arith_store, PredictConfig(**FAST, dry_run=True))
    assert predict_store(arith_store, PredictConfig(**FAST, params_hash="ph0", dry_run=True)).seen == 240


def test_the_cli_prints_predictions_and_errors_in_one_line(arith_store, capsys):
    from rldata.cli import main

    root = str(arith_store.root)
    assert main(["--store", root, "predict", "--features", "text,meta", "--format", "csv"]) == 0
    out = capsys.readouterr()
    df = pl.read_csv(out.out.encode())
    assert (
        df.columns[:6] == ["task_id", "model", "predictor", "p_mean", "p_low", "p_high"] and df.height == 240
    )
    assert "prior strength" in out.err
    assert main(["--store", root, "predict", "--features", "text,smell"]) == 1
    assert main(["--store", root, "predict", "--version", "3"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(e.startswith("rldata: error: ") for e in err)
    assert "unknown family 'smell'" in err[0] and "--run" in err[1]


def test_seen_tasks_of_another_slice_keep_their_own_evidence(store):
    tasks = add_tasks(store, 120)
    add_ledger(store, tasks, n=2, seed=3)  # few samples: the prior still matters
    res = predict_store(store, PredictConfig(**FAST, dry_run=True))
    r = res.rows
    assert (r["n_seen"] == 2).all()
    assert np.allclose(r["alpha"] - r["prior_alpha"] + r["beta"] - r["prior_beta"], 2.0)
