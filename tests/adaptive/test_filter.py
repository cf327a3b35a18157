"""rldata filter over ledger rows written by adaptive sampling, in a real Delta store."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from rldata.adaptive.filter import early_stop_expr
from rldata.adaptive.rules import AdaptiveSpec, decide, ledger_columns
from rldata.errors import RldataError
from rldata.ledger.core import passrate_row
from rldata.ledger.select import Band, filter_store, read_selection, selection_params, selection_rules

BAND = Band(0.1, 0.9)
KEY = {"model": "m", "params_hash": "p", "verifier_key": "math@1"}


def _row(task, k, w, e, spec, n_max=16):
    """A ledger row as the sample job writes it when the task stopped after k + w + e draws."""
    d = decide(
        spec.rule, n_drawn=k + w + e, n_correct=k, n_error=e, n_max=n_max, band=spec.band, alpha=spec.alpha
    )
    return passrate_row(task, **KEY, n=k + w, n_correct=k, n_error=e, **ledger_columns(spec, d, n_max=n_max))


EXACT = AdaptiveSpec("exact", None, 4, BAND)
SEQ = AdaptiveSpec("sequential", 0.05, 4, BAND)


def test_early_stopped_rows_are_decided_by_their_rule(store):
    rows = [
        _row("ex_keep", 2, 6, 0, EXACT),  # 8 drawn, settled keep
        _row("ex_drop", 0, 15, 0, EXACT),  # 15 drawn, settled drop
        _row("ex_full", 1, 15, 0, EXACT),  # reached N: counted as fixed
        _row("seq_keep", 2, 2, 0, SEQ),  # 4 drawn: keep at level 0.05
        _row("seq_drop", 0, 12, 0, SEQ),  # 12 drawn: too_hard at level 0.05
        _row("seq_easy", 12, 0, 0, SEQ),  # 12 drawn: too_easy at level 0.05
        passrate_row("fixed", **KEY, n=16, n_correct=8, n_error=0, n_max=16),
        passrate_row("legacy", **KEY, n=16, n_correct=1, n_error=0),  # no n_max (before adaptive N)
        passrate_row("short", **KEY, n=4, n_correct=2, n_error=0),  # a fixed row with 4 of 16: insufficient
    ]
    for r in rows[:6]:
        assert r["stop_rule"] in ("exact", "sequential") and r["n_max"] == 16 and r["band"] == "0.1,0.9"
        assert r["confidence"] is not None
    store.upsert("passrates", rows)
    res, _ = filter_store(store, name="ad", band=BAND)
    got = {r["task_id"]: r["reason"] for r in read_selection(store, "ad").to_dicts()}
    assert got == {
        "ex_keep": "in_band",
        "ex_drop": "too_hard",
        "ex_full": "too_hard",
        "seq_keep": "in_band",
        "seq_drop": "too_hard",
        "seq_easy": "too_easy",
        "fixed": "in_band",
        "legacy": "too_hard",
        "short": "insufficient_samples",
    }
    assert res.min_n == 16  # adaptive rows count as their N, not their 4..15 draws
    assert res.decided_by == {"exact": 2, "fixed": 4, "sequential": 3}
    params = selection_params(store, "ad")
    assert params["decided_by"] == {"exact": 2, "fixed": 4, "sequential": 3}
    assert res.warnings == ()
    by_rule = dict(selection_rules(store, "ad").select("task_id", "decided_by").iter_rows())
    assert by_rule["ex_keep"] == "exact" and by_rule["seq_keep"] == "sequential"
    assert by_rule["ex_full"] == "fixed" and by_rule["legacy"] == "fixed"
    sel = read_selection(store, "ad")
    assert (
        sel.filter(pl.col("task_id") == "seq_keep")["pass_rate"][0] == 0.5
        and sel.filter(pl.col("task_id") == "seq_keep")["n"][0] == 4
    )


def test_without_the_fix_early_rows_would_be_insufficient(store):
    """The bug this guards: plain count rules call a 4-of-16 row insufficient_samples."""
    from rldata.ledger.select import decide as count_decide

    r = _row("seq_keep", 2, 2, 0, SEQ)
    plain = count_decide(pl.DataFrame({"n": [4], "n_correct": [2], "n_error": [0]}), BAND, min_n=16)
    assert plain["reason"][0] == "insufficient_samples"
    store.upsert("passrates", [r, passrate_row("f", **KEY, n=16, n_correct=8, n_error=0)])
    res, _ = filter_store(store, name="s", band=BAND)
    assert res.counts["in_band"] == 2 and res.counts["insufficient_samples"] == 0


def test_errors_in_an_early_stopped_exact_row(store):
    # 2 right, 6 wrong, 1 error: 8 verified, so all-errors-from-now-on still leaves 8 >= 16/2
    r = _row("e", 2, 6, 1, EXACT)
    assert r["n"] == 8 and r["n_error"] == 1 and r["confidence"] == 1.0
    store.upsert("passrates", [r])
    res, _ = filter_store(store, name="s", band=BAND)
    assert res.counts["in_band"] == 1


def test_another_band_is_re_decided_and_warned_about(store):
    rows = [_row("a", 2, 6, 0, EXACT), _row("b", 4, 4, 0, EXACT), _row("c", 2, 2, 0, SEQ)]
    store.upsert("passrates", rows)
    res, _ = filter_store(store, name="s", band=Band(0.25, 0.75))
    got = {r["task_id"]: r["reason"] for r in read_selection(store, "s").to_dicts()}
    # a: 2/8 could still end anywhere from 2/16 (too_hard) to 10/16: not settled for [0.25, 0.75]
    assert got["a"] == "insufficient_samples"
    # b: 4 right, 4 wrong: [4, 12] of 16 whatever comes, inside [0.25, 0.75] -> still exact
    assert got["b"] == "in_band"
    assert got["c"] == "insufficient_samples"  # 2/4 is no level-0.05 answer for the narrower band
    assert any("sampled adaptively for band 0.1,0.9, not the filter's 0.25,0.75" in w for w in res.warnings)
    assert any("not settled" in w for w in res.warnings)


def test_filter_matches_fixed_n_on_simulated_exact_rows(store):
    """End to end: the same samples, written once as fixed-N rows and once as exact early stops,
    give identical selections."""
    rng = np.random.default_rng(5)
    fixed_rows, exact_rows = [], []
    for i in range(300):
        p = rng.choice([0.0, 0.05, 0.1, 0.3, 0.5, 0.9, 0.95, 1.0])
        out = np.where(rng.random(16) < 0.03, "e", np.where(rng.random(16) < p, "c", "w"))
        fixed_rows.append(
            passrate_row(
                f"t{i}",
                **KEY,
                n=int((out != "e").sum()),
                n_correct=int((out == "c").sum()),
                n_error=int((out == "e").sum()),
                n_max=16,
            )
        )
        drawn = 0
        while True:
            drawn = min(drawn + 4, 16)
            k, e = int((out[:drawn] == "c").sum()), int((out[:drawn] == "e").sum())
            d = decide("exact", n_drawn=drawn, n_correct=k, n_error=e, n_max=16, band=BAND)
            if d.settled:
                break
        exact_rows.append(
            passrate_row(
                f"t{i}",
                **{**KEY, "params_hash": "q"},
                n=drawn - e,
                n_correct=k,
                n_error=e,
                **ledger_columns(EXACT, d, n_max=16),
            )
        )
    store.upsert("passrates", fixed_rows + exact_rows)
    _, a = filter_store(store, name="fixed", band=BAND, params_hash="p")
    res, b = filter_store(store, name="exact", band=BAND, params_hash="q")
    assert a.sort("task_id")["decision"].to_list() == b.sort("task_id")["decision"].to_list()
    assert res.decided_by.get("exact", 0) > 50  # most rows really stopped early


def test_passrates_flags_early_stops(store):
    store.upsert(
        "passrates",
        [
            _row("a", 2, 2, 0, SEQ),
            passrate_row("b", **KEY, n=16, n_correct=3, n_error=0),
            _row("c", 1, 15, 0, EXACT),
        ],
    )
    df = store.scan("passrates").collect().with_columns(early_stop_expr().alias("early_stop"))
    assert dict(df.select("task_id", "early_stop").iter_rows()) == {"a": True, "b": False, "c": False}


def test_passrates_cli_has_an_early_stop_column(store, capsys):
    from rldata.cli import main

    store.upsert(
        "passrates", [_row("a", 2, 2, 0, SEQ), passrate_row("b", **KEY, n=16, n_correct=3, n_error=0)]
    )
    assert main(["--store", str(store.root), "passrates", "-f", "json"]) == 0
    rows = {r["task_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["a"]["early_stop"] is True and rows["a"]["stop_rule"] == "sequential"
    assert rows["b"]["early_stop"] is False


def test_an_unreadable_band_is_one_error_line(store):
    r = {**_row("a", 2, 2, 0, SEQ), "band": "wide"}
    store.upsert("passrates", [r])
    with pytest.raises(RldataError, match="unreadable band 'wide'"):
        filter_store(store, name="s", band=BAND)


def test_stratify_warns_about_optional_stopping_bias(store, tmp_path):
    from rldata.ledger.select import stratify_store

    store.upsert(
        "passrates", [_row("a", 2, 2, 0, SEQ), passrate_row("b", **KEY, n=16, n_correct=8, n_error=0)]
    )
    filter_store(store, name="s", band=BAND)
    res = stratify_store(store, selection="s", quantiles=1, out=tmp_path / "b.yaml")
    assert any("sampled adaptively (sequential)" in w for w in res.warnings)
    store.upsert("passrates", [passrate_row("a", **KEY, n=16, n_correct=8, n_error=0)])
    filter_store(store, name="s", band=BAND)
    res = stratify_store(store, selection="s", quantiles=1, out=tmp_path / "b.yaml")
    assert not any("adaptively" in w for w in res.warnings)


@pytest.mark.parametrize("alpha", [None, 0.7])
def test_a_sequential_row_without_a_valid_alpha_is_one_error_line(store, alpha):
    store.upsert("passrates", [{**_row("a", 2, 2, 0, SEQ), "alpha": alpha}])
    before = store.version("selections")
    with pytest.raises(RldataError, match="sequential row\\(s\\) \\(first task 'a'\\) have alpha"):
        filter_store(store, name="s", band=BAND)
    assert store.version("selections") == before  # nothing written
