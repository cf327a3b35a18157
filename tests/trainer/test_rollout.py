"""Where a run's prompts come from (curriculum buckets or all tasks, held-out excluded) and the
deterministic ids and seeds that make a resumed run regenerate the same rollouts."""

from __future__ import annotations

import pytest

from rldata.curriculum import Bucket, Curriculum, Phase
from rldata.curriculum import save as save_curriculum
from rldata.errors import RldataError
from rldata.trainer.config import TrainConfig
from rldata.trainer.rollout import UNIFORM_BUCKET, build_sampler, extra_draws, request_seed, rollout_id


def test_seeds_and_ids_are_pure_functions_of_their_coordinates():
    base = (0, 3, 1, 2, "task-a")
    assert request_seed(*base) == request_seed(*base)
    variants = [
        (1, 3, 1, 2, "task-a"),
        (0, 4, 1, 2, "task-a"),
        (0, 3, 0, 2, "task-a"),
        (0, 3, 1, 3, "task-a"),
        (0, 3, 1, 2, "task-b"),
    ]
    seeds = {request_seed(*v) for v in [base, *variants]}
    assert len(seeds) == 6 and all(0 <= s < 2**30 for s in seeds)
    ids = {rollout_id("run", 3, 1, 2, "t", i) for i in range(4)} | {rollout_id("run2", 3, 1, 2, "t", 0)}
    assert len(ids) == 5 and rollout_id("run", 3, 1, 2, "t", 0) in ids


def _tasks(store, n=12):
    rows = [
        {
            "task_id": f"t{i:02d}",
            "source": "unit",
            "domain": "math",
            "prompt": f"{i}+1=",
            "answer": str(i + 1),
            "metadata": '{"split": "%s"}' % ("heldout" if i >= n - 3 else "train"),
        }
        for i in range(n)
    ]
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


def test_curriculum_run_draws_from_the_selections_buckets(store, tmp_path, capsys):
    _tasks(store)
    sel = [
        {
            "selection": "band",
            "task_id": f"t{i:02d}",
            "decision": "keep" if i < 6 else "drop",
            "reason": "in_band" if i < 6 else "too_hard",
            "bucket": ("easy" if i < 3 else "hard") if i < 6 else None,
        }
        for i in range(12)
    ]
    store.append("selections", sel)
    cur = Curriculum(
        buckets=(Bucket("hard", 0.1, 0.5), Bucket("easy", 0.5, 0.9)),
        phases=(Phase("only-easy", {"easy": 1.0, "hard": 0.0}),),
        selection="band",
    )
    path = save_curriculum(cur, tmp_path / "buckets.yaml")
    s, tasks = build_sampler(store, TrainConfig(curriculum=str(path)), exclude=["t05"])
    assert sorted(tasks) == ["t00", "t01", "t02", "t03", "t04"]
    assert {b for _, b in s.next_batch(20)} == {"easy"}  # the phase's weights
    u, _ = build_sampler(store, TrainConfig(curriculum=str(path)), sampler="uniform", exclude=["t05"])
    assert {t for t, _ in u.next_batch(5)} == set(tasks)  # the baseline ignores the weights

    # a phase the run's steps do not reach by until_step is warned about (promotion may still come)
    capsys.readouterr()
    late = Curriculum(
        buckets=cur.buckets,
        phases=(Phase("first", {"easy": 1.0}, until_step=100), Phase("then", {"hard": 1.0})),
        selection="band",
    )
    late_path = save_curriculum(late, tmp_path / "late.yaml")
    build_sampler(store, TrainConfig(curriculum=str(late_path), steps=100), exclude=["t05"])
    err = capsys.readouterr().err
    assert "warning:" in err and "phase(s) then start after step 100" in err
    build_sampler(store, TrainConfig(curriculum=str(late_path), steps=101), exclude=["t05"])
    assert "warning" not in capsys.readouterr().err

    bad = Curriculum(buckets=cur.buckets, phases=cur.phases, selection="nope")
    with pytest.raises(RldataError, match="selection 'nope' .*is not in the store .*; its selections: band"):
        build_sampler(store, TrainConfig(curriculum=str(save_curriculum(bad, tmp_path / "bad.yaml"))))


