"""Write-back rows, metrics and the resume clean-up, on a real Delta store (no engines needed)."""

from __future__ import annotations

import numpy as np
import pytest

from rldata.configs.sampling import SamplingSpec
from rldata.engine.core import Sample
from rldata.trainer import writeback as wb
from rldata.trainer.rollout import Group, rollout_id
from rldata.verify.base import Verdict

SPEC = SamplingSpec(n=2, temperature=1.0, max_tokens=4, seed=0)
VER = ("math", "1")


def _verifier_for(domain):
    return VER


def _group(task_id, bucket, passed, *, run="r", step=1, slot=0, kept=True):
    samples = [
        Sample(
            text=f"{i}",
            token_ids=(5, 2),
            prompt_tokens=3,
            completion_tokens=2 + i,
            cumulative_logprob=-1.5,
            logprobs=(-1.0, -0.5),
            finish_reason="stop",
        )
        for i in range(len(passed))
    ]
    rewards = np.array([1.0 if p else 0.0 for p in passed])
    return Group(
        task={"task_id": task_id, "domain": "math", "prompt": "1+1=", "answer": "2", "tests": None},
        bucket=bucket,
        rnd=0,
        slot=slot,
        seed=100 + slot,
        samples=samples,
        verdicts=[
            [Verdict(passed=p, score=float(bool(p)), error=None if p is not None else "boom")] for p in passed
        ],
        passed=list(passed),
        rewards=rewards,
        advantages=rewards - rewards.mean(),
        traj_ids=[rollout_id(run, step, 0, slot, task_id, i) for i in range(len(passed))],
        kept=kept,
        drop_reason=None if kept else "zero_variance",
    )


def _write(store, run, step, version, groups):
    model = wb.ledger_model("tiny@abc", run, version)
    wb.write_step(
        store,
        traj=wb.trajectory_rows(
            groups, run_id=run, step=step, model=model, revision="abc", version=version, spec=SPEC
        ),
        ver=wb.verification_rows(groups, _verifier_for),
        model=model,
        params_hash=SPEC.params_hash,
        ledger_outcomes=wb.outcomes(groups, _verifier_for),
        run_id=run,
    )
    store.append("metrics", wb.metric_rows(run, step, {"reward_mean": 0.5}))


def test_rows_validate_and_keep_dropped_groups(store):
    groups = [_group("t1", "easy", [True, False]), _group("t2", "hard", [False, False], slot=1, kept=False)]
    _write(store, "r", 1, 0, groups)
    t = store.read("trajectories").sort("traj_id")
    assert t.height == 4 and set(t["kept"].to_list()) == {True, False}
    dropped = t.filter(~t["kept"])
    assert dropped["drop_reason"].to_list() == ["zero_variance"] * 2 and dropped["advantage"].to_list() == [
        0.0,
        0.0,
    ]
    assert set(t["bucket"].to_list()) == {"easy", "hard"} and set(t["step"].to_list()) == {1}
    assert store.count("verifications") == 4
    led = dict(store.sql("SELECT task_id, n_correct FROM passrates WHERE model = 'tiny@abc+r/v0'").fetchall())
    assert led == {"t1": 1, "t2": 0}


def test_step_metrics_and_bucket_accuracy():
    groups = [
        _group("t1", "easy", [True, False]),
        _group("t2", "easy", [True, True], slot=1, kept=False),
        _group("t3", "hard", [None, False], slot=2, kept=False),
    ]
    times = {
        "generate": 2.0,
        "reward": 1.0,
        "update": 0.5,
        "sync": 0.5,
        "learner_idle": 3.0,
        "engine_idle": 1.0,
        "step": 4.0,
    }
    stats = dict.fromkeys(wb.LEARNER_STATS, 0.5) | {"tokens": 4.0}
    m = wb.step_metrics(groups, stats, times)
    assert m["reward_mean"] == pytest.approx(3 / 6)
    assert m["reward_mean/easy"] == pytest.approx(0.75) and m["reward_mean/hard"] == 0.0
    assert (m["groups_kept"], m["groups_dropped"], m["reward_errors"]) == (1, 2, 1)
    assert m["learner_idle_frac"] == pytest.approx(0.75) and m["engine_idle_frac"] == pytest.approx(0.25)
    assert m["time/generate"] == 2.0
    assert m["response_len_mean"] == pytest.approx(2.5) and m["gen_tokens_per_s"] == pytest.approx(7.5)
    assert wb.bucket_accuracy(groups) == {"easy": 0.75, "hard": 0.0}  # an error counts as not passed
    assert all(m[k] == 0.5 for k in wb.LEARNER_STATS) and m["train_tokens"] == 4.0


