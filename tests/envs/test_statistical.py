"""OpenEnv RFC 008's statistical checks of a learnability profile, their numbers worked out by hand on
a small real store (trajectories, verifications, the ledger rows `rldata filter` reads), the policy's
ids, severities and bounds against the installed `openenv` package, the verdict against OpenEnv's own
`apply_policy`, and the two files a publisher ships (the card section and the taskset metadata)."""

from __future__ import annotations

import datetime as dt
import json
import math

import pytest

from rldata.envs.publish import METADATA_SCHEMA, card_section, openenv_results, taskset_metadata
from rldata.envs.statistical import (
    BOUNDS,
    POLICY_VERSION,
    SEVERITY,
    Evidence,
    mixed_group_share,
    run_checks,
    verdict,
)
from rldata.jobs.profile import _evidence, _measure, check_rows, ledger_rows, stored_checks
from rldata.ledger.core import passrate_row, recompute_passrates
from rldata.rollout.bind import env_binding
from rldata.runs.core import record_run

T0 = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
M, PH, VK = "m@1", "ph", "math@1"
# task -> its samples: (completion, extracted, passed); None passed = a verifier error
SAMPLES = {
    "t1": [("", None, False), ("", None, False), ("x", "x", False), ("y", "y", False)],  # 0/4
    "t2": [
        ("a", "a", True),
        ("b", "b", True),
        ("c", None, False),
        ("d", "d", False),
        ("e", "e", None),
    ],  # 2/4
    "t3": [("5", "5", True)] * 4,  # 4/4, one input four times
    "t4": [("42", "42", True), ("42", "42", False), ("7", "7", False), ("8", "8", False)],  # 1/4
}
WEAK = {"t1": 0, "t2": 0, "t3": 2, "t4": 0}  # another model's passes of 4, same slice


class _Spec:
    n, seed, params_hash = 4, 0, PH


def _small_store(store):
    b = env_binding(store, "single-turn")
    store.append(
        "tasks",
        [
            {
                "task_id": t,
                "source": "s",
                "domain": "math",
                "prompt": f"q {t}",
                "answer": "1",
                "env_id": "single-turn",
                "env_version": b.version,
            }
            for t in SAMPLES
        ],
    )
    traj, ver = [], []
    for t, samples in SAMPLES.items():
        for i, (completion, extracted, passed) in enumerate(samples):
            tid = f"{t}-{i}"
            traj.append(
                {
                    "traj_id": tid,
                    "task_id": t,
                    "run_id": "r",
                    "sample_idx": i,
                    "model": M,
                    "policy_version": 0,
                    "params_hash": PH,
                    "seed": 0,
                    "completion": completion,
                    "created_at": T0,
                    "env_id": "single-turn",
                    "env_version": b.version,
                    "num_turns": 1,
                    "num_tool_calls": 0,
                }
            )
            ver.append(
                {
                    "traj_id": tid,
                    "task_id": t,
                    "verifier": "math",
                    "verifier_version": "1",
                    "layer": "answer",
                    "passed": passed,
                    "extracted": extracted,
                    "error": "timeout" if passed is None else None,
                    "created_at": T0,
                }
            )
    store.append("trajectories", traj)
    store.append("verifications", ver)
    recompute_passrates(store, model=M, params_hash=PH, verifier_keys=[VK])
    store.upsert(
        "passrates",
        [
            passrate_row(
                t,
                model="weak@1",
                params_hash=PH,
                verifier_key=VK,
                n=4,
                n_correct=k,
                n_error=0,
                env_version=b.ledger_key,
            )
            for t, k in WEAK.items()
        ],
    )
    return b


