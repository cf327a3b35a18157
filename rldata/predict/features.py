"""What the cross-task prior sees of a task: its text, its labels, and the policy's own view of it.

Four families (``PredictConfig.features`` names the ones used):

- ``text``: hashed character 1-4-grams and word 1-2-grams of the prompt (scikit-learn's
  ``HashingVectorizer``: no vocabulary to store, the same columns for any task);
- ``meta``: the task's source, its category and each prefix of a ``/``-separated category, and each
  short scalar of its metadata as ``key=value`` (hashed, one-hot), plus the prompt's length;
- ``prefill``: the policy's last hidden state, mean-pooled over the prompt's tokens, from one
  forward pass per prompt (transformers, on CPU) with the tokens the engine would see;
- ``logprob``: the prompt's log-probability under the policy (total and per token) and its token count.

The first two are sparse, the last two dense; :class:`Features` keeps them per task, in task order,
and :meth:`Features.matrix` stacks the rows of a subset.  Dense columns are standardised by the
model on its own training rows (rldata.predict.predictors), never on held-out ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rldata.errors import ConfigError, RldataError
from rldata.heavy import torch

__all__ = ["FAMILIES", "Features", "build_features", "parse_families", "prefill_features"]

FAMILIES = ("text", "meta", "prefill", "logprob")
_HASH_BITS = 16  # columns per hashed family: 65,536
_META_VALUE_CHARS = 64  # metadata values longer than this (a reference solution...) are not labels


def parse_families(text: str | Sequence[str]) -> tuple[str, ...]:
    names = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    bad = [s for s in names if s not in FAMILIES]
    if bad or not names:
        raise ConfigError(
            f"features: unknown family {bad[0]!r}; families: {', '.join(FAMILIES)}"
            if bad
            else f"features: name at least one of {', '.join(FAMILIES)}",
            field="features",
        )
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Features:
    """One row per task (``task_ids`` order): a sparse block and a dense block."""

    task_ids: tuple[str, ...]
    sparse: sp.csr_matrix | None  # hashed text / labels
    dense: np.ndarray | None  # prefill state, log-probs, lengths
    families: tuple[str, ...]
    widths: tuple[int, ...] = ()  # the dense block's column groups (length; prefill state; log-probs)

    def rows(self, ids: Sequence[str]) -> np.ndarray:
        pos = {t: i for i, t in enumerate(self.task_ids)}
        missing = [t for t in ids if t not in pos]
        if missing:
            raise RldataError(f"no features for task {missing[0]!r}")
        return np.fromiter((pos[t] for t in ids), dtype=np.int64, count=len(ids))

    def take(self, idx: np.ndarray) -> tuple[sp.csr_matrix | None, np.ndarray | None]:
        return (
            None if self.sparse is None else self.sparse[idx],
            None if self.dense is None else self.dense[idx],
        )


def _meta_tokens(row: dict) -> list[str]:
    toks = [f"source={row.get('source') or ''}"]
    cat = row.get("category") or ""
    parts = cat.split("/")
    toks += [f"category={'/'.join(parts[: i + 1])}" for i in range(len(parts))] if cat else ["category="]
    try:
        meta = json.loads(row.get("metadata") or "{}")
    except (TypeError, ValueError):
        meta = {}
    if isinstance(meta, dict):
        for key, value in sorted(meta.items()):
            if isinstance(value, (str, int, float, bool)) and len(str(value)) <= _META_VALUE_CHARS:
                toks.append(f"meta.{key}={value}")
    return toks


def _text_block(prompts: list[str]) -> sp.csr_matrix:
    from sklearn.feature_extraction.text import HashingVectorizer

    chars = HashingVectorizer(
        analyzer="char", ngram_range=(1, 4), n_features=2**_HASH_BITS, alternate_sign=False, lowercase=False
    )
    words = HashingVectorizer(
        analyzer="word",
        ngram_range=(1, 2),
        token_pattern=r"(?u)\w+|[^\w\s]",
        n_features=2**_HASH_BITS,
        alternate_sign=False,
        lowercase=True,
    )
    return sp.hstack([chars.transform(prompts), words.transform(prompts)], format="csr")


def _meta_block(rows: list[dict]) -> sp.csr_matrix:
    from sklearn.feature_extraction import FeatureHasher

    hasher = FeatureHasher(n_features=2**_HASH_BITS, input_type="string", alternate_sign=False)
    return hasher.transform([_meta_tokens(r) for r in rows]).tocsr()


def prefill_features(
    model_path: str, prompts: Sequence[str], *, batch_size: int = 32, max_tokens: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One forward pass per prompt through the policy (transformers, float32, CPU or the GPU there is).

    Returns ``hidden`` [n, d], the last hidden state mean-pooled over the prompt's tokens, and
    ``lp`` [n, 3]: the prompt's total log-probability (each token given the ones before it; the first
    token has no context and is left out), that total per scored token, and log(tokens).  The prompt
    is tokenized as the engine tokenizes a text prompt (the tokenizer's special tokens added)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    model.eval()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    limit = max_tokens or int(getattr(model.config, "max_position_embeddings", 0) or 4096)
    hidden, lps = [], []
    with torch.no_grad():
        for i in range(0, len(prompts), batch_size):
            enc = [
                tok(p, add_special_tokens=True)["input_ids"][:limit] or [pad]
                for p in prompts[i : i + batch_size]
            ]
            width = max(len(e) for e in enc)
            ids = torch.full((len(enc), width), pad, dtype=torch.long)
            mask = torch.zeros((len(enc), width), dtype=torch.long)
            for j, e in enumerate(enc):  # right padding: positions 0..len-1 hold the prompt
                ids[j, : len(e)] = torch.tensor(e)
                mask[j, : len(e)] = 1
            out = model(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True)
            h = out.hidden_states[-1].float().cpu()  # [B, T, d]
            m = mask.unsqueeze(-1).float()
            hidden.append(((h * m).sum(1) / m.sum(1)).numpy())
            logp = torch.log_softmax(out.logits.float().cpu(), dim=-1)  # [B, T, V]
            tok_lp = logp[:, :-1].gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1) * mask[:, 1:]  # [B, T-1]
            total = tok_lp.sum(1).numpy()
            scored = mask[:, 1:].sum(1).numpy()
            for j, e in enumerate(enc):
                lps.append([total[j], total[j] / max(scored[j], 1), math.log(len(e))])
    return np.concatenate(hidden).astype(np.float64), np.asarray(lps, dtype=np.float64)


def build_features(
    rows: Sequence[dict],
    families: Sequence[str],
    *,
    model_path: str | None = None,
    batch_size: int = 32,
) -> Features:
    """Features of ``rows`` (dicts with task_id, prompt, source, category, metadata), in their order.
    ``model_path`` (the policy) is needed for ``prefill`` and ``logprob``."""
    if not rows:
        raise RldataError("no tasks to build features for")
    ids = tuple(r["task_id"] for r in rows)
    prompts = [r.get("prompt") or "" for r in rows]
    sparse, dense = [], []
    if "text" in families:
        sparse.append(_text_block(prompts))
    if "meta" in families:
        sparse.append(_meta_block(list(rows)))
        dense.append(np.log1p(np.array([[len(p)] for p in prompts], dtype=np.float64)))
    if "prefill" in families or "logprob" in families:
        if model_path is None:
            raise ConfigError("features prefill and logprob need the policy model", field="features")
        hidden, lp = prefill_features(model_path, prompts, batch_size=batch_size)
        if "prefill" in families:
            dense.append(hidden)
        if "logprob" in families:
            dense.append(lp)
    return Features(
        ids,
        sp.hstack(sparse, format="csr") if sparse else None,
        np.hstack(dense) if dense else None,
        tuple(families),
        tuple(d.shape[1] for d in dense),
    )
