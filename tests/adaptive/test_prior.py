"""The sequential rule with each task's predicted prior (rldata.adaptive.prior): the rule tables it
uses, how early it stops, and how rldata filter re-decides its ledger rows from the stored prior."""

from __future__ import annotations

import polars as pl
import pytest

from rldata.adaptive.prior import PREDICTED, decide_with_priors, quantize, stored_priors
from rldata.adaptive.rules import PRIOR, AdaptiveSpec, Decision, decide_frame, ledger_columns
from rldata.errors import RldataError
from rldata.ledger.core import passrate_row
from rldata.ledger.select import filter_store
from rldata.stats import Band

BAND = Band(0.1, 0.9)
SEQ = AdaptiveSpec("sequential", 0.05, 4, BAND)
KEY = {"model": "m", "params_hash": "p", "verifier_key": "math@1"}
HARD, EASY, MID = quantize(0.2, 20.0), quantize(20.0, 0.2), quantize(2.0, 2.0)


def _counts(rows):
    return pl.DataFrame(rows, schema=["task_id", "n", "n_correct", "n_error"], orient="row")


def test_quantize_rounds_on_a_log_grid():
    a, b = quantize(1.0, 3.0)
    assert a == 1.0 and b == pytest.approx(3.0, rel=0.05)
    assert quantize(0.201, 20.0) == quantize(0.2, 20.0)  # close priors share a table
    assert quantize(*quantize(0.7, 5.5)) == quantize(0.7, 5.5)  # idempotent
    with pytest.raises(RldataError, match="a > 0 and b > 0"):
        quantize(0.0, 1.0)


def test_each_row_is_decided_under_its_own_prior():
    df = _counts([("h", 1, 0, 0), ("e", 1, 1, 0), ("m", 1, 0, 0), ("j", 1, 0, 0)])
    spec = AdaptiveSpec("sequential", 0.05, 4, BAND, priors={"h": HARD, "e": EASY, "m": MID})
    got = decide_frame(df, spec, n_max=16)  # decide_frame hands a spec with priors to decide_with_priors
    assert got["task_id"].to_list() == ["h", "e", "m", "j"]  # order kept
    for t, prior in (("h", HARD), ("e", EASY), ("m", MID), ("j", None)):
        alone = decide_frame(
            df.filter(pl.col("task_id") == t),
            SEQ,
            n_max=16,
            prior=PRIOR if prior is None else (prior, PRIOR[1]),
        )
        assert (
            got.filter(pl.col("task_id") == t).drop("task_id").to_dicts() == alone.drop("task_id").to_dicts()
        )
    by = dict(zip(got["task_id"], got["decision"]))
    # one failure settles a task predicted very hard, one success one predicted very easy; the same
    # draw under Jeffreys (j) or a middling prior settles nothing
    assert by == {"h": "drop", "e": "drop", "m": None, "j": None}
    assert decide_with_priors(df, spec, n_max=16).equals(got)


def test_without_priors_the_rule_is_the_jeffreys_one():
    df = _counts([("a", 3, 1, 0), ("b", 8, 0, 0)])
    assert decide_frame(df, AdaptiveSpec("sequential", 0.05, 4, BAND, priors={}), n_max=16).equals(
        decide_frame(df, SEQ, n_max=16)
    )


def test_ledger_rows_say_predicted():
    spec = AdaptiveSpec("sequential", 0.05, 4, BAND, priors={"h": HARD})
    cols = ledger_columns(spec, Decision(True, "drop", "too_hard", 0.97), n_max=16)
    assert cols["stop_rule"] == PREDICTED and cols["alpha"] == 0.05
    assert (
        ledger_columns(SEQ, Decision(True, "drop", "too_hard", 0.97), n_max=16)["stop_rule"] == "sequential"
    )


def _predicted_row(task, k, w, prior):
    spec = AdaptiveSpec("sequential", 0.05, 4, BAND, priors={task: prior})
    d = decide_frame(_counts([(task, k + w, k, 0)]), spec, n_max=16).row(0, named=True)
    assert d["settled"], "the job stops only settled tasks"
    row = passrate_row(
        task,
        **KEY,
        n=k + w,
        n_correct=k,
        n_error=0,
        run_id="r1",
        **ledger_columns(spec, Decision.from_row(d), n_max=16),
    )
    return row, d["reason"]


def test_filter_re_decides_predicted_rows_with_the_stored_prior(store):
    (h, h_reason), (m, m_reason) = _predicted_row("h", 0, 1, HARD), _predicted_row("m", 3, 3, MID)
    assert h_reason == "too_hard" and m_reason == "in_band"
    store.upsert("passrates", [h, m, passrate_row("f", **KEY, n=16, n_correct=8, n_error=0, n_max=16)])
    store.upsert(
        "sample_predictions",
        [
            {
                "run_id": "r1",
                "task_id": t,
                "decision": "sample",
                "prior_alpha": a,
                "prior_beta": b,
                "fit_id": "x",
                "model": "m",
                "params_hash": "p",
            }
            for t, (a, b) in (("h", HARD), ("m", MID))
        ],
    )
    assert stored_priors(store, pl.DataFrame({"task_id": ["h", "m"], "run_id": ["r1", "r1"]})) == {
        "h": HARD,
        "m": MID,
    }
    res, rows = filter_store(store, name="s", band=BAND)
    got = dict(zip(rows["task_id"], rows["reason"]))
    assert got == {"h": "too_hard", "m": "in_band", "f": "in_band"}
    assert res.decided_by == {"fixed": 1, PREDICTED: 2} and not res.warnings
    # the prior of another run is not this row's: without its own, a predicted row cannot be re-decided
    store.delete("sample_predictions", "task_id = 'm'")
    res, rows = filter_store(store, name="s", band=BAND)
    assert dict(zip(rows["task_id"], rows["reason"]))["m"] == "insufficient_samples"
    assert any("no stored prior" in w for w in res.warnings)
