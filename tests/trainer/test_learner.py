"""Learners: one rank in-process (gradient accumulation, direction of the update), and DDP across
W Ray actors giving the same update as one learner on the same global batch."""

from __future__ import annotations

import pytest
import torch
from trainer_helpers import make_rollouts

from rldata.trainer.config import TrainConfig
from rldata.trainer.learner import Learner, LearnerGroup, combine_stats, learner_threads
from rldata.trainer.policy import collate, token_logprobs


def _cfg(**kw):
    base = {"prompts_per_step": 4, "n": 4, "micro_batch": 16, "lr": LR, "max_grad_norm": 1.0}
    return TrainConfig(**{**base, **kw})


def _batch(seed, rows=16):
    p, c, o, a = make_rollouts(seed, rows=rows)
    return collate(p, c, advantages=a, old_logps=o)


LR = 1e-3


def _same_grads(a, b):
    """Gradients agree to float32 summation noise (they are sums over rows in a different order)."""
    assert [k for k, _ in a] == [k for k, _ in b]
    for (k, x), (_, y) in zip(a, b):
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-7), (k, float((x - y).abs().max()))


def _same_weights(a, b):
    """Parameters after the AdamW step.  Adam's step is ~ lr * g / (|g| + eps): on the few entries
    whose gradient is about eps (1e-8) it turns 1e-10 of gradient noise into up to lr * 1e-2 of
    parameter difference, so the bound is a fraction of one step (elsewhere the match is ~1e-9)."""
    assert [k for k, _ in a] == [k for k, _ in b]
    worst = max(float((x - y).abs().max()) for (_, x), (_, y) in zip(a, b))
    assert worst <= 2e-2 * LR, worst


@pytest.mark.parametrize("agg", ["token", "sequence"])
def test_gradient_accumulation_matches_one_pass(tiny_model_dir, agg):
    batch = _batch(0)
    one = Learner(tiny_model_dir, _cfg(agg=agg, micro_batch=16, kl_coef=0.1))
    acc = Learner(tiny_model_dir, _cfg(agg=agg, micro_batch=4, kl_coef=0.1))
    s1, s2 = combine_stats([one.step(batch)]), combine_stats([acc.step(batch)])
    _same_grads(one.get_grads(), acc.get_grads())
    _same_weights(one.get_weights(), acc.get_weights())
    assert s1["loss"] == pytest.approx(s2["loss"], abs=1e-6)
    assert s1["tokens"] == s2["tokens"] == float(batch.loss_mask.sum())
    assert s1["sequences"] == 16
    assert 0.0 <= s1["clip_frac"] <= 1.0 and s1["entropy"] > 0 and s1["kl"] == pytest.approx(0.0, abs=1e-6)


def test_update_raises_logprob_of_advantaged_completions(tiny_model_dir):
    p, c, _, _ = make_rollouts(3, rows=8)
    adv = [1.0] * 4 + [-1.0] * 4
    batch = collate(p, c, advantages=adv)  # on-policy: old log-probs = current ones
    lrn = Learner(tiny_model_dir, _cfg(prompts_per_step=2, micro_batch=8, lr=1e-2))

    def seq_logp():
        with torch.no_grad():
            lp, _ = token_logprobs(lrn.model, batch.input_ids, batch.attention_mask)
        return (lp * batch.loss_mask).sum(1)  # [8]

    before = seq_logp()
    stats = combine_stats([lrn.step(batch)])
    after = seq_logp()
    assert stats["ratio_mean"] == pytest.approx(1.0) and stats["clip_frac"] == 0.0
    assert (after[:4] > before[:4]).all() and (after[4:] < before[4:]).all()


def test_weights_are_hf_named_cpu_tensors(tiny_model_dir):
    lrn = Learner(tiny_model_dir, _cfg())
    w = dict(lrn.get_weights())
    assert "model.embed_tokens.weight" in w and "lm_head.weight" in w
    assert all(t.device.type == "cpu" and not t.requires_grad for t in w.values())
    flat = lrn.flat_weights()  # what the driver ships to the engines: the same tensors, one buffer
    assert [n for n, _ in flat] == list(w) and all(torch.equal(t, w[n]) for n, t in flat)


