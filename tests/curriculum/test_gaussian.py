"""The gaussian sampler (Nemotron-style curriculum): the mean's schedule, the weights, fixed domain
shares, which pass rate a task is read at (live posterior, else ledger), the re-profile rule, and exact
resume from the state dict."""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from collections import Counter

import pytest

from rldata.curriculum import Bucket, Curriculum, CurriculumSampler, Phase, from_dict
from rldata.curriculum.gaussian import domain_quota, gaussian_weight, reprofile_due, target_rate
from rldata.curriculum.live import LiveConfig, LiveState
from rldata.errors import ConfigError


def test_the_mean_moves_linearly_from_start_to_end_over_the_run():
    kw = {"start": 0.8, "end": 0.2}
    assert target_rate(0, 11, **kw) == 0.8  # the first batch
    assert target_rate(5, 11, **kw) == pytest.approx(0.5)  # the middle
    assert target_rate(10, 11, **kw) == pytest.approx(0.2)  # the last (step 11)
    assert target_rate(25, 11, **kw) == pytest.approx(0.2)  # past the end: stays
    assert target_rate(0, 1, **kw) == 0.2
    assert [round(target_rate(s, 4, start=0.1, end=0.4), 6) for s in range(4)] == [0.1, 0.2, 0.3, 0.4]


def test_weight_is_the_gaussian_density_shape():
    assert gaussian_weight(0.5, 0.5, 0.1) == 1.0
    assert gaussian_weight(0.6, 0.5, 0.1) == pytest.approx(math.exp(-0.5))
    assert gaussian_weight(0.3, 0.5, 0.1) == pytest.approx(math.exp(-2))
    assert gaussian_weight(0.6, 0.5, 0.1) == pytest.approx(gaussian_weight(0.4, 0.5, 0.1))
    assert gaussian_weight(1.0, 0.0, 0.01) > 0  # never exactly 0: a far domain is drawn uniformly


def test_domain_quota_keeps_shares_exact_up_to_rounding():
    rng = random.Random(0)
    sizes = {"math": 60, "code": 30, "gym": 10}
    for k in (1, 3, 7, 10, 16, 33):
        q = domain_quota(k, sizes, rng)
        assert sum(q.values()) == k
        for d, n in sizes.items():
            assert math.floor(k * n / 100) <= q[d] <= math.ceil(k * n / 100), (k, d, q)
    # the leftover draws go where the fractions say: one draw over 1:2 picks code 2/3 of the time
    picks = Counter(d for _ in range(30_000) for d, c in domain_quota(1, {"a": 1, "b": 2}, rng).items() if c)
    assert picks["b"] / 30_000 == pytest.approx(2 / 3, abs=0.01)
    assert domain_quota(4, {"a": 3, "empty": 0}, rng) == {"a": 4}
    # two leftover draws over fractions 0.9, 0.9, 0.2: each domain's expected count is its share exactly
    # (drawing the leftovers one by one in proportion to the fractions would give c 0.26, not 0.2)
    sizes = {"a": 45, "b": 45, "c": 10}
    totals = Counter()
    for _ in range(30_000):
        q = domain_quota(2, sizes, rng)
        assert sum(q.values()) == 2 and max(q.values()) == 1
        totals.update(q)
    assert totals["c"] / 30_000 == pytest.approx(0.2, abs=0.01)
    assert totals["a"] / 30_000 == pytest.approx(0.9, abs=0.01)


def test_reprofile_is_due_after_k_evaluations_without_a_new_best():
    assert reprofile_due([0.3, 0.31, 0.30, 0.29, 0.30], 2) == [False, False, False, True, False]
    # the count restarts after a re-profile, and after every improvement
    accs = [0.3, 0.3, 0.3, 0.3, 0.3, 0.35, 0.34, 0.34]
    assert reprofile_due(accs, 2) == [False, False, True, False, True, False, False, True]
    assert reprofile_due(accs, 0) == [False] * len(accs)
    assert reprofile_due([0.5], 1) == [False]  # step 0's evaluation is the baseline