def _selection(store, name, keep, *, bucket=None):
    store.append(
        "selections",
        [
            {
                "selection": name,
                "task_id": f"t{i:02d}",
                "decision": "keep" if i in keep else "drop",
                "reason": "in_band" if i in keep else "too_hard",
                "bucket": bucket if i in keep else None,
            }
            for i in range(9)
        ],
    )


def test_a_selection_trains_uniformly_over_its_kept_tasks(store):
    _tasks(store)
    _selection(store, "band", {1, 2, 4, 7})
    s, tasks = build_sampler(store, TrainConfig(seed=1), tasks_selection="band", exclude=["t07"])
    assert sorted(tasks) == ["t01", "t02", "t04"]
    assert {b for _, b in s.next_batch(3)} == {UNIFORM_BUCKET}


def test_an_empty_selection_says_what_works_instead_of_stratify(store, tmp_path):
    """The old advice, "run rldata stratify first", fails on a selection that keeps nothing too."""
    _tasks(store)
    _selection(store, "none", set())
    with pytest.raises(RldataError) as e:
        build_sampler(store, TrainConfig(), tasks_selection="none")
    msg = str(e.value)
    assert "selection 'none' keeps no tasks (9 dropped" in msg and "stratify cannot bucket it either" in msg
    assert "rldata filter --band 0.05,0.95 --name none" in msg
    cur = Curriculum(buckets=(Bucket("all", 0.0, 1.0),), phases=(Phase("p", {"all": 1.0}),), selection="none")
    path = save_curriculum(cur, tmp_path / "b.yaml")
    with pytest.raises(RldataError, match="keeps no tasks"):
        build_sampler(store, TrainConfig(curriculum=str(path)))
    # kept tasks without buckets: stratify is what works (or train on them uniformly)
    _selection(store, "unbucketed", {1, 2})
    cur = Curriculum(buckets=cur.buckets, phases=cur.phases, selection="unbucketed")
    path = save_curriculum(cur, tmp_path / "u.yaml")
    with pytest.raises(RldataError) as e:
        build_sampler(store, TrainConfig(curriculum=str(path)))
    assert "keeps 2 tasks but none has a bucket: rldata stratify --selection unbucketed" in str(e.value)
    assert "rldata train --selection unbucketed" in str(e.value)


def test_the_selection_alone_decides_bucket_membership(store, tmp_path):
    """Membership comes from selections.bucket only: a curriculum file's edges (an old file's, here
    contradicting the store) change nothing, a file without edges draws the same, and a store bucket
    the file does not name is refused."""
    _tasks(store)
    store.append(
        "selections",
        [
            {
                "selection": "band",
                "task_id": f"t{i:02d}",
                "decision": "keep",
                "reason": "in_band",
                "bucket": "easy" if i < 3 else "hard",
            }
            for i in range(6)
        ],
    )
    phases = (Phase("mix", {"easy": 0.5, "hard": 0.5}),)
    old = tmp_path / "old.yaml"  # edges that would put every task elsewhere if they were read
    old.write_text(
        "version: 1\nselection: band\nbuckets:\n- {name: easy, low: 0.0, high: 0.1}\n"
        "- {name: hard, low: 0.9, high: 1.0}\nphases:\n- {name: mix, weights: {easy: 0.5, hard: 0.5}}\n"
    )
    bare = save_curriculum(
        Curriculum(buckets=(Bucket("easy"), Bucket("hard")), phases=phases, selection="band"),
        tmp_path / "bare.yaml",
    )
    assert "low" not in bare.read_text()
    draws = {}
    for name, path in (("old", old), ("bare", bare)):
        s, _ = build_sampler(store, TrainConfig(curriculum=str(path), seed=5))
        draws[name] = s.next_batch(24)
        assert {t for t, b in draws[name] if b == "easy"} == {"t00", "t01", "t02"}
        assert {t for t, b in draws[name] if b == "hard"} == {"t03", "t04", "t05"}
    assert draws["old"] == draws["bare"]

    only_easy = save_curriculum(
        Curriculum(buckets=(Bucket("easy"),), phases=(Phase("e", {"easy": 1.0}),), selection="band"),
        tmp_path / "easy.yaml",
    )
    with pytest.raises(RldataError, match=r"unknown bucket\(s\) \['hard'\]"):
        build_sampler(store, TrainConfig(curriculum=str(only_easy)))


