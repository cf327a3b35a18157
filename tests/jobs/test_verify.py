"""rldata verify on a real store with real math-verify: resumable, idempotent, versions never mix,
and verdicts stay with their samples when a check times out in the middle of a batch."""

from __future__ import annotations

import pytest

from rldata.configs.sampling import VerifyConfig
from rldata.errors import RldataError
from rldata.jobs.verify import VerifyJob, run_verify
from rldata.verify.base import REGISTRY
from rldata.verify.math import MathVerifier

HOSTILE = r"Let me think. \boxed{9^{9^{9^{9}}}}"  # math-verify cannot finish this: a timeout

# per task: gold, then the 4 completions (sample_idx 0..3); the hostile one sits mid-batch
ROWS = {
    "t0": ("7", [r"\boxed{7}", r"\boxed{8}", "no idea", r"so \boxed{7}"]),
    "t1": ("12", [r"\boxed{12}", HOSTILE, r"\boxed{13}", r"\boxed{12}"]),
    "t2": ("5", [r"\boxed{4}", r"\boxed{6}", r"\boxed{5}", "I give up"]),
    "t3": ("3", [r"\boxed{3}", r"\boxed{3}", r"\boxed{3}", r"\boxed{2}"]),
}


def seed(store, run_id="r1"):
    store.append(
        "tasks",
        [
            {"task_id": t, "source": "unit", "domain": "math", "prompt": f"q {t}", "answer": g}
            for t, (g, _) in ROWS.items()
        ],
    )
    store.append(
        "trajectories",
        [
            {
                "traj_id": f"{t}/{i}",
                "task_id": t,
                "run_id": run_id,
                "sample_idx": i,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
                "completion": c,
                "completion_tokens": 4,
            }
            for t, (_, cs) in ROWS.items()
            for i, c in enumerate(cs)
        ],
    )


class MathV2(MathVerifier):
    """The same checks under a new version string: what a verifier upgrade looks like in the store."""

    version = "test-v2"


@pytest.mark.slow  # real math-verify in its child process, and two real 2 s timeouts
def test_verify_is_resumable_idempotent_and_never_mixes_versions(store, monkeypatch):
    seed(store)
    v1 = f"math@{MathVerifier.version}"
    first = run_verify(
        store, VerifyJob(run_id="r1", where="t.sample_idx < 2", verify=VerifyConfig(timeout_s=2))
    )
    assert (first.trajectories, first.verified, first.errors) == (8, 8, 1)  # a "killed" run: half done
    rest = run_verify(store, VerifyJob(run_id="r1", verify=VerifyConfig(timeout_s=2)))
    assert (rest.trajectories, rest.already_verified, rest.verified) == (16, 8, 8)  # only what was missing
    assert first.correct + rest.correct == 8 and first.errors + rest.errors == 1
    assert first.no_answer + rest.no_answer == 2  # "no idea", "I give up": parse failures
    rows = {r["traj_id"]: r for r in store.sql("SELECT * FROM verifications").pl().to_dicts()}
    assert len(rows) == 16 and {r["verifier_version"] for r in rows.values()} == {MathVerifier.version}
    # each verdict belongs to its own sample, the timeout included (no one-slot shift)
    assert rows["t1/1"]["passed"] is None and "timeout" in rows["t1/1"]["error"]
    assert [rows[f"t1/{i}"]["extracted"] for i in (0, 2, 3)] == ["12", "13", "12"]
    assert [rows[f"t1/{i}"]["passed"] for i in (0, 2, 3)] == [True, False, True]
    assert (
        rows["t0/2"]["extracted"] is None and rows["t0/2"]["passed"] is False
    )  # no answer: wrong, not error
    ledger = {r["task_id"]: r for r in store.sql("SELECT * FROM passrates").pl().to_dicts()}
    assert {r["verifier_key"] for r in ledger.values()} == {v1}
    assert (ledger["t1"]["n"], ledger["t1"]["n_correct"], ledger["t1"]["n_error"]) == (3, 2, 1)
    assert (ledger["t3"]["n"], ledger["t3"]["n_correct"]) == (4, 3)

    runs = store.sql("SELECT count(*) FROM runs WHERE kind = 'verify'").fetchall()[0][0]
    again = run_verify(store, VerifyJob(run_id="r1", verify=VerifyConfig(timeout_s=2)))
    assert (
        again.noop and store.sql("SELECT count(*) FROM runs WHERE kind = 'verify'").fetchall()[0][0] == runs
    )
    assert store.sql("SELECT count(*) FROM verifications").fetchall()[0][0] == 16

    monkeypatch.setitem(REGISTRY, "math", MathV2)  # a new version of the same verifier
    new = run_verify(store, VerifyJob(run_id="r1", verify=VerifyConfig(verifier="math", timeout_s=2)))
    assert new.verifiers == ["math@test-v2"] and new.verified == 16 and new.already_verified == 0
    by_version = dict(store.sql("SELECT verifier_version, count(*) FROM verifications GROUP BY 1").fetchall())
    assert by_version == {MathVerifier.version: 16, "test-v2": 16}  # the old results stay
    keys = dict(store.sql("SELECT verifier_key, count(*) FROM passrates GROUP BY 1").fetchall())
    assert keys == {v1: 4, "math@test-v2": 4}  # one ledger slice per version, never pooled
    old = {
        r["task_id"]: r
        for r in store.sql(f"SELECT * FROM passrates WHERE verifier_key = '{v1}'").pl().to_dicts()
    }
    assert old["t1"]["n_correct"] == ledger["t1"]["n_correct"]


