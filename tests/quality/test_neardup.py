"""``rldata dedup --near``: MinHash clusters of near-duplicates on real text, one task kept per
cluster by the stated rule (source priority, then the oldest), the rest flagged or dropped."""

from __future__ import annotations

import datetime as dt

import polars as pl

from rldata import open_store
from rldata.quality.neardup import clusters
from tests.quality.helpers import gsm8k, tasks
from tests.reliability.helpers import one_error_line, run

Q = [r["question"] for r in gsm8k()[:12]]


def test_rewordings_cluster_and_other_problems_or_other_numbers_do_not():
    prompts = pl.Series(
        [
            Q[0],
            "Problem: " + Q[0] + "  Give the number only.",  # the same problem with a prefix and suffix
            Q[0].replace("16", "17"),  # another number: another problem
            *Q[1:6],
            "9+8+7=",
            "8+8+7=",  # other numbers: not one problem, though most bigrams are shared
        ]
    )
    labels, sims = clusters(prompts, jaccard=0.8)
    assert labels[0] == labels[1] and len(set(labels.tolist())) == len(prompts) - 1
    assert 0.8 <= sims[(0, 1)] < 1.0


def test_dedup_keeps_one_per_cluster_by_source_priority_then_age(tmp_path, capsys):
    store = open_store(tmp_path / "s")
    old = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    tasks(
        store,
        [
            {"prompt": Q[0], "answer": "18", "source": "web", "created_at": old},
            {"prompt": "Question: " + Q[0], "answer": "18", "source": "curated"},
            {"prompt": Q[0] + "\nAnswer:", "answer": "18", "source": "web"},
            {"prompt": Q[1], "answer": "3", "source": "web", "created_at": old},
            {"prompt": Q[1] + " Show your work.", "answer": "3", "source": "web"},
            {"prompt": Q[2], "answer": "70000", "source": "web"},
        ],
    )
    root = str(tmp_path / "s")
    code, _, err = run(capsys, "--store", root, "dedup", "--near", "--source-priority", "curated")
    assert code == 0 and "2 cluster(s) among 6 tasks, 3 near-duplicate(s) flagged" in err, err
    rows = store.read("near_duplicates").sort("task_id")
    kept = set(rows.filter(pl.col("keep"))["task_id"])
    assert kept == {"t1", "t3"}  # curated first; then the oldest of the web copies
    assert set(rows.filter(~pl.col("keep"))["task_id"]) == {"t0", "t2", "t4"}
    assert dict(rows.select("task_id", "cluster_id").iter_rows()) == {
        "t0": "t1",
        "t1": "t1",
        "t2": "t1",
        "t3": "t3",
        "t4": "t3",
    }
    v = store.version("near_duplicates")
    assert run(capsys, "--store", root, "dedup", "--near", "--source-priority", "curated")[0] == 0
    assert store.version("near_duplicates") == v  # a rerun writes nothing
    code, _, err = run(capsys, "--store", root, "dedup", "--near", "--action", "drop")
    assert code == 0 and "near-duplicate(s) dropped" in err
    assert sorted(store.read("tasks")["task_id"]) == ["t0", "t3", "t5"]  # no priority: the oldest stays


def test_dedup_without_near_is_refused(tmp_path, capsys):
    open_store(tmp_path / "s")
    code, _, err = run(capsys, "--store", str(tmp_path / "s"), "dedup")
    assert code == 1 and "--near" in one_error_line(err)
