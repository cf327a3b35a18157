"""grpo_loss: hand-computed values, clip boundaries, aggregation, KL, gradients vs autograd/closed form."""

from __future__ import annotations

import math

import pytest
import torch

from rldata.trainer.loss import grpo_loss, k3_kl

EPS_LOW, EPS_HIGH = 0.2, 0.28  # clip range [0.8, 1.28]


def _case():
    """Two completions; old_logp = 0 so the ratio is exp(logp) and easy to read."""
    ratios = torch.tensor([[1.0, 1.5, 0.5], [1.1, 0.7, 2.0]], dtype=torch.float64)
    logp = ratios.log()
    old = torch.zeros_like(logp)
    adv = torch.tensor([1.0, -2.0], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.float64)
    return logp, old, adv, mask


def test_known_values_token_aggregation():
    logp, old, adv, mask = _case()
    loss, stats = grpo_loss(logp, old, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH)
    # row 0 (A=+1): -1, -min(1.5, 1.28), -0.5 ; row 1 (A=-2): 2*1.1, 2*max(0.7, 0.8), masked
    expected = (-1.0 - 1.28 - 0.5 + 2.2 + 1.6) / 5
    assert loss.item() == pytest.approx(expected, abs=1e-12)
    assert stats["clip_frac"].item() == pytest.approx(2 / 5)  # row0 t1 (high), row1 t1 (low)
    assert stats["ratio_mean"].item() == pytest.approx((1 + 1.5 + 0.5 + 1.1 + 0.7) / 5)
    assert stats["tokens"].item() == 5
    assert stats["kl"].item() == 0.0


def test_known_values_sequence_aggregation_differs():
    logp, old, adv, mask = _case()
    tok, _ = grpo_loss(logp, old, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, agg="token")
    seq, _ = grpo_loss(logp, old, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, agg="sequence")
    expected = ((-1.0 - 1.28 - 0.5) / 3 + (2.2 + 1.6) / 2) / 2
    assert seq.item() == pytest.approx(expected, abs=1e-12)
    assert tok.item() != pytest.approx(seq.item())
    # Equal lengths: the two aggregations coincide.
    full = torch.ones_like(mask)
    a, _ = grpo_loss(logp, old, None, adv, full, eps_low=EPS_LOW, eps_high=EPS_HIGH, agg="token")
    b, _ = grpo_loss(logp, old, None, adv, full, eps_low=EPS_LOW, eps_high=EPS_HIGH, agg="sequence")
    assert a.item() == pytest.approx(b.item(), abs=1e-12)


def test_padding_values_do_not_matter():
    logp, old, adv, mask = _case()
    a, _ = grpo_loss(logp, old, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH)
    logp2 = logp.clone()
    logp2[1, 2] = 50.0  # a masked position
    b, _ = grpo_loss(logp2, old, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH)
    assert a.item() == b.item()


def test_k3_kl_known_values():
    logp = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    ref = torch.tensor([[math.log(2.0), 0.0]], dtype=torch.float64)
    kl = k3_kl(logp, ref)
    assert kl[0, 0].item() == pytest.approx(2.0 - math.log(2.0) - 1.0, abs=1e-12)
    assert kl[0, 1].item() == 0.0
    assert (k3_kl(torch.randn(4, 5), torch.randn(4, 5)) >= 0).all()


def test_kl_term_adds_coef_times_k3():
    logp, old, adv, mask = _case()
    ref = logp + math.log(2.0)  # d = ln 2 on every token
    base, _ = grpo_loss(logp, old, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH)
    with_kl, stats = grpo_loss(logp, old, ref, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, kl_coef=0.1)
    k3 = 2.0 - math.log(2.0) - 1.0
    assert with_kl.item() == pytest.approx(base.item() + 0.1 * k3, abs=1e-12)
    assert stats["kl"].item() == pytest.approx(k3, abs=1e-12)


def test_kl_coef_zero_ignores_ref():
    logp, old, adv, mask = _case()
    a, _ = grpo_loss(logp, old, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, kl_coef=0.0)
    b, _ = grpo_loss(logp, old, logp + 3.0, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, kl_coef=0.0)
    assert a.item() == b.item()
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(logp, old, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, kl_coef=0.1)
    with pytest.raises(ValueError, match="agg"):
        grpo_loss(logp, old, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, agg="batch")


