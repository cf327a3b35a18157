"""``suspect_key``: sampled answers that agree on one value while the key says another, read from the
store's trajectories and verifications, with the majority, its share and the models behind it."""

from __future__ import annotations

import json

import polars as pl

from rldata.quality.suspect_key import canonical_answer, suspect_findings
from tests.quality.helpers import samples, tasks

KW = {"share": 0.6, "min_samples": 8, "max_pass_rate": 0.05}


def _store(store):
    tasks(
        store,
        [
            {"prompt": "9*3=", "answer": "28"},  # wrong key: the models say 27
            {"prompt": "2+2=", "answer": "4"},  # right key, easy
            {"prompt": "7*8=", "answer": "57"},  # wrong key, but the models scatter
            {"prompt": "6*6=", "answer": "37"},  # wrong key, too few samples
            {"prompt": "5+5=", "answer": "11"},  # wrong key, models agree, but some samples pass
        ],
    )
    samples(store, "t0", [("27", False)] * 10 + [("1,000", False)] * 2 + [(None, False)] * 2, model="a@1")
    samples(store, "t0", [("27.0", False)] * 4, model="b@2", first=100)
    samples(store, "t1", [("4", True)] * 14 + [("5", False)] * 2)
    samples(store, "t2", [(str(50 + i % 6), False) for i in range(16)])
    samples(store, "t3", [("36", False)] * 5)
    samples(store, "t4", [("10", False)] * 14 + [("11", True)] * 2)


def test_a_wrong_key_the_models_agree_against_is_found_with_who_agreed(store):
    _store(store)
    out = suspect_findings(store, store.read("tasks").select("task_id", "answer"), **KW)
    assert out["task_id"].to_list() == ["t0"]
    d = json.loads(out["detail"][0])
    assert d["majority"] == "27" and d["key"] == "28" and d["samples"] == 18 and d["pass_rate"] == 0.0
    assert d["share"] == round(14 / 18, 4)  # "27" and "27.0" are one answer; no-answer samples count
    assert [(m["model"], m["samples"], m["policy_versions"]) for m in d["models"]] == [
        ("a@1", 10, [0]),
        ("b@2", 4, [0]),
    ]


def test_the_thresholds_move_the_verdict(store):
    _store(store)
    t = store.read("tasks").select("task_id", "answer")
    assert suspect_findings(store, t, **{**KW, "max_pass_rate": 0.2})["task_id"].to_list() == ["t0", "t4"]
    assert suspect_findings(store, t, **{**KW, "min_samples": 4})["task_id"].to_list() == ["t0", "t3"]
    assert suspect_findings(store, t, **{**KW, "share": 0.9})["task_id"].to_list() == []
    assert suspect_findings(store, t, **KW, model="b@2").height == 0  # 4 samples of b alone: too few
    assert suspect_findings(store, t.filter(pl.col("task_id") != "t0"), **KW).height == 0


def test_answers_are_grouped_by_value():
    assert canonical_answer("$1,000.") == canonical_answer("1000") == "1000"
    assert canonical_answer(" Paris. ") == canonical_answer("paris") == "paris"
    assert (
        canonical_answer("3\x1e4") is None
        and canonical_answer(None) is None
        and canonical_answer(" ") is None
    )