def _group(domain: str, passed: list, lengths: list[int]):
    from rldata.engine.core import Sample
    from rldata.trainer.rollout import Group

    samples = [
        Sample(
            text="1",
            token_ids=(5,) * n,
            prompt_tokens=4,
            completion_tokens=n,
            cumulative_logprob=None,
            logprobs=None,
            finish_reason="stop",
        )
        for n in lengths
    ]
    return Group(
        task={"task_id": "t", "domain": domain, "prompt": "1+0=", "answer": "1", "tests": None},
        bucket=UNIFORM_BUCKET,
        rnd=0,
        slot=0,
        seed=0,
        samples=samples,
        passed=list(passed),
    )


def test_default_reward_is_the_verifier_outcome_and_errors_count_zero():
    from types import SimpleNamespace

    from rldata.rewards.compose import RewardSpec
    from rldata.trainer.rollout import _rewards

    groups = [
        _group("math", [True, False, None, True], [2, 2, 3, 2]),
        _group("math", [False] * 4, [1, 2, 3, 4]),
    ]
    r = _rewards(SimpleNamespace(reward=RewardSpec(), judge=None), groups)  # [groups, G]
    assert r.tolist() == [[1.0, 0.0, 0.0, 1.0], [0.0] * 4]
    assert groups[0].composed["total"].to_list() == [1.0, 0.0, 0.0, 1.0]  # the error scores as a wrong answer
    assert groups[0].composed["vr_error"].to_list() == [False, False, True, False]  # and stays visible


def test_reward_spec_zscores_per_domain_over_the_round_then_penalizes_length():
    from types import SimpleNamespace

    import numpy as np

    from rldata.rewards.compose import DomainReward, LengthPenalty, RewardSpec
    from rldata.trainer.rollout import _rewards

    spec = RewardSpec(
        domains={
            "math": DomainReward(
                normalize=True, length_penalty=LengthPenalty(kind="linear", max_tokens=4, buffer=4, coef=0.5)
            )
        }
    )
    groups = [
        _group("math", [True, False, False, True], [1, 2, 3, 4]),
        _group("math", [False] * 4, [4] * 4),
        _group("text", [True, True, False, False], [1, 1, 1, 1]),
    ]
    r = _rewards(SimpleNamespace(reward=spec, judge=None), groups)
    x = np.array([1, 0, 0, 1, 0, 0, 0, 0], dtype=float)  # the math samples of the round, z-scored together
    z = (x - x.mean()) / (x.std() + 1e-6)
    pen = 0.5 * np.array([1, 2, 3, 4, 4, 4, 4, 4]) / 4
    assert r[:2].ravel() == pytest.approx(z - pen)
    assert r[2].tolist() == [1.0, 1.0, 0.0, 0.0]  # "text" uses the default: no z-score, no penalty
    # The all-wrong math group still has equal rewards (same z, same length): dynamic sampling drops it.
    assert len(set(r[1].tolist())) == 1


def test_an_error_never_beats_a_wrong_answer_under_normalize_and_length_penalty():
    # issue 12: pass/pass/error/fail under normalize gave the error the batch mean (0), above the fail
    from types import SimpleNamespace

    from rldata.rewards.compose import DomainReward, LengthPenalty, RewardSpec
    from rldata.trainer.rollout import _rewards

    lp = LengthPenalty(kind="overlong", max_tokens=8, buffer=4, coef=0.5)
    spec = RewardSpec(default=DomainReward(normalize=True, length_penalty=lp))
    groups = [_group("math", [True, True, None, False], [2, 2, 8, 8])]
    r = _rewards(SimpleNamespace(reward=spec, judge=None), groups)[0]
    assert r[2] == pytest.approx(r[3]) and r[3] < r[0]  # the error is exactly a long wrong answer
    assert groups[0].composed["length_penalty"][2] == 0.5  # the penalty applies to the error too