def test_the_checks_by_hand_on_a_small_store(store):
    b = _small_store(store)
    rows = ledger_rows(store, b.ledger_key, list(SAMPLES), model=M, params_hash=PH)
    assert [(r["task_id"], r["n"], r["n_correct"], r["n_error"]) for r in rows] == [
        ("t1", 4, 0, 0),
        ("t2", 4, 2, 1),
        ("t3", 4, 4, 0),
        ("t4", 4, 1, 0),
    ]
    ev = _evidence(store, b.ledger_key, rows, model=M, params_hash=PH)
    assert ev.others == {"weak@1": {t: (4, k) for t, k in WEAK.items()}}
    # identical inputs: t1's two empty completions, t3's "5" x4, t4's "42" scored once each way
    assert sorted(ev.repeats) == [(2, 0), (2, 1), (4, 4)]
    assert ev.degenerate == (3, 0)  # t1's two empty ones, t2's answer-less "c"; the error is no sample
    assert ev.canary is None or ev.canary == 0
    res = {r["check_id"].split(".")[1]: r for r in run_checks(ev)}

    # pass@4: t1 0; t2, t3, t4 1 (fewer than 4 wrong: the one 4-subset holds a right one) -> 0.75 >= 0.1
    r = res["reward_reachability"]
    assert r["status"] == "pass" and r["measured"]["k"] == 4
    assert r["measured"]["pass_at_k"] == pytest.approx(0.75)
    assert r["measured"]["pass_at_1"] == pytest.approx((0 + 0.5 + 1 + 0.25) / 4)
    assert r["measured"]["tasks_solved"] == 3

    # m 0.4375 vs weak 0.125; paired differences 0, .5, .5, .25: mean .3125, sd .239357 -> half-width
    # 1.959964 * .239357 / 2 = .234566
    r = res["difficulty_separation"]
    assert r["status"] == "pass" and (r["measured"]["best"], r["measured"]["worst"]) == (M, "weak@1")
    assert r["measured"]["gap"] == pytest.approx(0.3125)
    assert r["measured"]["gap_lo"] == pytest.approx(0.3125 - 0.234566, abs=1e-5)

    r = res["headroom"]  # the best model's mean 0.4375 < 1 - 0.1
    assert r["status"] == "pass" and r["measured"]["headroom"] == pytest.approx(0.5625)

    # population variances 0 (t1 ""), 0 (t3 "5"), 0.25 (t4 "42"), weighted by samples: 0.5 / 8
    r = res["variance_bound"]
    assert r["status"] == "pass" and r["measured"]["reward_variance"] == pytest.approx(0.0625)
    assert r["measured"]["inconsistent_groups"] == 1 and r["measured"]["samples"] == 8
    # the signal beside it: the pass rates' variance across tasks, 0.546875 / 3
    assert r["measured"]["between_task_variance"] == pytest.approx(0.546875 / 3)

    # G = min(8, n) = 4: a 4-of-4 group is mixed exactly when 0 < c < 4 (t2, t4): 0.5; in band 2 of 4
    r = res["training_signal"]
    assert r["measured"]["group_size"] == 4 and r["measured"]["mixed_group_share"] == pytest.approx(0.5)
    assert r["measured"]["in_band"] == 0.5 and r["status"] == "pass"  # Wilson lower bound 0.15 >= 0.05

    r = res["adversarial_floor"]
    assert r["status"] == "pass" and r["measured"]["degenerate_samples"] == 3
    assert res["gameability_gap"]["status"] == "skip"
    assert verdict(list(res.values())) == "warn"  # a skip: OpenEnv's rule


def test_the_card_reads_the_rows_the_filter_keeps(store):
    """The card's in-band share and the band filter over the same ledger slice agree task for task."""
    from rldata.api import filter as filter_

    b = _small_store(store)
    card = _measure(store, b, list(SAMPLES), M, _Spec)
    res = filter_(store, band="0.1,0.9", name="band", model=M, params_hash=PH, verifier_key=VK, min_n=4)
    kept = store.sql(
        "SELECT count(*) FROM selections WHERE selection = 'band' AND decision = 'keep'"
    ).fetchall()
    assert card["in_band"] * card["tasks"] == kept[0][0] == 2, res
    assert card["histogram"] == [1, 0, 1, 0, 0, 1, 0, 0, 0, 1]  # 0, .25, .5, 1
    assert card["parse_fail_rate"] == pytest.approx(3 / 16)  # of the 16 verified samples


