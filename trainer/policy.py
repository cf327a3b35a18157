"""Scoring completions under the HF policy: per-token log-probs and entropy, and the padded batch
the learners train on.

Layout ("target coordinates"): a row is prompt + completion token ids, right-padded to L.  The
logits at position t predict token t+1, so every per-token tensor is [B, L-1] and column t refers
to ``input_ids[:, t+1]``; ``loss_mask`` marks the columns whose target is a completion token.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from rldata.trainer.sharding import hf_model

__all__ = ["RolloutBatch", "collate", "token_logprobs"]


@dataclass(frozen=True)
class RolloutBatch:
    """A padded batch of scored completions: what one optimizer step consumes."""

    input_ids: torch.Tensor  # [B, L] long: prompt + completion, right-padded
    attention_mask: torch.Tensor  # [B, L] long: 1 on real tokens
    loss_mask: torch.Tensor  # [B, L-1] float: 1 where the target is a completion token
    advantages: torch.Tensor  # [B] float
    old_logp: torch.Tensor | None = None  # [B, L-1] behaviour log-probs of the targets; None = on-policy

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, idx: torch.Tensor) -> RolloutBatch:
        """The rows at idx [k], trimmed to their longest row (shorter micro-batches, less compute)."""
        length = max(int(self.attention_mask[idx].sum(dim=1).max()), 2) if len(idx) else 2
        return RolloutBatch(
            input_ids=self.input_ids[idx, :length],  # [k, l]
            attention_mask=self.attention_mask[idx, :length],  # [k, l]
            loss_mask=self.loss_mask[idx, : length - 1],  # [k, l-1]
            advantages=self.advantages[idx],  # [k]
            old_logp=None if self.old_logp is None else self.old_logp[idx, : length - 1],  # [k, l-1]
        )

    def global_denominator(self, agg: str) -> float:
        """The loss denominator over the WHOLE batch: tokens for "token", sequences for "sequence"."""
        return float(self.loss_mask.sum()) if agg == "token" else float(len(self))

    def shard(self, rank: int, world_size: int, micro_batch: int) -> list[RolloutBatch]:
        """This rank's contiguous share of the rows, as micro-batches.

        Every rank gets the same number of micro-batches of the same sizes, because DDP all-reduces
        once per backward on every rank: when the rows do not divide evenly, the short ranks are
        topped up with copies of row 0 whose loss_mask is zero (they add exactly nothing).
        """
        n = len(self)
        if n == 0:
            raise ValueError("empty batch")
        per_rank = math.ceil(n / world_size)
        size = min(micro_batch, per_rank)
        count = math.ceil(per_rank / size)
        idx = torch.arange(rank * per_rank, min((rank + 1) * per_rank, n))  # [<= per_rank]
        idx = torch.cat([idx, torch.full((count * size - len(idx),), -1)])  # [count * size]; -1 = filler
        out = []
        for chunk in idx.split(size):
            real = chunk >= 0
            mb = self.rows(chunk.clamp(min=0))
            if not real.all():
                mb = replace(mb, loss_mask=mb.loss_mask * real[:, None].to(mb.loss_mask.dtype))
            out.append(mb)
        return out

    def shard_by_tokens(self, rank: int, world_size: int, budget: int) -> list[RolloutBatch]:
        """This rank's contiguous share of the rows, as micro-batches of at most ``budget`` tokens
        (rows x padded length; a row longer than the budget goes alone).

        Rows are sorted by length before packing, so a micro-batch holds rows of similar length and
        little padding.  The loss is unchanged: its denominator is the global one, and each row's
        terms do not depend on which micro-batch it is in.  Every rank plans every rank's packing
        (all hold the whole batch) and tops up to the largest count with zero-mask filler rows, so
        all ranks run the same number of backward passes (one gradient reduction each).
        """
        n = len(self)
        if n == 0:
            raise ValueError("empty batch")
        per_rank = math.ceil(n / world_size)
        lengths = self.attention_mask.sum(dim=1).tolist()  # [B]
        plans = []
        for r in range(world_size):
            rows = sorted(range(r * per_rank, min((r + 1) * per_rank, n)), key=lambda i: (lengths[i], i))
            plan, cur, longest = [], [], 0
            for i in rows:
                grown = max(longest, lengths[i])
                if cur and grown * (len(cur) + 1) > budget:
                    plan.append(cur)
                    cur, grown = [], lengths[i]
                cur.append(i)
                longest = grown
            if cur:
                plan.append(cur)
            plans.append(plan)
        count = max(len(p) for p in plans)
        out = []
        for chunk in plans[rank] + [[-1]] * (count - len(plans[rank])):
            mb = self.rows(torch.tensor(chunk).clamp(min=0))
            if chunk == [-1]:  # filler: row 0 contributing nothing
                mb = replace(mb, loss_mask=mb.loss_mask * 0)
            out.append(mb)
        return out


def collate(
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    advantages: Sequence[float],
    old_logps: Sequence[Sequence[float]] | None = None,
    pad_id: int = 0,
    completion_masks: Sequence[Sequence[int] | None] | None = None,
) -> RolloutBatch:
    """Pack token ids (e.g. an engine Sample's ``token_ids`` and ``logprobs``) into a RolloutBatch.

    ``completion_masks[i]`` (one 0/1 per completion token; None = all 1) marks the tokens the model
    generated: in an episode, tool results and environment messages sit between the model's turns,
    are part of the input, and never enter the loss."""
    n = len(prompt_ids)
    if not (len(completion_ids) == len(advantages) == n) or (old_logps is not None and len(old_logps) != n):
        raise ValueError("prompt_ids, completion_ids, advantages (and old_logps) must have one entry per row")
    for i in range(n):
        if not prompt_ids[i]:
            raise ValueError(f"row {i}: empty prompt (the first completion token needs a preceding token)")
        if old_logps is not None and len(old_logps[i]) != len(completion_ids[i]):
            raise ValueError(
                f"row {i}: {len(old_logps[i])} old log-probs for {len(completion_ids[i])} completion tokens"
            )
        m = completion_masks[i] if completion_masks is not None else None
        if m is not None and (len(m) != len(completion_ids[i]) or any(x not in (0, 1) for x in m)):
            raise ValueError(f"row {i}: the completion mask needs one 0/1 per completion token")
    length = max(len(p) + len(c) for p, c in zip(prompt_ids, completion_ids))
    length = max(length, 2)
    input_ids = torch.full((n, length), pad_id, dtype=torch.long)  # [B, L]
    attention = torch.zeros((n, length), dtype=torch.long)  # [B, L]
    loss_mask = torch.zeros((n, length - 1), dtype=torch.float32)  # [B, L-1]
    old = torch.zeros((n, length - 1), dtype=torch.float32) if old_logps is not None else None  # [B, L-1]
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        lp, lc = len(p), len(c)
        input_ids[i, : lp + lc] = torch.tensor(list(p) + list(c), dtype=torch.long)
        attention[i, : lp + lc] = 1
        # Completion token j sits at input position lp + j, predicted by column lp + j - 1.
        m = completion_masks[i] if completion_masks is not None else None
        loss_mask[i, lp - 1 : lp - 1 + lc] = 1.0 if m is None else torch.tensor(list(m), dtype=torch.float32)
        if old is not None and lc:
            old[i, lp - 1 : lp - 1 + lc] = torch.tensor(list(old_logps[i]), dtype=torch.float32)
    adv = torch.tensor(list(advantages), dtype=torch.float32)  # [B]
    return RolloutBatch(input_ids, attention, loss_mask, adv, old)


@functools.cache
def _takes_logits_to_keep(cls) -> bool:
    """Whether a model class's forward can skip the last position's logits (checked once per class)."""
    return "logits_to_keep" in inspect.signature(cls.forward).parameters


def token_logprobs(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(target token) and the policy's entropy at each position, both [B, L-1].

    Logits are divided by the sampling temperature, so the scores are those of the distribution
    the engine sampled from.  The entropy is a statistic only (no gradient).

    The [B, L-1, V] tensors are the largest of a step on real vocabularies, so no copy is made that
    is not needed: the last position's logits are never computed (``logits_to_keep``, where the
    model takes it), fp32 logits are not copied to be upcast or divided by 1, only log_softmax's
    output is kept for backward, and the entropy is computed a row at a time.
    """
    L = input_ids.shape[1]
    if _takes_logits_to_keep(type(hf_model(model))):
        keep = torch.arange(L - 1, device=input_ids.device)  # positions 0..L-2 predict tokens 1..L-1
        logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep).logits
    else:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]  # [B, L-1, V]
    logits = logits.float()  # [B, L-1, V]; a no-op in fp32, the upcast under bf16 compute
    if temperature != 1.0:
        logits = logits / temperature
    logsm = F.log_softmax(logits, dim=-1)  # [B, L-1, V]
    del logits  # autograd keeps log_softmax's output only
    logp = logsm.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # [B, L-1]
    entropy = None
    if with_entropy:
        with torch.no_grad():  # row by row: two [L-1, V] temporaries, not two [B, L-1, V]
            entropy = torch.stack([-(row.exp() * row).sum(dim=-1) for row in logsm])  # [B, L-1]
    return logp, entropy
