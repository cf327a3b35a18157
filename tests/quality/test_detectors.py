"""The contamination detectors on real text: bundled GSM8K test problems planted, edited, among
GSM8K train problems; each detector scores the copies and leaves the clean tasks alone."""

from __future__ import annotations

import polars as pl
import pytest

from rldata.quality.config import DecontaminateConfig
from rldata.quality.detectors import EvalIndex, detect
from tests.quality.helpers import GSM8K_TRAIN, gsm8k

TEST = [r["question"] for r in gsm8k()][:60]
TRAIN = [r["question"] for r in gsm8k(GSM8K_TRAIN)]
EDITS = {
    "verbatim": lambda q: q,
    "prefix": lambda q: "Solve the following problem. " + q,
    "suffix": lambda q: q + " Put your final answer within \\boxed{}.",
    "whitespace": lambda q: "  " + q.replace(" ", "\n ", 3) + "\t",
    "dollars": lambda q: q.replace("$", ""),
    "latex": lambda q: q.replace("$", "\\$").replace(" 1/2 ", " \\dfrac{1}{2} "),
}


def _tasks(planted: list[str]) -> pl.DataFrame:
    prompts = TRAIN + planted
    ids = [f"clean{i}" for i in range(len(TRAIN))] + [f"copy{i}" for i in range(len(planted))]
    return pl.DataFrame({"task_id": ids, "prompt": prompts, "domain": ["math"] * len(prompts)})


@pytest.fixture(scope="module")
def found():
    planted = [EDITS[k](q) for q in TEST for k in EDITS]
    return detect(_tasks(planted), EvalIndex(pl.Series(TEST), DecontaminateConfig())), planted


@pytest.mark.parametrize("method", ["ngram", "coverage", "minhash"])
def test_each_detector_finds_every_edited_copy_and_no_clean_task(found, method):
    rows, planted = found
    hits = rows.filter(pl.col("method") == method)
    copies = hits.filter(pl.col("task_id").str.starts_with("copy"))
    # every copy, matched to the eval item it was made from
    assert copies.select("task_id", "eval_idx").unique().height == len(planted)
    want = {(f"copy{i}", i // len(EDITS)) for i in range(len(planted))}
    assert set(copies.select("task_id", "eval_idx").iter_rows()) == want
    assert copies["score"].min() >= copies["threshold"][0]
    assert hits.filter(pl.col("task_id").str.starts_with("clean")).height == 0


def test_a_copy_scores_its_share_and_its_span_is_the_matched_text(found):
    rows, _ = found
    r = rows.filter((pl.col("task_id") == "copy1") & (pl.col("method") == "ngram")).row(0, named=True)
    assert r["score"] == 1.0 and r["threshold"] == 0.5  # prefix copy: all of the item's 8-grams
    assert r["span"].startswith("janet s ducks lay 16 eggs per day")
    assert "solve the following" not in r["span"]


def test_half_a_problem_scores_about_half_and_is_not_flagged_at_the_default():
    words = TEST[1].split()
    half = " ".join(words[: len(words) // 2]) + " and then something else entirely happens here."
    out = detect(
        _tasks([half])[-1:],
        EvalIndex(pl.Series(TEST), DecontaminateConfig(methods=("ngram",), ngram_share=0.0)),
    )
    (score,) = out.filter(pl.col("eval_idx") == 1)["score"].to_list()
    assert 0.2 < score < 0.6
    assert (
        detect(
            _tasks([half])[-1:], EvalIndex(pl.Series(TEST), DecontaminateConfig(methods=("ngram",)))
        ).height
        == 0
    )


def test_any_shared_8gram_open_r1s_rule_flags_clean_tasks_that_share_a_phrase():
    every = pl.Series([r["question"] for r in gsm8k()])  # all 200 bundled test problems
    out = detect(_tasks([]), EvalIndex(every, DecontaminateConfig(methods=("ngram",), ngram_share=0.0)))
    # share 0: one common 8-gram is enough, and some clean train problems share one
    # (". how much money will she have left"), each a small share of its eval item
    assert out.height >= 2 and (out["score"] < 0.1).all()
    assert any("how much money" in s for s in out["span"].to_list())
    assert detect(_tasks([]), EvalIndex(every, DecontaminateConfig(methods=("ngram",)))).height == 0


def test_a_short_eval_item_matches_only_its_whole_text():
    items = pl.Series(["What is 17*23?", "Compute 9*3."])
    tasks = pl.DataFrame(
        {
            "task_id": ["in", "whole", "other_op", "longer_number"],
            "prompt": [
                "Quick: what is 17 * 23 ? Show work.",
                "What is 17*23?",
                "What is 17+23?",
                "What is 17*234?",
            ],
            "domain": ["math"] * 4,
        }
    )
    out = detect(tasks, EvalIndex(items, DecontaminateConfig(methods=("ngram",))))
    assert sorted(out["task_id"].to_list()) == ["in", "whole"]
    assert set(out["score"].to_list()) == {1.0}


def test_code_tasks_match_on_13_grams():
    item = "def add(a, b): return the sum of a and b as an integer value please"
    near = "def add(a, b): return the sum of a and b as an integer value always"
    tasks = pl.DataFrame({"task_id": ["math", "code"], "prompt": [near, near], "domain": ["math", "code"]})
    out = detect(
        tasks, EvalIndex(pl.Series([item]), DecontaminateConfig(methods=("ngram",), ngram_share=0.9))
    )
    # 8-grams: the math task shares 16 of the item's 17; 13-grams: 4 of 5 (0.8 < 0.9)
    assert out["task_id"].to_list() == ["math"]


def test_no_task_or_no_item_is_no_match():
    empty = pl.DataFrame(schema={"task_id": pl.String, "prompt": pl.String, "domain": pl.String})
    assert detect(empty, EvalIndex(pl.Series(TEST[:3]), DecontaminateConfig())).height == 0
    tasks = _tasks([])[:5]
    assert detect(tasks, EvalIndex(pl.Series([], dtype=pl.String), DecontaminateConfig())).height == 0
