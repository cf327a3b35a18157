"""CurriculumSampler: deterministic for a seed, exact resume from state_dict, phases, promotion, samplers."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from rldata.curriculum import SAMPLERS, Bucket, Curriculum, CurriculumSampler, Phase, Promotion
from rldata.errors import RldataError

BUCKETS = (Bucket("easy", 0.7, 0.9), Bucket("medium", 0.4, 0.7), Bucket("hard", 0.1, 0.4))
TASKS = {
    "easy": [f"e{i}" for i in range(7)],
    "medium": [f"m{i}" for i in range(11)],
    "hard": [f"h{i}" for i in range(13)],
}


def _curriculum(**kw):
    phases = (
        Phase("warmup", {"easy": 1.0}, until_step=3),
        Phase("main", {"easy": 0.3, "medium": 0.7}, promote_when=Promotion("medium", 0.6, window=2)),
        Phase("hard", {"medium": 0.5, "hard": 0.5}),
    )
    return Curriculum(buckets=BUCKETS, phases=phases, **kw)


def _run(sampler, steps, *, start=0, k=8):
    """Draw ``steps`` batches; feed an accuracy that crosses the promotion threshold at step 6."""
    out = []
    for step in range(start, start + steps):
        out.append((sampler.phase.name, sampler.next_batch(k)))
        sampler.observe(step, {"medium": 0.9 if step >= 5 else 0.2, "easy": 0.5})
    return out


def test_deterministic_for_a_seed_and_seed_matters():
    a = _run(CurriculumSampler(_curriculum(), TASKS), 12)
    b = _run(CurriculumSampler(_curriculum(), {k: list(reversed(v)) for k, v in TASKS.items()}), 12)
    c = _run(CurriculumSampler(_curriculum(), TASKS, seed=1), 12)
    assert a == b  # input order does not matter, only the task sets and the seed
    assert a != c


def test_resume_from_state_dict_continues_exactly():
    full = _run(CurriculumSampler(_curriculum(seed=5), TASKS), 15)
    for cut in (1, 3, 4, 7, 11):  # before, at and after each phase change
        first = CurriculumSampler(_curriculum(seed=5), TASKS)
        head = _run(first, cut)
        state = json.loads(json.dumps(first.state_dict()))  # a checkpoint is plain JSON
        resumed = CurriculumSampler(_curriculum(seed=5), TASKS)
        resumed.load_state_dict(state)
        assert head + _run(resumed, 15 - cut, start=cut) == full, cut


def test_phases_by_steps_then_by_promotion():
    run = _run(CurriculumSampler(_curriculum(), TASKS), 10)
    phases = [p for p, _ in run]
    # warmup until step 3; main until medium's accuracy over 2 steps >= 0.6 (observed at steps 5, 6)
    assert phases == ["warmup"] * 3 + ["main"] * 4 + ["hard"] * 3
    for phase, batch in run:
        allowed = {"warmup": {"easy"}, "main": {"easy", "medium"}, "hard": {"medium", "hard"}}[phase]
        assert {b for _, b in batch} <= allowed
        assert all(t in TASKS[b] for t, b in batch)


def test_promotion_needs_a_full_window_and_resets():
    cur = Curriculum(
        buckets=BUCKETS,
        phases=(
            Phase("a", {"easy": 1}, promote_when=Promotion("easy", 0.8, window=3)),
            Phase("b", {"hard": 1}),
        ),
    )
    s = CurriculumSampler(cur, TASKS)
    assert not s.observe(0, {"easy": 1.0}) and not s.observe(1, {"easy": 1.0})
    assert not s.observe(2, {"hard": 1.0})  # steps without the bucket do not count
    assert s.observe(3, {"easy": 0.5}) and s.phase.name == "b"  # mean(1, 1, 0.5) = 0.83 >= 0.8
    with pytest.raises(RldataError, match="steps must increase"):
        s.observe(3, {"easy": 1.0})
    with pytest.raises(RldataError, match="unknown bucket"):
        s.observe(4, {"nope": 1.0})
    with pytest.raises(RldataError, match=r"in \[0, 1\]"):
        s.observe(5, {"easy": 1.5})


def test_each_bucket_is_visited_as_a_permutation_per_epoch():
    cur = Curriculum(buckets=BUCKETS, phases=(Phase("only", {"hard": 1}),))
    s = CurriculumSampler(cur, TASKS)
    drawn = [t for _ in range(4) for t, _ in s.next_batch(13)]
    epochs = [drawn[i : i + 13] for i in range(0, 52, 13)]
    assert all(sorted(e) == sorted(TASKS["hard"]) for e in epochs)
    assert epochs[0] != epochs[1]  # a fresh shuffle each epoch


def test_mixture_follows_the_weights():
    cur = Curriculum(buckets=BUCKETS, phases=(Phase("p", {"easy": 0.2, "hard": 0.8}),))
    s = CurriculumSampler(cur, TASKS)
    counts = Counter(b for _ in range(50) for _, b in s.next_batch(40))
    assert set(counts) == {"easy", "hard"}
    assert 0.75 < counts["hard"] / 2000 < 0.85


def test_empty_weighted_buckets_are_skipped_and_all_empty_is_an_error():
    cur = Curriculum(buckets=BUCKETS, phases=(Phase("p", {"easy": 0.5, "medium": 0.5}),))
    s = CurriculumSampler(cur, {"easy": [], "medium": ["m0"], "hard": ["h0"]})
    assert {b for _, b in s.next_batch(10)} == {"medium"}
    s = CurriculumSampler(cur, {"hard": ["h0"]})
    with pytest.raises(RldataError, match="every bucket with a positive weight is empty"):
        s.next_batch(1)


def test_uniform_sampler_ignores_buckets():
    assert {"mixture", "uniform"} <= set(SAMPLERS)
    s = CurriculumSampler(_curriculum(), TASKS, sampler="uniform")
    everything = {(t, b) for b, ts in TASKS.items() for t in ts}
    first_epoch = [d for _ in range(31) for d in s.next_batch(1)]
    assert set(first_epoch) == everything and len(first_epoch) == 31


def test_state_from_other_tasks_or_seed_is_refused():
    s = CurriculumSampler(_curriculum(), TASKS)
    s.next_batch(4)
    state = s.state_dict()
    other = CurriculumSampler(_curriculum(), {**TASKS, "hard": TASKS["hard"][:-1]})
    with pytest.raises(RldataError, match="tasks"):
        other.load_state_dict(state)
    with pytest.raises(RldataError, match="seed"):
        CurriculumSampler(_curriculum(), TASKS, seed=9).load_state_dict(state)


def test_constructor_errors():
    with pytest.raises(RldataError, match="unknown bucket"):
        CurriculumSampler(_curriculum(), {"nope": ["x"]})
    with pytest.raises(RldataError, match="no tasks"):
        CurriculumSampler(_curriculum(), {})
    with pytest.raises(RldataError, match="unknown sampler"):
        CurriculumSampler(_curriculum(), TASKS, sampler="magic")


def test_a_weak_model_still_advances_through_a_default_curriculum():
    # issue 12: phase 0 waited for a mean accuracy >= 0.9 (the easy bucket's upper edge) forever
    from rldata.curriculum import default_phases

    cur = Curriculum(buckets=BUCKETS, phases=default_phases(BUCKETS, window=2, max_phase_steps=5))
    s = CurriculumSampler(cur, TASKS, seed=0)
    seen = []
    for step in range(12):
        seen.append(s.phase.name)
        s.next_batch(4)
        s.observe(step, {"easy": 0.3, "medium": 0.1, "hard": 0.0})  # never near any promotion threshold
    assert seen == ["easy"] * 5 + ["medium"] * 5 + ["hard"] * 2