def test_each_check_fails_where_it_should():
    base = [("a", 16, 3, 0), ("b", 16, 8, 0), ("c", 16, 12, 0)]
    ok = {r["check_id"]: r["status"] for r in run_checks(Evidence(rows=base))}
    assert ok["statistical.reward_reachability"] == "pass"
    # never solved: pass@16 0 < 0.1
    zero = run_checks(Evidence(rows=[(t, 16, 0, 0) for t in "abcdef"]))
    assert zero[0]["status"] == "fail" and zero[0]["remediation"]
    # one task solved once of 30: pass@16 = 1/30 < 0.1
    rare = run_checks(Evidence(rows=[("a", 16, 1, 0)] + [(f"z{i}", 16, 0, 0) for i in range(29)]))
    assert rare[0]["status"] == "fail" and rare[0]["measured"]["pass_at_k"] == pytest.approx(1 / 30)
    # two models a hair apart: no separation
    near = Evidence(rows=base, others={"other": {"a": (16, 3), "b": (16, 8), "c": (16, 11)}})
    assert _status(near, "difficulty_separation") == "fail"
    # the best model at 0.9 is within the oracle tolerance of the maximum
    easy = Evidence(rows=[("a", 10, 9, 0), ("b", 10, 9, 0)])
    assert _status(easy, "headroom") == "fail"
    assert _status(Evidence(rows=[("a", 10, 8, 0), ("b", 10, 9, 0)]), "headroom") == "pass"  # 0.85
    # one input scored both ways, twice: variance 0.25 > 0.2
    noisy = Evidence(rows=base, repeats=[(2, 1), (2, 1)])
    assert _status(noisy, "variance_bound") == "fail"
    assert _status(Evidence(rows=base, repeats=[(4, 1)]), "variance_bound") == "pass"  # 0.1875
    # not learnable: 80 tasks always or never solved
    flat = Evidence(rows=[(f"t{i}", 16, 0 if i % 2 else 16, 0) for i in range(80)])
    assert _status(flat, "training_signal") == "fail"
    # a degenerate answer that passed, or a lint canary finding
    assert _status(Evidence(rows=base, degenerate=(5, 1)), "adversarial_floor") == "fail"
    assert _status(Evidence(rows=base, canary=2), "adversarial_floor") == "fail"
    assert _status(Evidence(rows=base, canary=0), "adversarial_floor") == "skip"


def _status(ev, check):
    return {r["check_id"]: r["status"] for r in run_checks(ev)}[f"statistical.{check}"]


def test_mixed_group_share_is_exact():
    # 3 passes of 6, groups of 2: 1 - (C(3,2) + C(3,2)) / C(6,2) = 1 - 6/15
    assert mixed_group_share(6, 3, 2) == pytest.approx(1 - 6 / 15)
    assert mixed_group_share(8, 0, 4) == 0.0 and mixed_group_share(8, 8, 8) == 0.0
    # unbiased for 1 - p^g - (1-p)^g: averaged over the binomial counts of n = 10 at p = 0.3
    p, n, g = 0.3, 10, 3
    avg = sum(math.comb(n, c) * p**c * (1 - p) ** (n - c) * mixed_group_share(n, c, g) for c in range(n + 1))
    assert avg == pytest.approx(1 - p**g - (1 - p) ** g)


def test_ids_severities_and_bounds_are_openenv_policy_v2():
    policy = pytest.importorskip("openenv.validation.policy").load_policy(POLICY_VERSION)
    theirs = {e.check_id: e for e in policy.entries if e.check_id.startswith("statistical.")}
    assert {k: v.severity.value for k, v in theirs.items()} == SEVERITY
    assert {e.level for e in theirs.values()} == {4} and {e.lane.value for e in theirs.values()} == {"hub"}
    got = policy.bounds.model_dump()
    assert {k: got[k] for k in BOUNDS} == BOUNDS


