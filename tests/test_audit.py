"""rldata audit on a real store, scored by real verifiers (math-verify, exact) and stored labels."""

from __future__ import annotations

import json

import pytest

from rldata.audit import audit_store, classify
from rldata.cli import main
from rldata.errors import RldataError

# per trajectory: the label (what a human said) where it differs from what math-verify decides
LABEL_FLIPS = {
    "t0/2": True,
    "t0/3": False,
}  # "no idea" judged right by the label; "so \boxed{7}" judged wrong


def _scored(store):
    from test_verify import ROWS, seed

    from rldata.configs.sampling import VerifyConfig
    from rldata.jobs.verify import VerifyJob, run_verify

    seed(store)
    run_verify(
        store, VerifyJob(run_id="r1", verify=VerifyConfig(timeout_s=2))
    )  # math-verify, the hostile sample times out
    run_verify(store, VerifyJob(run_id="r1", verify=VerifyConfig(verifier="exact")))
    math = dict(store.sql("SELECT traj_id, passed FROM verifications WHERE verifier = 'math'").fetchall())
    labels = []
    for t, (_, cs) in ROWS.items():
        for i in range(len(cs)):
            tid = f"{t}/{i}"
            lab = LABEL_FLIPS.get(tid, bool(math[tid]))  # the timeout's label: wrong
            labels.append(
                {
                    "traj_id": tid,
                    "task_id": t,
                    "verifier": "imported:unit",
                    "verifier_version": "imported",
                    "layer": "reward",
                    "passed": lab,
                    "score": float(lab),
                }
            )
    store.append("verifications", labels)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    import sys
    from pathlib import Path

    from rldata import open_store

    sys.path.insert(0, str(Path(__file__).parent / "jobs"))
    store = open_store(tmp_path_factory.mktemp("audit") / "store")
    _scored(store)
    return store


@pytest.mark.slow  # real math-verify with a real 2 s timeout
def test_audit_against_labels_estimates_fp_and_fn(scored):
    res = audit_store(scored, verifier="math", against="labels")
    assert res.compared == 16 and res.only_verifier == 0 and res.only_against == 0
    overall = res.agreement.filter(res.agreement["scope"] == "all").to_dicts()[0]
    assert (overall["n"], overall["agree"]) == (16, 13)
    assert {r["value"] for r in res.agreement.filter(res.agreement["scope"] == "source").to_dicts()} == {
        "unit"
    }
    counts = dict(res.classes.select("class", "count").iter_rows())
    assert counts == {"timeout": 1, "error": 0, "hedged": 0, "no_answer": 1, "format": 0, "equivalence": 1}
    assert [e["traj_id"] for e in res.examples["no_answer"]] == ["t0/2"]
    assert [e["traj_id"] for e in res.examples["timeout"]] == ["t1/1"]
    r = res.rates
    assert (r["tp"], r["fp"], r["fn"], r["tn"]) == (7, 1, 1, 7)  # the timeout counts as a fail
    assert r["fp_rate"] == pytest.approx(1 / 8) and r["fn_rate"] == pytest.approx(1 / 8)
    assert r["fp_rate_ci"][0] < 1 / 8 < r["fp_rate_ci"][1]