def test_verify_errors_are_one_line_and_write_nothing(store):
    seed(store)
    with pytest.raises(RldataError, match="no trajectories to verify for run 'nope'"):
        run_verify(store, VerifyJob(run_id="nope"))
    with pytest.raises(RldataError, match="^where 'no_such_column = 1'"):
        run_verify(store, VerifyJob(where="no_such_column = 1"))
    with pytest.raises(RldataError, match="no verifier named 'nope'"):
        run_verify(store, VerifyJob(verify=VerifyConfig(verifier="nope")))
    with pytest.raises(
        RldataError, match="^batch: must be >= 1"
    ):  # the field: reason form of rldata.configs.fields
        VerifyJob(batch=0)
    assert store.sql("SELECT count(*) FROM verifications").fetchall()[0][0] == 0


def test_verify_cli_prints_a_summary_and_reruns_as_a_noop(store, capsys):
    import json

    from rldata.cli import main

    seed(store)
    assert (
        main(["--store", str(store.root), "verify", "--run-id", "r1", "--verifier", "exact", "-f", "json"])
        == 0
    )
    out, err = capsys.readouterr()
    row = json.loads(out)[0]
    assert row["verified"] == 16 and row["verifiers"] == "exact@rldata2" and row["ledger_rows"] == 4
    assert "verified 16 trajectories" in err
    assert (
        main(["--store", str(store.root), "verify", "--run-id", "r1", "--verifier", "exact", "-f", "json"])
        == 0
    )
    out, err = capsys.readouterr()
    assert json.loads(out)[0]["noop"] is True and "nothing to do" in err
    assert main(["--store", str(store.root), "verify", "--run-id", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rldata: error: no trajectories to verify") and err.count("\n") == 1


def test_the_verify_section_is_set_flat_or_nested():
    """verifier and timeout_s are VerifyConfig's (the knobs verifying verbs share): set by the flat
    names rldata.verify and the CLI (--verifier, --timeout) take, or under verify: in a file."""
    from rldata.configs.fields import build

    flat = build(VerifyJob, {"verifier": "exact", "timeout_s": 2.5, "run_id": "r"})
    nested = build(VerifyJob, {"verify": {"verifier": "exact", "timeout_s": 2.5}, "run_id": "r"})
    assert flat == nested and flat.verify == VerifyConfig(verifier="exact", timeout_s=2.5)