# ---- the sampler ------------------------------------------------------------------------------------
RATES = {f"t{i}": i / 10 for i in range(11)}  # offline pass rates 0.0 .. 1.0


def _sampler(*, cfg=None, prior=None, domains=None, steps=11, seed=0, buckets=None, phases=None):
    buckets = buckets or {"all": sorted(RATES)}
    cur = Curriculum(
        buckets=tuple(Bucket(b) for b in buckets),
        phases=phases or (Phase("p", {b: 1.0 for b in buckets}),),
        seed=seed,
        sampler="gaussian",
    )
    if prior is None:
        prior = {t: (round(16 * r), 16 - round(16 * r)) for t, r in RATES.items()}
    live = LiveState(cfg or LiveConfig(gauss_start=0.9, gauss_end=0.1, gauss_width=0.05), prior=prior)
    return CurriculumSampler(cur, buckets, live=live, domains=domains, total_steps=steps)


def test_draws_follow_the_moving_mean():
    s = _sampler()
    first = Counter(t for t, _ in s.next_batch(5000))
    assert s.live.pop_draw_stats()["live/target_rate"] == 0.9
    # rates 16*r rounded, read back as k/16: t9 = 14/16 = 0.875 sits nearest 0.9
    assert first.most_common(1)[0][0] == "t9" and first["t0"] + first["t1"] + first["t2"] == 0
    for _ in range(9):
        s.next_batch(1)
    last = Counter(t for t, _ in s.next_batch(5000))  # step 11 of 11: mean 0.1
    stats = s.live.pop_draw_stats()
    assert stats["live/target_rate"] == pytest.approx(0.1)
    assert last.most_common(1)[0][0] == "t1" and last["t9"] + last["t10"] == 0
    assert stats["live/rate_drawn"] == pytest.approx(0.1, abs=0.03)


def test_weights_match_the_gaussian():
    cfg = LiveConfig(gauss_start=0.5, gauss_end=0.5, gauss_width=0.2)
    prior = {t: (k, 10 - k) for t, k in zip(sorted(RATES), range(11))}  # t_i: i/10... by sorted name
    s = _sampler(cfg=cfg, prior=prior)
    n = 40_000
    counts = Counter(t for t, _ in s.next_batch(n))
    w = {t: gaussian_weight(s.live.rate(t), 0.5, 0.2) for t in prior}
    for t in prior:
        assert counts[t] / n == pytest.approx(w[t] / sum(w.values()), abs=0.01), t


def test_every_batch_keeps_the_domains_shares():
    domains = {t: ("code" if int(t[1:]) % 3 == 0 else "math") for t in RATES}  # 4 code, 7 math
    s = _sampler(domains=domains)
    for _ in range(11):
        batch = s.next_batch(11)
        by = Counter(domains[t] for t, _ in batch)
        assert by == {"code": 4, "math": 7}
    # a domain far from the mean still gets its share: all code tasks at rate 0 while the mean is 0.9
    far = {t: (0, 16) if domains[t] == "code" else (14, 2) for t in RATES}
    batch = _sampler(domains=domains, prior=far).next_batch(22)
    assert Counter(domains[t] for t, _ in batch) == {"code": 8, "math": 14}


def test_rate_is_the_posterior_once_drawn_else_the_ledger():
    live = LiveState(LiveConfig(prior="ledger", prior_weight=1.0), prior={"a": (4, 12), "b": (8, 8)})
    assert live.rate("a") == 0.25  # the ledger's k/n, not the prior-smoothed (1+4)/(2+16)
    assert live.rate("zz") == 0.5  # nothing known: Beta(1, 1)
    live.update("a", version=3, passes=8, fails=0)
    a, b = live.posterior("a")
    assert live.rate("a") == a / (a + b) and live.rate("a") > 0.25
    flat = LiveState(LiveConfig(prior="flat"), prior={"a": (4, 12)})
    assert flat.rate("a") == 0.25 and flat.posterior("a") == (1.0, 1.0)  # read by gaussian, no prior
    state = json.loads(json.dumps(live.state_dict()))
    again = LiveState(LiveConfig(prior="ledger"), prior={"a": (4, 12), "b": (8, 8)})
    again.load_state_dict(state)
    assert again.rate("a") == live.rate("a") and again.rate("b") == 0.5