def test_tool_errors_count_the_error_results_of_an_episode():
    msgs = [
        {"role": "user", "content": "error: in the prompt is not a tool's"},
        {"role": "assistant", "content": "error: nor in an answer"},
        {"role": "tool", "content": "error: unknown tool 'calc'; tools: add"},
        {"role": "tool", "content": "  error: bad arguments for add: missing b"},
        {"role": "tool", "content": "errors: 0 (a result that mentions errors)"},
        {"role": "tool", "content": "42"},
        {"role": "tool", "content": None},
    ]
    assert wb.tool_errors(msgs) == 2 and wb.tool_errors(None) == 0 and wb.tool_errors([]) == 0


def test_discard_after_removes_only_the_runs_later_rows(store):
    for run in ("a", "b"):
        for step in (1, 2, 3):
            _write(
                store, run, step, step - 1, [_group(f"t{step}", "easy", [True, False], run=run, step=step)]
            )
    gone = wb.discard_after(store, "a", 1, keep_versions_upto=0)
    assert gone == {"verifications": 4, "trajectories": 4, "metrics": 2, "passrates": 2}
    left = store.sql("SELECT run_id, max(step), count(*) FROM trajectories GROUP BY 1 ORDER BY 1").fetchall()
    assert left == [("a", 1, 2), ("b", 3, 6)]
    assert store.count("verifications") == 8
    assert sorted(m for (m,) in store.sql("SELECT model FROM passrates WHERE run_id = 'a'").fetchall()) == [
        "tiny@abc+a/v0"
    ]
    assert store.sql("SELECT count(*) FROM metrics WHERE run_id = 'b'").fetchall()[0][0] == 3
    assert wb.discard_after(store, "a", 1, keep_versions_upto=0) == dict.fromkeys(gone, 0)  # idempotent


def test_pending_outcomes_pool_a_version_that_generated_two_steps(store):
    # v0 generated steps 1 and 2 (step 1's update was skipped): its ledger row counts both.
    _write(store, "r", 1, 0, [_group("t1", "easy", [False, False], kept=False)])
    pending = wb.pending_outcomes(store, "r", "tiny@abc+r/v0", 1)
    assert sorted(pending) == [("t1", "math@1", False, "")] * 2
    new = wb.outcomes([_group("t1", "easy", [True, False], step=2)], _verifier_for)
    wb.write_ledger(store, pending + new, model="tiny@abc+r/v0", params_hash=SPEC.params_hash, run_id="r")
    assert store.sql("SELECT n, n_correct FROM passrates WHERE model = 'tiny@abc+r/v0'").fetchall() == [
        (4, 1)
    ]


def test_ledger_model_names_parse_back():
    name = wb.ledger_model("tiny-arith@0123abcd", "train-1", 12)
    assert name == "tiny-arith@0123abcd+train-1/v12"
    assert wb._version_of(name, "train-1") == 12
    assert wb._version_of(name, "train-2") is None and wb._version_of("tiny-arith@0123", "train-1") is None


def test_resume_recounts_the_ledger_of_an_older_version_that_generated_discarded_steps(store):
    """Async mode: v0 generated steps 1 and 2 (K >= 1), v1 step 3; a resume from step 1's checkpoint
    (v1) discards steps 2-3.  v0's ledger row counted step 2's samples: it is recounted from step 1's."""
    g1 = [_group("t1", "easy", [True, False], step=1)]
    g2 = [_group("t1", "easy", [True, True], step=2), _group("t2", "easy", [False, True], step=2, slot=1)]
    model0 = wb.ledger_model("tiny@abc", "r", 0)
    _write(store, "r", 1, 0, g1)
    _write(store, "r", 2, 0, g2)
    wb.write_ledger(
        store, wb.outcomes(g1 + g2, _verifier_for), model=model0, params_hash=SPEC.params_hash, run_id="r"
    )  # what the driver wrote after step 2: both steps of v0
    _write(store, "r", 3, 1, [_group("t3", "hard", [True, False], step=3)])
    older = [m for m in wb.models_after(store, "r", 1) if m != wb.ledger_model("tiny@abc", "r", 1)]
    assert older == [model0]
    wb.discard_after(store, "r", 1, keep_versions_upto=0)
    wb.rebuild_ledger(store, "r", older, step=1, params_hash=SPEC.params_hash)
    rows = store.sql("SELECT model, task_id, n, n_correct FROM passrates ORDER BY ALL").fetchall()
    assert rows == [(model0, "t1", 2, 1)]  # t2 (only in step 2) gone, t1 back to step 1's two samples
