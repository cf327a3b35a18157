"""Where a run's prompts come from (curriculum buckets or all tasks, held-out excluded) and the
deterministic ids and seeds that make a resumed run regenerate the same rollouts."""

from __future__ import annotations

import pytest
from rldata.trainer.config import TrainConfig
from rldata.trainer.rollout import UNIFORM_BUCKET, build_sampler, extra_draws, request_seed, rollout_id

from rldata.curriculum import Bucket, Curriculum, Phase
from rldata.curriculum import save as save_curriculum
from rldata.errors import RldataError


def test_seeds_and_ids_are_pure_functions_of_their_coordinates():
    base = (0, 3, 1, 2, "task-a")
    assert request_seed(*base) == request_seed(*base)
    variants = [(1, 3, 1, 2, "task-a"), (0, 4, 1, 2, "task-a"), (0, 3, 0, 2, "task-a"), (0, 3, 1, 3, "task-a"),
                (0, 3, 1, 2, "task-b")]
    seeds = {request_seed(*v) for v in [base, *variants]}
    assert len(seeds) == 6 and all(0 <= s < 2**30 for s in seeds)
    ids = {rollout_id("run", 3, 1, 2, "t", i) for i in range(4)} | {rollout_id("run2", 3, 1, 2, "t", 0)}
    assert len(ids) == 5 and rollout_id("run", 3, 1, 2, "t", 0) in ids


def _tasks(store, n=12):
    rows = [{"task_id": f"t{i:02d}", "source": "unit", "domain": "math", "prompt": f"{i}+1=", "answer": str(i + 1),
             "metadata": '{"split": "%s"}' % ("heldout" if i >= n - 3 else "train")} for i in range(n)]
    store.append("tasks", rows)
    return rows


def test_uniform_run_draws_every_task_but_the_heldout_ones(store):
    _tasks(store)
    held = [f"t{i:02d}" for i in (9, 10, 11)]
    s, tasks = build_sampler(store, TrainConfig(seed=3), tasks_where="domain = 'math'", exclude=held)
    assert sorted(tasks) == [f"t{i:02d}" for i in range(9)]
    draws = s.next_batch(9)  # one shuffled pass: every training task once
    assert sorted(t for t, _ in draws) == sorted(tasks) and {b for _, b in draws} == {UNIFORM_BUCKET}
    again, _ = build_sampler(store, TrainConfig(seed=3), tasks_where="domain = 'math'", exclude=held)
    assert again.next_batch(9) == draws  # deterministic for a seed
    step = s.step
    assert len(extra_draws(s, 2)) == 2 and s.step == step  # replacements do not count as a step
    with pytest.raises(RldataError, match="no training tasks"):
        build_sampler(store, TrainConfig(), tasks_where="domain = 'code'")


def test_curriculum_run_draws_from_the_selections_buckets(store, tmp_path):
    _tasks(store)
    sel = [{"selection": "band", "task_id": f"t{i:02d}", "decision": "keep" if i < 6 else "drop",
            "reason": "in_band" if i < 6 else "too_hard", "bucket": ("easy" if i < 3 else "hard") if i < 6 else None}
           for i in range(12)]
    store.append("selections", sel)
    cur = Curriculum(buckets=(Bucket("hard", 0.1, 0.5), Bucket("easy", 0.5, 0.9)),
                     phases=(Phase("only-easy", {"easy": 1.0, "hard": 0.0}),), selection="band")
    path = save_curriculum(cur, tmp_path / "buckets.yaml")
    s, tasks = build_sampler(store, TrainConfig(curriculum=str(path)), exclude=["t05"])
    assert sorted(tasks) == ["t00", "t01", "t02", "t03", "t04"]
    assert {b for _, b in s.next_batch(20)} == {"easy"}  # the phase's weights
    u, _ = build_sampler(store, TrainConfig(curriculum=str(path)), sampler="uniform", exclude=["t05"])
    assert {t for t, _ in u.next_batch(5)} == set(tasks)  # the baseline ignores the weights

    bad = Curriculum(buckets=cur.buckets, phases=cur.phases, selection="nope")
    with pytest.raises(RldataError, match="no kept tasks"):
        build_sampler(store, TrainConfig(curriculum=str(save_curriculum(bad, tmp_path / "bad.yaml"))))
