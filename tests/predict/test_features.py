"""The cross-task prior's features: hashed text and labels, and the policy's prefill state and prompt
log-probability on the bundled Llama and on a generated Qwen2 (real architectures and tokenizers)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rldata.engine.core import model_identity
from rldata.errors import ConfigError
from rldata.predict.features import build_features, parse_families, prefill_features

PROMPTS = ["7*3-2=", "1+1=", "(4+5)*3-8*2+7=", "Natalia sold clips to 48 of her friends in April."]


def _rows(prompts):
    return [
        {
            "task_id": f"t{i}",
            "prompt": p,
            "source": "arith",
            "category": "mix/d1/o3",
            "metadata": json.dumps({"level": i, "ops": "+-", "reference_solution": "x" * 500}),
        }
        for i, p in enumerate(prompts)
    ]


def _check_prefill(path: str, hidden_size: int):
    from transformers import AutoTokenizer

    h, lp = prefill_features(path, PROMPTS, batch_size=4)
    assert h.shape == (len(PROMPTS), hidden_size) and lp.shape == (len(PROMPTS), 3)
    assert np.isfinite(h).all() and np.isfinite(lp).all()
    # one prompt at a time gives the same numbers: padding never leaks into a prompt's state
    h1, lp1 = prefill_features(path, PROMPTS, batch_size=1)
    assert np.allclose(h, h1, atol=1e-4) and np.allclose(lp, lp1, atol=1e-3)
    tok = AutoTokenizer.from_pretrained(path)
    for i, p in enumerate(PROMPTS):
        n = len(tok(p, add_special_tokens=True)["input_ids"])
        assert lp[i, 2] == pytest.approx(math.log(n))  # log tokens
        assert lp[i, 0] < 0 and lp[i, 1] == pytest.approx(lp[i, 0] / (n - 1))  # total, per scored token
    assert not np.allclose(h[0], h[1])  # different prompts, different states


def test_prefill_on_the_bundled_model():
    ident = model_identity(None)
    cfg = json.loads((Path(ident.load) / "config.json").read_text())
    _check_prefill(ident.load, cfg["hidden_size"])


@pytest.mark.slow
def test_prefill_on_the_qwen2_fixture(qwen_model):
    cfg = json.loads((qwen_model / "config.json").read_text())
    assert cfg["model_type"] == "qwen2"
    _check_prefill(str(qwen_model), cfg["hidden_size"])


def test_the_bundled_model_finds_harder_prompts_less_likely():
    # a property of the policy the prefill features exist for: longer expressions are less likely
    _, lp = prefill_features(model_identity(None).load, ["1+1=", "(4+5)*3-8*2+7="])
    assert lp[0, 0] > lp[1, 0]


def test_text_and_meta_features():
    f = build_features(_rows(PROMPTS), ("text", "meta"))
    assert f.task_ids == ("t0", "t1", "t2", "t3") and f.sparse.shape[0] == 4 and f.dense.shape == (4, 1)
    assert f.widths == (1,)
    assert f.dense[:, 0].tolist() == [math.log1p(len(p)) for p in PROMPTS]
    again = build_features(_rows(PROMPTS), ("text", "meta"))
    assert (f.sparse != again.sparse).nnz == 0  # hashing: no vocabulary, the same columns every time
    assert list(f.rows(["t2", "t0"])) == [2, 0]
    with pytest.raises(Exception, match="no features for task 'zz'"):
        f.rows(["zz"])


def test_feature_families_are_checked():
    assert parse_families("text, meta,text") == ("text", "meta")
    with pytest.raises(ConfigError, match="unknown family 'smell'"):
        parse_families("text,smell")
    with pytest.raises(ConfigError, match="features prefill and logprob need the policy"):
        build_features(_rows(PROMPTS), ("prefill",))


def test_all_families_stack():
    f = build_features(
        _rows(PROMPTS), ("text", "meta", "prefill", "logprob"), model_path=model_identity(None).load
    )
    assert f.widths == (1, 128, 3) and f.dense.shape == (4, 132)