def _grad_one(ratio: float, adv: float) -> float:
    """d loss / d logp for a single token with old_logp = 0."""
    logp = torch.tensor([[math.log(ratio)]], dtype=torch.float64, requires_grad=True)
    loss, _ = grpo_loss(
        logp,
        torch.zeros(1, 1, dtype=torch.float64),
        None,
        torch.tensor([adv], dtype=torch.float64),
        torch.ones(1, 1),
        eps_low=EPS_LOW,
        eps_high=EPS_HIGH,
    )
    loss.backward()
    return logp.grad.item()


@pytest.mark.parametrize("adv", [1.0, -1.0])
def test_clip_boundaries(adv):
    d = 1e-3
    hi, lo = 1.0 + EPS_HIGH, 1.0 - EPS_LOW
    if adv > 0:
        # Positive advantage: the gradient stops just above 1 + eps_high, flows below 1 - eps_low.
        assert _grad_one(hi - d, adv) == pytest.approx(-adv * (hi - d))
        assert _grad_one(hi + d, adv) == 0.0
        assert _grad_one(lo - d, adv) == pytest.approx(-adv * (lo - d))
    else:
        # Negative advantage: it stops just below 1 - eps_low, flows above 1 + eps_high.
        assert _grad_one(lo + d, adv) == pytest.approx(-adv * (lo + d))
        assert _grad_one(lo - d, adv) == 0.0
        assert _grad_one(hi + d, adv) == pytest.approx(-adv * (hi + d))


def test_clip_higher_is_asymmetric():
    # ratio 1.25 is inside [0.8, 1.28] (clip-higher) but outside a symmetric [0.8, 1.2].
    assert _grad_one(1.25, 1.0) != 0.0
    logp = torch.tensor([[math.log(1.25)]], dtype=torch.float64, requires_grad=True)
    loss, stats = grpo_loss(
        logp,
        torch.zeros(1, 1, dtype=torch.float64),
        None,
        torch.tensor([1.0], dtype=torch.float64),
        torch.ones(1, 1),
        eps_low=0.2,
        eps_high=0.2,
    )
    loss.backward()
    assert logp.grad.item() == 0.0 and stats["clip_frac"].item() == 1.0


def _random_inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    B, T = 4, 6
    old = torch.randn(B, T, generator=g, dtype=torch.float64) - 2.0
    # Ratios spread over [0.5, 1.6], kept clear of the clip edges (gradcheck needs smoothness).
    r = torch.empty(B, T, dtype=torch.float64).uniform_(0.5, 1.6, generator=g)
    r = torch.where((r - 0.8).abs() < 0.03, r + 0.06, r)
    r = torch.where((r - 1.28).abs() < 0.03, r + 0.06, r)
    logp = (old + r.log()).requires_grad_(True)
    ref = (old + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)).requires_grad_(True)
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    mask = torch.ones(B, T, dtype=torch.float64)
    mask[0, 4:] = 0
    mask[2, 1:] = 0
    return logp, old, ref, adv, mask


@pytest.mark.parametrize("agg", ["token", "sequence"])
@pytest.mark.parametrize("kl_coef", [0.0, 0.05])
def test_gradcheck_float64(agg, kl_coef):
    logp, old, ref, adv, mask = _random_inputs(0)

    def f(lp, rf):
        loss, _ = grpo_loss(
            lp, old, rf, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, kl_coef=kl_coef, agg=agg
        )
        return loss

    assert torch.autograd.gradcheck(f, (logp, ref), eps=1e-6, atol=1e-8)


def test_gradient_matches_closed_form():
    logp, old, ref, adv, mask = _random_inputs(1)
    kl_coef = 0.05
    loss, _ = grpo_loss(logp, old, ref, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, kl_coef=kl_coef)
    loss.backward()
    with torch.no_grad():
        r = torch.exp(logp - old)
        a = adv[:, None]
        live = ~(((r > 1 + EPS_HIGH) & (a > 0)) | ((r < 1 - EPS_LOW) & (a < 0)))
        # d/dlogp of -A r is -A r (unclipped tokens only); of k3 is 1 - exp(ref - logp).
        expected = (-a * r * live + kl_coef * (1 - torch.exp(ref - logp))) * mask / mask.sum()
    assert torch.allclose(logp.grad, expected, atol=1e-12)
    assert (logp.grad[mask == 0] == 0).all()