def test_results_are_openenv_check_results_and_the_verdict_is_apply_policy():
    pol = pytest.importorskip("openenv.validation.policy")
    from openenv.validation.report import CheckResult
    from openenv.validation.types import Lane

    policy = pol.load_policy(POLICY_VERSION)
    ev = Evidence(rows=[("a", 16, 3, 0), ("b", 16, 8, 0)], repeats=[(2, 2)], degenerate=(3, 0))
    results = run_checks(ev)
    cases = [results]
    for check, status in [
        ("headroom", "fail"),
        ("variance_bound", "fail"),
        ("training_signal", "fail"),
        ("gameability_gap", "error"),
    ]:
        cases.append([{**r, "status": status} if r["check_id"].endswith(check) else r for r in results])
    cases.append([{**r, "status": "pass"} for r in results])
    seen = set()
    for case in cases:
        models = [CheckResult.model_validate(r) for r in openenv_results(case)["results"]]
        want = pol.apply_policy(models, policy, Lane.HUB).value
        assert verdict(case) == want
        seen.add(want)
    assert seen == {"pass", "warn", "fail"}


def test_a_check_that_raises_is_an_error_result_and_fails_the_verdict():
    res = run_checks(Evidence(rows=[("a", 4, "x", 0)]))  # a count that is not a number
    errors = [r for r in res if r["status"] == "error"]
    assert errors and all("ValueError" in r["evidence"][0] for r in errors) and verdict(res) == "fail"


def test_card_section_and_taskset_metadata(store):
    b = _small_store(store)
    rows = ledger_rows(store, b.ledger_key, list(SAMPLES), model=M, params_hash=PH)
    checks = run_checks(_evidence(store, b.ledger_key, rows, model=M, params_hash=PH))
    row = {**_measure(store, b, list(SAMPLES), M, _Spec), "profile_id": "p1", "run_id": "r"}
    md = card_section(row, checks)
    assert md.startswith("## Learnability (OpenEnv RFC 008, statistical level)")
    for c in checks:
        assert f"| `{c['check_id']}` | {SEVERITY[c['check_id']]} | {c['status']} |" in md
    block = md.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(block) == json.loads(json.dumps(openenv_results(checks)))
    assert "verdict **warn**" in md

    tasks = [{**r, "key": "k-" + r["task_id"]} for r in rows]
    meta = json.loads(json.dumps(taskset_metadata(row, checks, tasks, verifiers={"id": "o/sums"})))
    assert meta["schema"] == METADATA_SCHEMA and meta["environment"]["verifiers"] == {"id": "o/sums"}
    assert meta["measured_with"]["model"] == M and meta["card"]["in_band"] == 0.5
    assert [(t["key"], t["n"], t["n_correct"], t["pass_rate"]) for t in meta["tasks"]] == [
        ("k-t1", 4, 0, 0.0),
        ("k-t2", 4, 2, 0.5),
        ("k-t3", 4, 4, 1.0),
        ("k-t4", 4, 1, 0.25),
    ]
    assert meta["statistical"]["verdict"] == "warn" and len(meta["statistical"]["results"]) == 7

    # as env_checks rows, and read back in RFC 008's order
    store.append("env_checks", check_rows(row, checks))
    back = stored_checks(store, "p1")
    assert [c["check_id"] for c in back] == list(SEVERITY)
    assert [(c["status"], c["measured"]) for c in back] == [
        (c["status"], json.loads(json.dumps(c["measured"]))) for c in checks
    ]


def test_lint_canary_findings_fail_the_adversarial_floor(store):
    """rldata lint's semantic.canary_floor findings on the profiled tasks are read once a lint run
    checked that rule (issue 41): before, the evidence is not measured (None), not "none found"."""
    b = _small_store(store)
    rows = ledger_rows(store, b.ledger_key, list(SAMPLES), model=M, params_hash=PH)
    assert _evidence(store, b.ledger_key, rows, model=M, params_hash=PH).canary is None
    with record_run(store, "lint", {"rules": "semantic"}) as run:  # what rldata lint records
        run.summary = {"rules": ["semantic.canary_floor"], "findings": 0}
    assert _evidence(store, b.ledger_key, rows, model=M, params_hash=PH).canary == 0
    store.append(
        "lint_findings",
        [
            {
                "task_id": "t2",
                "rule": "semantic.canary_floor",
                "rule_version": "1",
                "severity": "error",
                "detail": "{}",
                "created_at": T0,
            }
        ],
    )
    ev = _evidence(store, b.ledger_key, rows, model=M, params_hash=PH)
    assert ev.canary == 1
    assert {r["check_id"]: r["status"] for r in run_checks(ev)}["statistical.adversarial_floor"] == "fail"