@pytest.mark.slow
def test_audit_of_two_verifiers_and_its_cli_outputs(scored, tmp_path, capsys):
    res = audit_store(scored, verifier="exact", against="math")
    counts = dict(res.classes.select("class", "count").iter_rows())
    assert counts["timeout"] == 1 and res.rates is None  # no labels: no FP/FN estimate
    assert res.compared == 16 and sum(counts.values()) == 16 - res.agreement["agree"][0]

    root = str(scored.root)
    assert main(["--store", root, "audit", "--verifier", "math", "--against", "labels", "-f", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rates"]["fp"] == 1 and {c["class"] for c in out["classes"]} >= {"timeout", "equivalence"}
    assert main(["--store", root, "audit", "--verifier", "math", "--against", "labels"]) == 0
    text = capsys.readouterr().out
    assert "agreement" in text and "fp rate: 0.125" in text
    assert main(["--store", root, "audit", "--verifier", "nope", "--against", "labels"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rldata: error: no verifications from 'nope'") and err.count("\n") == 1

    # a section of rldata report
    assert (
        main(
            [
                "--store",
                root,
                "filter",
                "--band",
                "0.1,0.9",
                "--name",
                "s",
                "--verifier-version",
                f"math@{_math_version()}",
            ]
        )
        == 0
    )
    assert main(["--store", root, "report", "-o", str(tmp_path / "rep"), "--audit-verifier", "math"]) == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    assert 'id="audit"' in page and "fp rate 0.125" in page


def _math_version():
    from rldata.verify.math import MathVerifier

    return MathVerifier.version


def test_classify_reads_what_exists():
    base = {
        "passed": False,
        "extracted": "5",
        "error": None,
        "details": None,
        "answer": "5",
        "completion": "x",
    }
    assert (
        classify({**base, "passed": None, "error": "timeout after 2s"}, {**base, "passed": True}) == "timeout"
    )
    assert classify({**base, "passed": None, "error": "ValueError: x"}, {**base, "passed": True}) == "error"
    hedged = {**base, "details": ['{"reason": "hedged"}', "not json"]}
    assert classify(hedged, {**base, "passed": True}) == "hedged"
    assert classify({**base, "extracted": None}, {**base, "passed": True}) == "no_answer"
    assert classify({**base, "extracted": "6"}, {**base, "passed": True}) == "format"
    assert classify({**base, "extracted": "\\boxed{5}"}, {**base, "passed": True}) == "equivalence"
    # against a label (no extraction on that side)
    assert classify({**base, "extracted": None}, None) == "no_answer"
    assert classify({**base, "extracted": "6", "completion": "so it is 5"}, None) == "format"
    assert classify({**base, "passed": True, "extracted": "5"}, None) == "equivalence"


def test_audit_errors(store):
    with pytest.raises(RldataError, match="no verifications from 'math'"):
        audit_store(store, verifier="math", against="labels")
    with pytest.raises(RldataError, match="labels go in against"):
        audit_store(store, verifier="labels", against="math")


def test_audit_of_imported_rollouts_against_their_own_rewards(store, tmp_path):
    # the labels use case end to end: import another trainer's dump (rewards kept as labels),
    # re-score it with rldata's math verifier, audit the verifier against the labels
    from rldata.configs.sampling import VerifyConfig
    from rldata.interop import ImportConfig, import_rollouts
    from rldata.jobs.verify import VerifyJob, run_verify

    recs = [
        ("What is 6*7?", "42", r"so \boxed{42}", 1.0),
        ("What is 6*7?", "42", r"\boxed{41}", 0.0),
        ("Half of 1?", "1/2", r"\boxed{0.5}", 0.0),  # the other trainer's reward missed an equivalence
        ("Half of 1?", "1/2", "I am not sure", 0.0),
    ]
    dump = tmp_path / "dump.jsonl"
    dump.write_text(
        "".join(
            json.dumps({"prompt": p, "answer": a, "completion": c, "score": s}) + "\n" for p, a, c, s in recs
        )
    )
    res = import_rollouts(store, ImportConfig(format="jsonl", run_id="imp", path=dump))
    assert res.trajectories_added == 4
    v = run_verify(store, VerifyJob(run_id="imp", verify=VerifyConfig(timeout_s=5)))
    assert v.verified == 4 and v.no_answer == 1
    audit = audit_store(store, verifier="math", against="labels", run_id="imp")
    assert audit.compared == 4 and audit.agreement["agree"][0] == 3
    assert dict(audit.classes.select("class", "count").iter_rows())["equivalence"] == 1
    assert audit.rates["fp"] == 1 and audit.rates["fn"] == 0  # against these labels, 0.5 = 1/2 reads as an FP
