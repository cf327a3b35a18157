"""Live pass-rate posteriors: updates and decay against hand-computed values, the Beta moments, the
live samplers' weights, skipping and re-probing, phases, and exact resume from the state dict."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from rldata.curriculum import Bucket, Curriculum, CurriculumSampler, Phase
from rldata.curriculum.live import (
    LiveConfig,
    LiveState,
    beta_variance,
    expected_group_variance,
    parse_pools,
    pool_weight,
    skip_probability,
)
from rldata.errors import ConfigError


def test_update_and_decay_by_hand():
    live = LiveState(LiveConfig(decay=0.5, prior="flat", age="version"))
    assert live.posterior("t") == (1.0, 1.0)  # never seen: flat
    live.update("t", version=0, passes=3, fails=1)
    assert live.posterior("t", 0) == (4.0, 2.0)
    # two versions later the evidence weighs 0.5 ** 2
    assert live.posterior("t", 2) == (1.0 + 3 * 0.25, 1.0 + 1 * 0.25)
    live.update("t", version=2, passes=1, fails=3)
    assert live.posterior("t", 2) == (1 + 0.75 + 1, 1 + 0.25 + 3)  # (2.75, 4.25)
    # a stale group (version 1 arrives after version 2's): its own discount, 0.5 ** (2 - 1)
    live.update("t", version=1, passes=2, fails=0)
    assert live.posterior("t", 2) == (3.75, 4.25)
    assert live.posterior("t", 3) == (1 + 2.75 * 0.5, 1 + 3.25 * 0.5)


def test_consumption_order_does_not_change_the_posterior():
    ev = [("t", 0, 3, 1), ("t", 2, 1, 3), ("t", 1, 2, 0), ("t", 4, 0, 8)]
    want = None
    for order in ([0, 1, 2, 3], [2, 0, 3, 1], [3, 2, 1, 0]):
        live = LiveState(LiveConfig(decay=0.5, prior="flat", age="version"))
        live.update_groups([ev[i] for i in order])
        got = live.posterior("t", 4)
        # the definition: a = 1 + sum w_e passes_e, w_e = decay ** (V - v_e)
        assert got == (1 + 3 / 16 + 1 / 4 + 2 / 8 + 0, 1 + 1 / 16 + 3 / 4 + 0 + 8)
        want = want or got
        assert got == want


def test_decay_one_keeps_everything_and_zero_keeps_the_newest_version():
    keep = LiveState(LiveConfig(decay=1.0, prior="flat", age="version"))
    newest = LiveState(LiveConfig(decay=0.0, prior="flat", age="version"))
    for live in (keep, newest):
        live.update_groups([("t", 0, 2, 2), ("t", 3, 1, 0), ("t", 1, 5, 5)])
    assert keep.posterior("t", 3) == (9.0, 8.0)
    assert newest.posterior("t", 3) == (2.0, 1.0)


def test_age_drawn_discounts_old_evidence_only_when_new_evidence_arrives():
    live = LiveState(LiveConfig(decay=0.5, prior_weight=0.5), prior={"t": (12, 4), "u": (0, 16)})
    assert live.config.age == "drawn"  # the default
    live.set_version(40)
    # undrawn for 40 versions: still the offline estimate (version aging would give ~Beta(1, 1))
    assert live.posterior("t") == (7.0, 3.0)
    assert live.posterior("u") == (1.0, 9.0)
    # drawn at version 2: the prior (version 0) weighs 0.5 ** 2 against the new group
    live.update("t", version=2, passes=0, fails=4)
    assert live.posterior("t") == (1 + 6 * 0.25, 1 + 2 * 0.25 + 4)
    # a stale group (version 1) after it: its own discount relative to the newest evidence
    live.update("t", version=1, passes=2, fails=0)
    assert live.posterior("t", 40) == (1 + 6 * 0.25 + 2 * 0.5, 1 + 2 * 0.25 + 4)
    # the same evidence under age: version decays all of it further by 0.5 ** (40 - 2)
    old = LiveState(LiveConfig(decay=0.5, prior_weight=0.5, age="version"), prior={"t": (12, 4)})
    old.update("t", version=2, passes=0, fails=4)
    old.update("t", version=1, passes=2, fails=0)
    a, b = old.posterior("t", 40)
    assert (a - 1, b - 1) == pytest.approx((2.5 * 0.5**38, 4.5 * 0.5**38))


def test_ledger_prior_is_version_zero_evidence():
    live = LiveState(
        LiveConfig(decay=0.5, prior_weight=0.5, age="version"), prior={"t": (12, 4), "z": (0, 0)}
    )
    assert live.posterior("t", 0) == (7.0, 3.0)
    assert live.posterior("t", 1) == (4.0, 2.0)
    assert live.posterior("z", 0) == (1.0, 1.0)  # no samples: flat
    flat = LiveState(LiveConfig(prior="flat"), prior={"t": (12, 4)})
    assert flat.posterior("t") == (1.0, 1.0)


def _beta_expectation(f, a, b, n=200_000):
    # midpoint rule against the Beta density: an independent check of the closed forms
    logc = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    h = 1.0 / n
    return sum(
        f(p) * math.exp(logc + (a - 1) * math.log(p) + (b - 1) * math.log(1 - p)) * h
        for p in ((i + 0.5) * h for i in range(n))
    )


@pytest.mark.parametrize("a,b", [(1.0, 1.0), (3.0, 7.0), (2.5, 1.25)])
def test_learnability_is_the_expected_bernoulli_variance(a, b):
    assert expected_group_variance(a, b) == pytest.approx(a * b / ((a + b) * (a + b + 1)))
    assert expected_group_variance(a, b) == pytest.approx(
        _beta_expectation(lambda p: p * (1 - p), a, b), rel=1e-4
    )
    mean = a / (a + b)
    assert beta_variance(a, b) == pytest.approx(_beta_expectation(lambda p: (p - mean) ** 2, a, b), rel=1e-4)
    assert expected_group_variance(1, 1) == 1 / 6  # flat prior: E[p(1-p)] = 1/2 - 1/3


def test_prime_rl_pools_are_the_defaults():
    pools = parse_pools(LiveConfig().pools)
    assert pools == ((0.25, 0.2), (0.75, 1.0), (1.0, 0.2))
    assert [pool_weight(m, pools) for m in (0.0, 0.25, 0.26, 0.5, 0.75, 0.76, 1.0)] == [
        0.2,
        0.2,
        1.0,
        1.0,
        1.0,
        0.2,
        0.2,
    ]
    for bad in ("0.5:1", "0.5:1,0.4:1,1:1", "0.5:0,1:1", "x", "0.5:1,1"):
        with pytest.raises(ConfigError):
            parse_pools(bad)


def test_skip_probability_grows_with_k_up_to_the_floor():
    got = [skip_probability(k, skip_p=0.5, floor=0.1) for k in range(6)]
    assert got == [0.0, 0.5, 0.75, 0.875, 0.9, 0.9]


@pytest.mark.parametrize(
    "bad",
    [
        {"decay": 1.5},
        {"decay": -0.1},
        {"floor": 0},
        {"skip_p": 0},
        {"prior": "x"},
        {"nope": 1},
        {"decay": True},
    ],
)
def test_bad_live_config_names_the_field(bad):
    with pytest.raises(ConfigError, match="live\\."):
        LiveConfig.from_dict(bad)


# ---- samplers --------------------------------------------------------------------------------------
TASKS = [f"t{i}" for i in range(6)]


def _sampler(mode, live, *, buckets=None, phases=None, seed=0):
    buckets = buckets or {"all": TASKS}
    cur = Curriculum(
        buckets=tuple(Bucket(b) for b in buckets),
        phases=phases or (Phase("p", {b: 1.0 for b in buckets}),),
        seed=seed,
    )
    return CurriculumSampler(cur, buckets, sampler=f"live:{mode}", live=live)


def _seed_posteriors(live):
    # t0: solved (mean ~0.95), t1: hopeless (~0.05), the others in the band (0.5)
    live.update("t0", version=0, passes=18, fails=0)
    live.update("t1", version=0, passes=0, fails=18)
    for t in TASKS[2:]:
        live.update(t, version=0, passes=4, fails=4)


def test_band_sampler_draws_by_pool_weight():
    live = LiveState(LiveConfig(decay=1.0, prior="flat"))
    _seed_posteriors(live)
    counts = Counter(t for t, _ in _sampler("band", live).next_batch(20_000))
    # weights 0.2, 0.2, 1, 1, 1, 1: t0 and t1 each 0.2 / 4.4 of the draws
    assert counts["t0"] / 20_000 == pytest.approx(0.2 / 4.4, abs=0.01)
    assert counts["t1"] / 20_000 == pytest.approx(0.2 / 4.4, abs=0.01)
    assert counts["t3"] / 20_000 == pytest.approx(1 / 4.4, abs=0.015)


def test_learnability_sampler_draws_by_expected_variance():
    live = LiveState(LiveConfig(decay=1.0, prior="flat"))
    _seed_posteriors(live)
    w = {t: expected_group_variance(*live.posterior(t)) for t in TASKS}
    counts = Counter(t for t, _ in _sampler("learnability", live).next_batch(20_000))
    for t in TASKS:
        assert counts[t] / 20_000 == pytest.approx(w[t] / sum(w.values()), abs=0.012), t
    stats = live.pop_draw_stats()
    assert 0 < stats["live/posterior_var_drawn"] < 1 / 12
    assert stats["live/skipped"] == 0 and live.pop_draw_stats()["live/posterior_var_drawn"] == 0.0


def test_skip_sampler_skips_zero_variance_tasks_but_reprobes_them():
    live = LiveState(LiveConfig(decay=1.0, prior="flat", skip_p=0.5, floor=0.1))
    for _ in range(6):  # t0: six all-correct groups in a row
        live.update("t0", version=0, passes=8, fails=0)
    live.update("t1", version=0, passes=0, fails=8)  # t1: one all-wrong group
    live.update("t2", version=0, passes=3, fails=5)
    s = _sampler("skip", live)
    draws = [t for t, _ in s.next_batch(6000)]
    counts = Counter(draws)
    # per pass over the 6 tasks, t0 survives with 0.1, t1 with 0.5, the others always
    assert counts["t0"] / counts["t3"] == pytest.approx(0.1, abs=0.03)
    assert counts["t1"] / counts["t3"] == pytest.approx(0.5, abs=0.05)
    stats = live.pop_draw_stats()
    assert stats["live/reprobed"] == counts["t0"] + counts["t1"]
    assert stats["live/skipped"] > 0
    # a group with variance ends the run: t0 is drawn like any other task again
    s.observe(0, {}, [("t0", 1, 5, 3)])
    assert live.zero_run("t0") == 0
    again = Counter(t for t, _ in s.next_batch(600))
    assert abs(again["t0"] - again["t3"]) <= 1  # once per pass over the shuffled tasks


def test_live_weights_choose_only_among_the_phase_tasks():
    buckets = {"easy": ["t0", "t1", "t2"], "hard": ["t3", "t4", "t5"]}
    phases = (Phase("warm", {"easy": 1.0}, until_step=2), Phase("main", {"easy": 0.5, "hard": 0.5}))
    for mode in ("band", "learnability", "skip"):
        live = LiveState(LiveConfig(prior="flat"))
        _seed_posteriors(live)
        s = _sampler(mode, live, buckets=buckets, phases=phases)
        first = s.next_batch(200) + s.next_batch(200)
        assert {b for _, b in first} == {"easy"} and {t for t, _ in first} <= set(buckets["easy"])
        later = s.next_batch(400)
        assert {b for _, b in later} == {"easy", "hard"}


@pytest.mark.parametrize("mode", ["band", "learnability", "skip"])
def test_resume_from_state_dict_draws_the_same(mode):
    def run(s, start, steps):
        out = []
        for step in range(start, start + steps):
            s.live.set_version(step)
            batch = s.next_batch(4)
            out.append(batch)
            # verdicts that depend on the draw: each task passes (index) of 4
            s.observe(step, {}, [(t, step, int(t[1:]) % 5, 4 - int(t[1:]) % 5) for t, _ in batch])
        return out

    full = run(_sampler(mode, LiveState(LiveConfig(decay=0.7), prior={"t2": (9, 7)}), seed=3), 0, 12)
    first = _sampler(mode, LiveState(LiveConfig(decay=0.7), prior={"t2": (9, 7)}), seed=3)
    head = run(first, 0, 5)
    state = json.loads(json.dumps(first.state_dict()))  # a checkpoint is plain JSON
    again = _sampler(mode, LiveState(LiveConfig(decay=0.7)), seed=3)  # the prior comes back from the state
    again.load_state_dict(state)
    assert again.live.state_dict() == first.live.state_dict()
    assert head + run(again, 5, 7) == full
