"""collate / shard layout, and per-token log-probs under the HF model with padding."""

from __future__ import annotations

import pytest
import torch
from trainer_helpers import make_rollouts

from rldata.trainer.checkpoint import load_model
from rldata.trainer.policy import collate, token_logprobs


def test_collate_layout():
    b = collate(
        [[5, 6], [7]],
        [[8, 9, 10], [11]],
        advantages=[1.0, -1.0],
        old_logps=[[-0.1, -0.2, -0.3], [-0.4]],
        pad_id=0,
    )
    assert b.input_ids.tolist() == [[5, 6, 8, 9, 10], [7, 11, 0, 0, 0]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    # column t predicts input token t+1: row 0's completion tokens are targets of columns 1..3
    assert b.loss_mask.tolist() == [[0, 1, 1, 1], [1, 0, 0, 0]]
    assert torch.allclose(b.old_logp, torch.tensor([[0, -0.1, -0.2, -0.3], [-0.4, 0, 0, 0]]))
    assert b.advantages.tolist() == [1.0, -1.0]
    assert b.global_denominator("token") == 4 and b.global_denominator("sequence") == 2


def test_collate_rejects_mismatches():
    with pytest.raises(ValueError, match="row 1: 2 old log-probs for 1 completion tokens"):
        collate([[1], [2]], [[3], [4]], advantages=[0, 0], old_logps=[[0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="row 0: empty prompt"):
        collate([[]], [[3]], advantages=[0])
    with pytest.raises(ValueError, match="one entry per row"):
        collate([[1]], [[3], [4]], advantages=[0])


@pytest.mark.parametrize("n, world, micro", [(8, 1, 3), (8, 2, 4), (5, 2, 2), (3, 4, 2), (7, 3, 8)])
def test_shard_covers_rows_once_with_equal_micro_batches(n, world, micro):
    p, c, o, a = make_rollouts(0, rows=n)
    b = collate(p, c, advantages=a, old_logps=o)
    shards = [b.shard(r, world, micro) for r in range(world)]
    assert len({len(s) for s in shards}) == 1  # the same number of backward passes on every rank
    assert len({tuple(len(mb) for mb in s) for s in shards}) == 1
    assert all(len(mb) <= micro for s in shards for mb in s)
    # Each real row appears exactly once (filler rows carry no loss tokens).
    assert sum(float(mb.loss_mask.sum()) for s in shards for mb in s) == float(b.loss_mask.sum())
    assert sum(int((mb.loss_mask.sum(1) > 0).sum()) for s in shards for mb in s) == n
    seen = sorted(
        float(x) for s in shards for mb in s for x, m in zip(mb.advantages, mb.loss_mask.sum(1)) if m > 0
    )
    assert seen == sorted(float(x) for x in b.advantages)


def test_token_logprobs_match_unpadded_scoring(tiny_model_dir):
    model = load_model(tiny_model_dir).eval()
    p, c, o, a = make_rollouts(1, rows=6)
    b = collate(p, c, advantages=a, old_logps=o)
    with torch.no_grad():
        logp, ent = token_logprobs(model, b.input_ids, b.attention_mask, temperature=0.7)
        for i, (pi, ci) in enumerate(zip(p, c)):
            ids = torch.tensor([pi + ci])
            logits = model(input_ids=ids).logits[0].float() / 0.7  # [l, V]
            lsm = torch.log_softmax(logits, dim=-1)
            want = torch.stack([lsm[len(pi) - 1 + j, tok] for j, tok in enumerate(ci)])  # [lc]
            got = logp[i][b.loss_mask[i] > 0]
            assert torch.allclose(got, want, atol=1e-5), i
            ent_want = -(lsm.exp() * lsm).sum(-1)[len(pi) - 1 : len(pi) - 1 + len(ci)]
            assert torch.allclose(ent[i][b.loss_mask[i] > 0], ent_want, atol=1e-5)
    assert logp.shape == ent.shape == b.loss_mask.shape
    assert (logp <= 0).all() and (ent >= 0).all()


class _NoLogitsToKeep(torch.nn.Module):
    """A causal LM whose forward takes only input_ids and attention_mask (older or remote-code models)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_logprobs_without_logits_to_keep_score_and_train_the_same(tiny_model_dir, temperature):
    """Models that cannot skip the last position's logits get the same log-probs, entropy and gradients."""
    model = load_model(tiny_model_dir)
    p, c, o, a = make_rollouts(2, rows=4)
    b = collate(p, c, advantages=a, old_logps=o)
    out = []
    for m in (model, _NoLogitsToKeep(model)):
        model.zero_grad()
        logp, ent = token_logprobs(m, b.input_ids, b.attention_mask, temperature=temperature)
        (logp * b.loss_mask).sum().backward()
        out.append((logp.detach(), ent, model.lm_head.weight.grad.clone()))
    (lp0, ent0, g0), (lp1, ent1, g1) = out
    assert lp0.shape == lp1.shape == b.loss_mask.shape
    assert torch.allclose(lp0, lp1, atol=1e-5) and torch.allclose(ent0, ent1, atol=1e-5)
    assert torch.allclose(g0, g1, atol=1e-5) and float(g0.abs().max()) > 1e-3


def test_collate_masks_environment_tokens_out_of_the_loss():
    """A hand-built episode: prompt [5, 6], turn 1 [7, 2], a tool result [8, 9, 10], turn 2 [11, 2]."""
    from rldata.trainer.policy import collate

    comp = [7, 2, 8, 9, 10, 11, 2]
    mask = [1, 1, 0, 0, 0, 1, 1]
    b = collate([[5, 6]], [comp], advantages=[1.0], old_logps=[[-1.0] * 7], completion_masks=[mask])
    # column t predicts input token t+1: the completion starts at input position 2, predicted by column 1
    assert b.input_ids[0].tolist() == [5, 6, *comp]
    assert b.loss_mask[0].tolist() == [0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    plain = collate([[5, 6]], [comp], advantages=[1.0], old_logps=[[-1.0] * 7])
    assert plain.loss_mask[0].tolist() == [0.0] + [1.0] * 7
    with pytest.raises(ValueError, match="one 0/1 per completion token"):
        collate([[5, 6]], [comp], advantages=[1.0], completion_masks=[[1, 0]])


def test_masked_tokens_change_nothing_in_the_loss_or_its_gradient(tiny_model_dir):
    """Replacing the tool-result tokens' behaviour log-probs, or the result itself only where it is
    never a target, leaves the loss and the gradient on the generated tokens' targets unchanged."""
    from rldata.trainer.checkpoint import load_model
    from rldata.trainer.loss import grpo_loss
    from rldata.trainer.policy import collate, token_logprobs

    model = load_model(tiny_model_dir)
    comp, mask = [7, 2, 8, 9, 10, 11, 2], [1, 1, 0, 0, 0, 1, 1]

    def loss_for(old):
        b = collate([[5, 6]], [comp], advantages=[1.0], old_logps=[old], completion_masks=[mask])
        model.zero_grad()
        logp, _ = token_logprobs(model, b.input_ids, b.attention_mask)
        loss, st = grpo_loss(
            logp,
            logp.detach(),
            None,
            b.advantages,
            b.loss_mask,
            behav_logp=b.old_logp,
            behav_cap=2.0,
            eps_low=0.2,
            eps_high=0.28,
            kl_coef=0.0,
            agg="token",
            denom=float(b.loss_mask.sum()),
        )
        loss.backward()
        return float(loss), [p.grad.clone() for p in model.parameters() if p.grad is not None], st

    base = [-3.0, -3.2, -3.1, -3.3, -3.4, -3.0, -3.1]
    l1, g1, st1 = loss_for(base)
    l2, g2, _st2 = loss_for([-3.0, -3.2, -50.0, 0.0, -9.0, -3.0, -3.1])  # only masked positions differ
    assert l1 == l2 and all(torch.equal(a, b) for a, b in zip(g1, g2))
    assert float(st1["tokens"]) == 4.0