@pytest.mark.parametrize("agg", ["token", "sequence"])
def test_global_denominator_makes_shards_add_up(agg):
    """What a DDP learner relies on: shard losses with the global denominator sum to the full loss."""
    logp, old, ref, adv, mask = _random_inputs(2)
    full, _ = grpo_loss(logp, old, ref, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH, kl_coef=0.1, agg=agg)
    denom = mask.sum() if agg == "token" else float(mask.shape[0])
    parts = [
        grpo_loss(
            logp[s],
            old[s],
            ref[s],
            adv[s],
            mask[s],
            eps_low=EPS_LOW,
            eps_high=EPS_HIGH,
            kl_coef=0.1,
            agg=agg,
            denom=denom,
        )[0]
        for s in (slice(0, 1), slice(1, 4))
    ]
    assert (parts[0] + parts[1]).item() == pytest.approx(full.item(), abs=1e-12)


# --- decoupled PPO: proximal ratio and truncated behaviour weight ---------------------------------
def test_behaviour_weight_scales_the_surrogate_and_is_truncated_at_the_cap():
    """Hand-computed: pi_theta/pi_prox = (1.0, 1.5 -> clipped 1.28, 0.5); pi_prox/pi_behav = (0.5, 1.5, 4.0 -> cap 2)."""
    logp, prox, adv, mask = _case()
    behav = prox - torch.tensor(
        [[math.log(0.5), math.log(1.5), math.log(4.0)], [0.0, math.log(3.0), 0.0]], dtype=torch.float64
    )
    loss, st = grpo_loss(
        logp, prox, None, adv, mask, behav_logp=behav, behav_cap=2.0, eps_low=EPS_LOW, eps_high=EPS_HIGH
    )
    # row 0 (A=+1): 0.5 * -1, 1.5 * -1.28, 2 * -0.5 ; row 1 (A=-2): 1 * 2.2, 2 * 1.6 (rho 3 truncated), masked
    expected = (-0.5 - 1.5 * 1.28 - 2 * 0.5 + 2.2 + 2 * 1.6) / 5
    assert loss.item() == pytest.approx(expected, abs=1e-12)
    assert st["rho_mean"].item() == pytest.approx((0.5 + 1.5 + 4.0 + 1.0 + 3.0) / 5)
    assert st["rho_max"].item() == pytest.approx(4.0)
    assert st["tis_frac"].item() == pytest.approx(2 / 5)  # rho 4 and rho 3
    assert st["clip_frac"].item() == pytest.approx(2 / 5)
    assert st["clip_or_tis_frac"].item() == pytest.approx(3 / 5)  # row 1 t1 is both
    # the ratio is against the proximal policy, not the behaviour policy
    assert st["ratio_mean"].item() == pytest.approx((1 + 1.5 + 0.5 + 1.1 + 0.7) / 5)
    k3 = [r - math.log(r) - 1 for r in (0.5, 1.5, 4.0, 1.0, 3.0)]  # k3 of KL(behav || prox) per token
    assert st["mismatch_kl"].item() == pytest.approx(sum(k3) / 5, abs=1e-12)


def test_behaviour_weight_off_is_plain_ppo_clip_on_the_proximal_ratio():
    """The ablation switch: with ``behav_weight=False`` the same batch (rho = 0.5, 1.5, 4, 1, 3) gives
    the unweighted PPO-clip surrogate on pi_theta / pi_prox, and its gradient; rho is still reported,
    nothing counts as truncated.  With the switch on, the same inputs give the weighted loss."""
    _, prox, adv, mask = _case()
    logp = _case()[0].clone().requires_grad_(True)
    behav = prox - torch.tensor(
        [[math.log(0.5), math.log(1.5), math.log(4.0)], [0.0, math.log(3.0), 0.0]], dtype=torch.float64
    )
    kw = {"behav_logp": behav, "behav_cap": 2.0, "eps_low": EPS_LOW, "eps_high": EPS_HIGH}
    off, st = grpo_loss(logp, prox, None, adv, mask, behav_weight=False, **kw)
    # row 0 (A=+1): -1, -min(1.5, 1.28), -0.5 ; row 1 (A=-2): 2 * 1.1, 2 * max(0.7, 0.8), masked
    plain = (-1.0 - 1.28 - 0.5 + 2.2 + 1.6) / 5
    assert off.item() == pytest.approx(plain, abs=1e-12)
    off.backward()
    # d/dlogp of -A r is -A r where the clip does not bind, 0 where it does (row 0 t1, row 1 t1)
    grad = torch.tensor([[-1.0, 0.0, -0.5], [2.2, 0.0, 0.0]], dtype=torch.float64) / 5
    assert torch.allclose(logp.grad, grad, atol=1e-12)
    assert st["rho_mean"].item() == pytest.approx((0.5 + 1.5 + 4.0 + 1.0 + 3.0) / 5)
    assert st["tis_frac"].item() == 0.0 and st["clip_or_tis_frac"].item() == pytest.approx(2 / 5)
    on, _ = grpo_loss(logp, prox, None, adv, mask, **kw)  # the default: behav_weight=True
    assert on.item() == pytest.approx((-0.5 - 1.5 * 1.28 - 2 * 0.5 + 2.2 + 2 * 1.6) / 5, abs=1e-12)
    assert on.item() != pytest.approx(plain, abs=1e-6)