def test_phases_pick_the_bucket_first():
    buckets = {"easy": ["t7", "t8", "t9", "t10"], "hard": ["t0", "t1", "t2", "t3"]}
    phases = (Phase("warm", {"easy": 1.0}, until_step=2), Phase("main", {"easy": 0.5, "hard": 0.5}))
    s = _sampler(buckets=buckets, phases=phases)
    first = s.next_batch(100) + s.next_batch(100)
    assert {b for _, b in first} == {"easy"} and {t for t, _ in first} <= set(buckets["easy"])
    assert {b for _, b in s.next_batch(400)} == {"easy", "hard"}


def test_resume_from_state_dict_draws_the_same():
    domains = {t: ("a" if int(t[1:]) < 5 else "b") for t in RATES}

    def run(s, start, steps):
        out = []
        for step in range(start, start + steps):
            s.live.set_version(step)
            batch = s.next_batch(5)
            out.append(batch)
            s.observe(step, {}, [(t, step, int(t[1:]) % 4, 3 - int(t[1:]) % 4) for t, _ in batch])
        return out

    full = run(_sampler(domains=domains, seed=3), 0, 11)
    first = _sampler(domains=domains, seed=3)
    head = run(first, 0, 4)
    state = json.loads(json.dumps(first.state_dict()))
    again = _sampler(domains=domains, seed=3)  # a resumed run rebuilds the ledger rates from the store
    again.load_state_dict(state)
    assert head + run(again, 4, 7) == full


def test_a_curriculum_file_may_name_it_and_settings_are_checked():
    cur = from_dict(
        {
            "buckets": [{"name": "all"}],
            "phases": [{"name": "p", "weights": {"all": 1}}],
            "sampler": "gaussian",
        }
    )
    assert cur.sampler == "gaussian"
    for bad in ({"gauss_start": 1.5}, {"gauss_width": 0}, {"reprofile_after": -1}, {"reprofile_n": 0}):
        with pytest.raises(ConfigError, match="live\\."):
            LiveConfig.from_dict(bad)


def test_mean_of_drawn_rates_tracks_the_schedule_over_a_run():
    s = _sampler(cfg=LiveConfig(gauss_start=0.8, gauss_end=0.2, gauss_width=0.1), steps=7)
    means = []
    for _ in range(7):
        s.next_batch(400)
        means.append(s.live.pop_draw_stats()["live/rate_drawn"])
    assert all(a > b for a, b in itertools.pairwise(means))
    assert statistics.fmean(means) == pytest.approx(0.5, abs=0.05)


def test_a_steps_replacement_draws_keep_its_mean():
    """Dynamic sampling draws replacements after next_batch counted the step: same target, not the next's."""
    from rldata.curriculum import SAMPLERS

    s = _sampler()
    s.next_batch(3)
    assert s.live.target == 0.9
    SAMPLERS["gaussian"](s, 2)  # what trainer.rollout.extra_draws calls
    assert s.live.target == 0.9
    s.next_batch(3)
    assert s.live.target == pytest.approx(0.82)


def test_a_task_without_ledger_rows_is_read_at_its_prediction():
    live = LiveState(
        LiveConfig(predicted=True), prior={"a": (4, 12)}, predicted={"b": (3.0, 1.0), "a": (1.0, 9.0)}
    )
    assert live.rate("a") == 0.25  # the ledger wins where there is a row
    assert live.rate("b") == pytest.approx(0.75)  # Beta(3, 1): the predicted mean
    assert LiveState(LiveConfig(predicted=False), predicted={"b": (3.0, 1.0)}).rate("b") == 0.5
