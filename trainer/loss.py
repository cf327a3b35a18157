"""The GRPO policy loss: decoupled PPO (a clipped ratio against the proximal policy, times a detached,
truncated behaviour weight), k3 KL to a reference, per-token or per-sequence aggregation.

Three policies meet here (decoupled PPO, as in AReaL):

- the behaviour policy generated the tokens (an engine, possibly some versions behind): ``behav_logp``;
- the proximal policy is the learner's weights the update starts from, scored by the learner:
  ``prox_logp`` (no gradient);
- the current policy ``logp`` is what the gradient moves.

    ratio   = pi_theta / pi_prox                       -- the PPO trust region (clipped)
    w       = min(pi_prox / pi_behav, behav_cap)        -- detached truncated importance weight (TIS)
    loss_t  = w * max(-A ratio, -A clip(ratio, 1 - eps_low, 1 + eps_high)) + kl_coef * k3

The behaviour weight corrects both staleness (async rollouts from older versions) and the numeric
mismatch between the engine and the learner; it is not clipped by the PPO range, so it must be
truncated, and it carries no gradient.  ``behav_weight=False`` sets w = 1 (plain PPO-clip on the
proximal ratio) while still reporting rho: an ablation, to measure what the correction buys.

All tensors are in "completion coordinates": row b is one sampled completion, column t one of its
tokens, and ``mask`` marks the real (non-padding) tokens.  Padded positions are replaced with
``where`` before any arithmetic, so an inf or NaN there can never reach the loss or a gradient
(``0 * inf`` is NaN; ``where`` is not).

``denom`` lets a distributed learner normalise by the GLOBAL size of the batch (the token count
over all ranks for ``agg="token"``, the sequence count for ``agg="sequence"``): each rank then
returns its share of one global mean, and the shares add up to what a single learner computes on
the whole batch.
"""

from __future__ import annotations

from typing import Literal

import torch

from rldata.errors import ConfigError
from rldata.trainer.config import AGGREGATIONS

__all__ = ["AGGREGATIONS", "KL_CLAMP", "behaviour_weight", "grpo_loss", "k3_kl"]

KL_CLAMP = 10.0  # cap of the per-token k3 value: one token far off the reference cannot dominate a step
_LOG_CLAMP = 20.0  # |log-ratio| bound before exp: exp(20) ~ 5e8 is finite in float32, exp(inf) is not


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: exp(d) - d - 1 with d = ref - logp (>= 0),
    clamped to [0, KL_CLAMP].  d is bounded first, so an infinite log-prob gives KL_CLAMP, not NaN."""
    d = (ref_logp - logp).clamp(-_LOG_CLAMP, _LOG_CLAMP)  # [B, T]
    return (torch.exp(d) - d - 1.0).clamp(0.0, KL_CLAMP)  # [B, T]


def behaviour_weight(
    prox_logp: torch.Tensor, behav_logp: torch.Tensor, cap: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(min(pi_prox / pi_behav, cap), pi_prox / pi_behav), both detached, [B, T]."""
    with torch.no_grad():
        rho = torch.exp((prox_logp - behav_logp).clamp(-_LOG_CLAMP, _LOG_CLAMP))  # [B, T]
        return rho.clamp(max=cap), rho


def grpo_loss(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
    behav_logp: torch.Tensor | None = None,
    behav_cap: float = 2.0,
    behav_weight: bool = True,
    kl_coef: float = 0.0,
    agg: Literal["token", "sequence"] = "token",
    denom: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The loss to minimise, and detached stats (masked means over this call's tokens).

    logp, prox_logp, ref_logp, behav_logp, mask: [B, T]; advantages: [B].  ``behav_logp`` None means
    the rollouts came from the proximal policy itself (weight 1); ``behav_weight=False`` ignores it in
    the loss (weight 1) but keeps it in the stats (ablation only).  ``ref_logp`` may be None only when
    ``kl_coef == 0``.  ``denom`` defaults to this batch's token count (``agg="token"``) or sequence
    count (``agg="sequence"``).
    """
    if agg not in AGGREGATIONS:
        raise ConfigError(f"agg must be one of {AGGREGATIONS}, got {agg!r}", field="agg")
    if kl_coef and ref_logp is None:
        raise ConfigError("kl_coef > 0 needs ref_logp", field="kl_coef")
    if behav_cap < 1.0:
        raise ConfigError(f"behav_cap must be >= 1, got {behav_cap}", field="behav_weight_cap")
    real = mask > 0  # [B, T] bool
    zero = torch.zeros((), dtype=logp.dtype)

    def clean(x: torch.Tensor) -> torch.Tensor:
        return torch.where(real, x, zero)  # [B, T]: padding -> 0 before any arithmetic

    logp, prox = clean(logp), clean(prox_logp.detach())  # [B, T]
    adv = advantages.to(logp.dtype).unsqueeze(1)  # [B, 1]
    ratio = torch.exp((logp - prox).clamp(-_LOG_CLAMP, _LOG_CLAMP))  # [B, T] pi_theta / pi_prox
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)  # [B, T]
    per_token = torch.maximum(-adv * ratio, -adv * clipped)  # [B, T] pessimistic surrogate
    if behav_logp is not None:
        w, rho = behaviour_weight(prox, clean(behav_logp), behav_cap)  # [B, T] each
        if behav_weight:
            per_token = w * per_token  # [B, T]
    else:
        rho = torch.ones_like(ratio)  # [B, T]
    kl = k3_kl(logp, clean(ref_logp)) if ref_logp is not None else torch.zeros_like(logp)  # [B, T]
    if kl_coef:
        per_token = per_token + kl_coef * kl  # [B, T]
    per_token = clean(per_token)  # [B, T]

    tokens = real.sum(dim=1).to(logp.dtype)  # [B]
    if agg == "token":
        total = per_token.sum()  # []
        n = tokens.sum() if denom is None else denom
    else:
        # Each sequence's own token mean, so long and short completions weigh the same.
        total = (per_token.sum(dim=1) / tokens.clamp(min=1.0)).sum()  # []
        n = torch.tensor(float(logp.shape[0])) if denom is None else denom
    loss = total / torch.as_tensor(n, dtype=logp.dtype).clamp(min=1.0)  # []

    with torch.no_grad():
        # A token is clipped when the clamp cut its gradient: ratio out of range on the side
        # the advantage pushes towards.  It is truncated when its behaviour weight hit the cap.
        is_clipped = real & (((ratio < 1.0 - eps_low) & (adv < 0)) | ((ratio > 1.0 + eps_high) & (adv > 0)))
        # Without the weight nothing is truncated; rho stays in the stats as the uncorrected mismatch.
        is_truncated = real & (rho > behav_cap) & behav_weight  # [B, T]
        count = tokens.sum().clamp(min=1.0)

        def mean(x: torch.Tensor) -> torch.Tensor:
            return clean(x.to(logp.dtype)).sum() / count

        stats = {
            "clip_frac": mean(is_clipped),
            "tis_frac": mean(is_truncated),
            "clip_or_tis_frac": mean(is_clipped | is_truncated),
            "kl": mean(kl),
            "ratio_mean": mean(ratio),
            "rho_mean": mean(rho),
            "rho_max": clean(rho).max() if real.any() else torch.ones((), dtype=logp.dtype),
            # KL(behaviour || proximal) by k3 on the behaviour's own samples: the engine/learner mismatch
            # (plus staleness in async mode).  0 when both score the tokens alike.
            "mismatch_kl": mean(k3_kl(clean(behav_logp), prox)) if behav_logp is not None else zero.clone(),
            "tokens": tokens.sum(),
        }
    return loss, stats