def test_dynamic_sampling_decides_on_correctness_and_keeps_the_composed_reward():
    from types import SimpleNamespace

    import numpy as np

    from rldata.rewards.compose import DomainReward, LengthPenalty, RewardSpec
    from rldata.trainer.advantages import compute_advantages
    from rldata.trainer.rollout import _rewards, set_advantages

    lp = LengthPenalty(kind="overlong", max_tokens=100, buffer=50, coef=0.01)
    spec = RewardSpec(default=DomainReward(length_penalty=lp))
    groups = [
        _group("math", [False] * 8, [1] * 7 + [100]),  # all wrong: [0 x7, -0.01]
        _group("math", [True] + [False] * 7, [1] * 7 + [100]),
    ]
    rewards = _rewards(SimpleNamespace(reward=spec, judge=None), groups)
    assert rewards[0].tolist() == pytest.approx([0.0] * 7 + [-0.01])
    adv = compute_advantages(rewards)
    set_advantages(groups, rewards, adv, dynamic_sampling=True)
    assert not groups[0].kept and groups[0].drop_reason == "zero_variance"  # no correctness signal
    assert groups[1].kept and np.allclose(groups[1].advantages, adv[1])  # advantage of the composed reward
    assert groups[1].advantages[7] < groups[1].advantages[1]  # the penalty still ranks the kept group
    off = [_group("math", [False] * 8, [1] * 8)]
    r_off = _rewards(SimpleNamespace(reward=spec, judge=None), off)
    set_advantages(off, r_off, compute_advantages(r_off), dynamic_sampling=False)
    assert off[0].kept


@pytest.mark.slow  # real math-verify in its child process, with one real 2 s timeout
def test_rewards_stay_with_their_samples_when_a_check_times_out_mid_batch():
    # other frameworks' one-slot shift: a failed check dropped from a positional list moves every
    # later reward onto the wrong sample
    from types import SimpleNamespace

    from rldata.engine.core import Sample
    from rldata.rewards.compose import RewardSpec
    from rldata.trainer.rollout import Group, _rewards, verify_groups

    texts = [r"\boxed{12}", r"\boxed{9^{9^{9^{9}}}}", r"\boxed{13}", "no idea", r"\boxed{12}", r"\boxed{11}"]
    samples = [
        Sample(
            text=t,
            token_ids=(5,) * 3,
            prompt_tokens=4,
            completion_tokens=3,
            cumulative_logprob=None,
            logprobs=None,
            finish_reason="stop",
        )
        for t in texts
    ]
    groups = [
        Group(
            task={"task_id": f"t{k}", "domain": "math", "prompt": "q", "answer": "12", "tests": None},
            bucket=UNIFORM_BUCKET,
            rnd=0,
            slot=k,
            seed=0,
            samples=samples[3 * k : 3 * k + 3],
            traj_ids=[f"t{k}/{i}" for i in range(3)],
        )
        for k in range(2)
    ]
    verify_groups(groups, lambda d: ("math", "v"), timeout_s=2)
    assert groups[0].passed == [True, None, False] and groups[1].passed == [False, True, False]
    assert "timeout" in groups[0].verdicts[1][0].error
    assert [v[0].extracted for g in groups for v in g.verdicts] == [
        "12",
        "9^{9^{9^{9}}}",
        "13",
        None,
        "12",
        "11",
    ]
    r = _rewards(SimpleNamespace(reward=RewardSpec(), judge=None), groups)
    assert r.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]  # the timeout scores as wrong, nothing shifts
    assert groups[1].composed["no_answer"].to_list() == [True, False, False]  # "no idea": a parse failure
    # the adversarial case: under normalize the timeout must not beat the wrong answer beside it
    from rldata.rewards.compose import DomainReward

    z = _rewards(SimpleNamespace(reward=RewardSpec(default=DomainReward(normalize=True)), judge=None), groups)
    assert z[0][1] == pytest.approx(z[0][2]) and z[0][1] < z[0][0]
    import polars as pl

    from rldata.rewards.compose import reward_metrics

    m = reward_metrics(pl.concat([g.composed for g in groups]))
    assert m["parse_fail/math"] == pytest.approx(1 / 6) and m["reward/n_error/math"] == 1.0