@pytest.mark.slow
@pytest.mark.ray
def test_ddp_two_learners_equal_one(train_ray, tiny_model_dir):
    """Same global batch, W=1 vs W=2 (gloo): same gradients and parameters after each step, and
    identical ranks.  Token-level aggregation (the global token denominator is the delicate part)
    with a KL term (a reference model on each rank); the per-sequence denominator takes the same
    path and is covered by the gradient-accumulation test above."""
    # Step 1: 16 rows split 8/8.  Step 2: 13 rows (a dynamic-sampling shortfall) split 7/6,
    # with micro-batches of 4: uneven shards, filler rows, gradient accumulation under no_sync.
    batches = [_batch(10), _batch(11, rows=13)]
    results = {}
    for w in (1, 2):
        cfg = _cfg(agg="token", kl_coef=0.1, num_learners=w, micro_batch=4)
        with LearnerGroup(tiny_model_dir, cfg, use_gpu=False) as group:
            assert len(set(group.pids)) == w  # one process per rank
            steps = []
            for b in batches:
                stats = group.step(b)
                steps.append((stats, group.get_grads(0), group.get_weights(0), group.get_weights(w - 1)))
            results[w] = steps
    for (s1, g1, w1, _), (s2, g2, w2a, w2b) in zip(results[1], results[2]):
        _same_grads(g1, g2)
        _same_weights(w1, w2a)
        assert all(torch.equal(x, y) for (_, x), (_, y) in zip(w2a, w2b))  # DDP keeps ranks in lockstep
        assert s1["loss"] == pytest.approx(s2["loss"], abs=1e-6)
        assert s1["tokens"] == s2["tokens"] and s1["sequences"] == s2["sequences"]
        assert s1["grad_norm"] == pytest.approx(s2["grad_norm"], rel=1e-5)
    # The update did something: weights moved away from the initial model.
    init = Learner(tiny_model_dir, _cfg()).get_weights()
    assert max(float((x - y).abs().max()) for (_, x), (_, y) in zip(init, results[2][-1][2])) > 1e-4


def test_proximal_logprobs_of_the_forward_equal_a_no_grad_pass(tiny_model_dir):
    """The learner takes the proximal log-probs as the detached log-probs of the update's own forward:
    one optimizer step per batch, so they are the weights the update starts from.  A separate no_grad
    pass on those weights gives bit-identical numbers."""
    batch = _batch(4)
    lrn = Learner(tiny_model_dir, _cfg())
    with torch.no_grad():
        nograd, _ = token_logprobs(lrn.model, batch.input_ids, batch.attention_mask, with_entropy=False)
    graded, _ = token_logprobs(lrn.model, batch.input_ids, batch.attention_mask)
    assert torch.equal(graded.detach(), nograd)


def test_behaviour_weight_stats_from_the_engine_logprobs(tiny_model_dir):
    """The batch's behaviour log-probs are ~log(1/32) +- 0.3 against a random model: rho spreads around 1,
    some tokens hit the cap C, and the mismatch KL is positive; with C = 1e9 nothing is truncated."""
    batch = _batch(5)
    s = combine_stats([Learner(tiny_model_dir, _cfg(behav_weight_cap=1.5)).step(batch)])
    assert s["ratio_mean"] == pytest.approx(1.0) and s["clip_frac"] == 0.0  # pi_theta = pi_prox at the start
    assert 0.0 < s["tis_frac"] < 1.0 and s["rho_max"] > 1.5 and s["mismatch_kl"] > 0.0
    assert s["clip_or_tis_frac"] == pytest.approx(s["tis_frac"])
    wide = combine_stats([Learner(tiny_model_dir, _cfg(behav_weight_cap=1e9)).step(batch)])
    assert wide["tis_frac"] == 0.0 and wide["rho_mean"] == pytest.approx(s["rho_mean"], rel=1e-6)
    assert wide["loss"] != pytest.approx(s["loss"], rel=1e-6)  # the cap changed the update


def test_behaviour_weight_off_updates_as_if_the_rollouts_were_on_policy(tiny_model_dir):
    """``behav_weight=False`` (ablation): the step ignores the engine's log-probs in the loss, so it
    gives the loss and gradients of the same batch without behaviour log-probs; with the default it
    does not, and rho is still reported."""
    p, c, o, a = make_rollouts(5, rows=16)
    weighted, unweighted = collate(p, c, advantages=a, old_logps=o), collate(p, c, advantages=a)
    off = Learner(tiny_model_dir, _cfg(behav_weight=False))
    s_off = combine_stats([off.step(weighted)])
    ref = Learner(tiny_model_dir, _cfg())
    s_ref = combine_stats([ref.step(unweighted)])
    assert s_off["loss"] == pytest.approx(s_ref["loss"], rel=1e-6)
    _same_grads(off.get_grads(), ref.get_grads())
    assert s_off["rho_mean"] != pytest.approx(1.0) and s_off["tis_frac"] == 0.0
    on = combine_stats([Learner(tiny_model_dir, _cfg()).step(weighted)])
    assert on["loss"] != pytest.approx(s_off["loss"], rel=1e-6)


def test_learner_threads_take_the_idle_engines_cores_in_sync_mode_only():
    sync, asyn = TrainConfig(), TrainConfig(mode="async")
    assert learner_threads(sync, cores=8) == 8  # the engines wait during a sync update
    assert learner_threads(TrainConfig(num_learners=2), cores=8) == 4  # shared by the node's learners
    assert learner_threads(TrainConfig(num_learners=4), cores=2) == 1
    assert learner_threads(asyn, cores=8) == 1  # async: the engines generate meanwhile
    assert learner_threads(TrainConfig(mode="async", cpus_per_learner=3), cores=8) == 3
    assert learner_threads(TrainConfig(learner_threads=2), cores=8) == 2  # set: as given, either mode
    assert learner_threads(TrainConfig(mode="async", learner_threads=2), cores=8) == 2