def test_behaviour_weight_carries_no_gradient():
    logp = torch.tensor([[math.log(1.1)]], dtype=torch.float64, requires_grad=True)
    prox = torch.zeros(1, 1, dtype=torch.float64, requires_grad=True)
    behav = torch.tensor([[math.log(1 / 1.5)]], dtype=torch.float64, requires_grad=True)  # rho = 1.5
    loss, _ = grpo_loss(
        logp,
        prox,
        None,
        torch.tensor([1.0], dtype=torch.float64),
        torch.ones(1, 1),
        behav_logp=behav,
        eps_low=EPS_LOW,
        eps_high=EPS_HIGH,
    )
    loss.backward()
    assert logp.grad.item() == pytest.approx(-1.5 * 1.1)  # w * d(-A r)/dlogp = -w A r
    assert prox.grad is None and behav.grad is None


def test_without_behaviour_logp_the_weight_is_one():
    logp, prox, adv, mask = _case()
    a, sa = grpo_loss(logp, prox, None, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH)
    b, sb = grpo_loss(
        logp, prox, None, adv, mask, behav_logp=prox.clone(), eps_low=EPS_LOW, eps_high=EPS_HIGH
    )
    assert a.item() == pytest.approx(b.item(), abs=1e-15)
    assert sa["rho_mean"].item() == sb["rho_mean"].item() == 1.0 and sb["mismatch_kl"].item() == 0.0
    with pytest.raises(ValueError, match="behav_cap"):
        grpo_loss(
            logp, prox, None, adv, mask, behav_logp=prox, behav_cap=0.5, eps_low=EPS_LOW, eps_high=EPS_HIGH
        )


# --- padding and the KL clamp ---------------------------------------------------------------------
@pytest.mark.parametrize("bad", [-math.inf, math.inf, math.nan])
def test_a_non_finite_value_at_a_padded_position_never_becomes_nan(bad):
    """Multiplying by the mask would give 0 * inf = NaN in the loss (k3 of -inf is inf - inf) and in
    the gradient; masking with ``where`` keeps both exact."""
    logp, prox, adv, mask = _case()
    ref = logp + 0.1
    clean, _ = grpo_loss(
        logp, prox, ref, adv, mask, behav_logp=prox, kl_coef=0.1, eps_low=EPS_LOW, eps_high=EPS_HIGH
    )
    lp = logp.clone()
    lp[1, 2] = bad  # row 1, t 2 is padding
    lp.requires_grad_(True)
    behav, rf = prox.clone(), ref.clone()
    behav[1, 2], rf[1, 2] = bad, bad
    loss, st = grpo_loss(
        lp, prox, rf, adv, mask, behav_logp=behav, kl_coef=0.1, eps_low=EPS_LOW, eps_high=EPS_HIGH
    )
    loss.backward()
    assert loss.item() == pytest.approx(clean.item(), abs=1e-12)
    assert torch.isfinite(lp.grad).all() and lp.grad[1, 2].item() == 0.0
    assert all(torch.isfinite(v).all() for v in st.values())


def test_k3_is_clamped_and_finite_for_infinite_log_probs():
    from rldata.trainer.loss import KL_CLAMP

    logp = torch.tensor([[0.0, 0.0, -math.inf, 0.0]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[100.0, -100.0, 0.0, 0.5]], dtype=torch.float64)
    kl = k3_kl(logp, ref)
    assert kl[0, :3].tolist() == [KL_CLAMP] * 3  # exp(100) and -inf would be inf / NaN unclamped
    assert kl[0, 3].item() == pytest.approx(math.exp(0.5) - 0.5 - 1.0, abs=1e-12)
    kl.sum().backward()
    assert torch.isfinite(logp.grad).all()
    assert logp.grad[0, 3].item() == pytest.approx(1 - math.exp(0.5), abs=1e-12)  # unclamped: the k3 gradient
