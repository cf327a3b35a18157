"""``rldata lint`` through the CLI: findings as rows with their rule version and severity, reruns that
write nothing, findings that no longer hold removed, and the suspect key found from stored samples."""

from __future__ import annotations

import json

import pytest

from rldata import open_store
from rldata.jobs.profile import _lint_ran
from tests.quality.helpers import samples, tasks
from tests.reliability.helpers import fingerprint, one_error_line, run


@pytest.fixture
def root(tmp_path):
    store = open_store(tmp_path / "store")
    tasks(
        store,
        [
            {"prompt": "What is 9*3?", "answer": "27"},
            {"prompt": "Prove that 2 is prime.", "answer": "proof"},
            {"prompt": "Compute 3*3. The answer is 9.", "answer": "9"},
            {"prompt": "What is 6*7?", "answer": "43"},  # a wrong key the samples say 42 to
            {"prompt": "Is 9 odd?", "answer": "yes"},
        ],
    )
    samples(store, "t3", [("42", False)] * 12)
    samples(store, "t0", [("27", True)] * 12)
    return str(tmp_path / "store")


def _rules(out: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for r in json.loads(out):
        found.setdefault(r["rule"], set()).add(r["task_id"])
    return found


def test_lint_writes_its_findings_and_a_rerun_writes_nothing(root, capsys):
    code, out, err = run(capsys, "--store", root, "lint", "--format", "json")
    assert code == 0, err
    found = _rules(out)
    assert found["answer.sentinel"] == {"t1"} and found["prompt.proof"] == {"t1"}
    assert found["semantic.no_solution_leakage"] == {"t2"} and found["semantic.canary_floor"] == {"t2"}
    assert found["suspect_key"] == {"t3"} and found["answer.guessable"] == {"t4"}
    assert "t0" not in set().union(*found.values())
    store = open_store(root)
    rows = store.read("lint_findings")
    assert rows.height == len(json.loads(out)) and set(rows["rule_version"]) == {"1"}
    sk = json.loads(rows.filter(rows["rule"] == "suspect_key")["detail"][0])
    assert sk["majority"] == "42" and sk["share"] == 1.0 and sk["models"][0]["model"] == "m@1"
    assert rows.filter(rows["rule"] == "answer.guessable")["severity"].to_list() == ["warning"]
    assert "4 task(s) with an error finding" in err  # t1, t2, t3 and t4 (yes is not math-verify's)
    v = store.version("lint_findings")
    assert run(capsys, "--store", root, "lint")[0] == 0
    assert store.version("lint_findings") == v and store.read("lint_findings").height == rows.height


def test_a_finding_that_no_longer_holds_is_removed_and_other_rules_are_untouched(root, capsys):
    assert run(capsys, "--store", root, "lint")[0] == 0
    store = open_store(root)
    before = store.read("lint_findings").height
    samples(store, "t3", [("43", True)] * 12, first=50)  # more samples: the key is right after all
    code, _, err = run(capsys, "--store", root, "lint", "--rule", "suspect_key")
    assert code == 0, err
    rows = store.read("lint_findings")
    assert "suspect_key" not in set(rows["rule"]) and rows.height == before - 1


def test_dry_run_writes_nothing_and_a_bad_rule_or_verifier_is_one_line(root, capsys):
    before = fingerprint(root)
    code, out, _ = run(capsys, "--store", root, "lint", "--rule", "answer", "--dry-run", "--format", "json")
    assert code == 0 and _rules(out).keys() == {"answer.sentinel", "answer.guessable"}
    code, _, err = run(capsys, "--store", root, "lint", "--rule", "answers")
    assert code == 1 and "--rule" in one_error_line(err) and "unknown rule 'answers'" in err
    code, _, err = run(capsys, "--store", root, "lint", "--verifier", "nope")
    assert code == 1 and "nope" in one_error_line(err)
    code, _, err = run(capsys, "--store", root, "lint", "--where", "1=1; DROP VIEW tasks")
    assert code == 1 and "--where" in one_error_line(err)
    assert fingerprint(root) == before


def test_the_env_profile_counts_canary_findings_only_after_lint_ran_the_rule(root, capsys):
    # no lint run: the adversarial floor's canary evidence is "not measured" (None), not "0 found"
    store = open_store(root)
    assert not _lint_ran(store, "semantic.canary_floor")
    assert run(capsys, "--store", root, "lint", "--rule", "semantic.canary_floor", "--dry-run")[0] == 0
    assert run(capsys, "--store", root, "lint", "--rule", "answer")[0] == 0
    assert not _lint_ran(store, "semantic.canary_floor")  # a dry run, and a run of other rules
    assert _lint_ran(store, "answer.sentinel")
    assert run(capsys, "--store", root, "lint", "--rule", "semantic.canary_floor")[0] == 0
    assert _lint_ran(store, "semantic.canary_floor")
