"""The GRPO policy loss: clipped importance ratio (DAPO clip-higher), k3 KL to a reference, and
per-token or per-sequence aggregation.

All tensors are in "completion coordinates": row b is one sampled completion, column t one of its
tokens, and ``mask`` marks the real (non-padding) tokens.

``denom`` lets a distributed learner normalise by the GLOBAL size of the batch (the token count
over all ranks for ``agg="token"``, the sequence count for ``agg="sequence"``): each rank then
returns its share of one global mean, and the shares add up to what a single learner computes on
the whole batch.
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["AGGREGATIONS", "grpo_loss", "k3_kl"]

AGGREGATIONS = ("token", "sequence")


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: exp(d) - d - 1 with d = ref - logp (>= 0)."""
    d = ref_logp - logp  # [B, T]
    return torch.exp(d) - d - 1.0  # [B, T]


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
    kl_coef: float = 0.0,
    agg: Literal["token", "sequence"] = "token",
    denom: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The loss to minimise, and detached stats (masked means over this call's tokens).

    logp, old_logp, ref_logp, mask: [B, T]; advantages: [B].  ``ref_logp`` may be None only when
    ``kl_coef == 0`` (no reference model is needed then).  ``denom`` defaults to this batch's
    token count (``agg="token"``) or sequence count (``agg="sequence"``).
    """
    if agg not in AGGREGATIONS:
        raise ValueError(f"agg must be one of {AGGREGATIONS}, got {agg!r}")
    if kl_coef and ref_logp is None:
        raise ValueError("kl_coef > 0 needs ref_logp")
    mask = mask.to(logp.dtype)  # [B, T]
    adv = advantages.to(logp.dtype).unsqueeze(1)  # [B, 1]
    ratio = torch.exp(logp - old_logp)  # [B, T]
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)  # [B, T]
    per_token = torch.maximum(-adv * ratio, -adv * clipped)  # [B, T] pessimistic surrogate
    kl = k3_kl(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)  # [B, T]
    if kl_coef:
        per_token = per_token + kl_coef * kl  # [B, T]

    tokens = mask.sum(dim=1)  # [B]
    if agg == "token":
        total = (per_token * mask).sum()  # []
        n = tokens.sum() if denom is None else denom
    else:
        # Each sequence's own token mean, so long and short completions weigh the same.
        total = ((per_token * mask).sum(dim=1) / tokens.clamp(min=1.0)).sum()  # []
        n = torch.tensor(float(logp.shape[0])) if denom is None else denom
    loss = total / torch.as_tensor(n, dtype=logp.dtype).clamp(min=1.0)  # []

    with torch.no_grad():
        # A token is clipped when the clamp cut its gradient: ratio out of range on the side
        # the advantage pushes towards.
        is_clipped = ((ratio < 1.0 - eps_low) & (adv < 0)) | ((ratio > 1.0 + eps_high) & (adv > 0))  # [B, T]
        count = mask.sum().clamp(min=1.0)
        stats = {
            "clip_frac": (is_clipped.to(mask.dtype) * mask).sum() / count,
            "kl": (kl * mask).sum() / count,
            "ratio_mean": (ratio * mask).sum() / count,
            "tokens": mask.sum(),
        }
    return loss, stats
