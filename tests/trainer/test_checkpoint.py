"""Checkpoints: HF-loadable, and a resumed run's next steps equal an uninterrupted run's."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from rldata.errors import RldataError
from rldata.trainer.checkpoint import (
    checkpoint_dir,
    latest_checkpoint,
    load_checkpoint,
    load_model,
    save_checkpoint,
    staging_dir,
)
from rldata.trainer.config import TrainConfig
from rldata.trainer.learner import Learner
from rldata.trainer.policy import collate

CFG = TrainConfig(prompts_per_step=2, n=4, micro_batch=4, lr=1e-3, kl_coef=0.05)


def _batch_from_global_rng():
    """A batch drawn from the global python/numpy/torch RNGs, as a driver's sampling would."""
    rows = 8
    lens = [random.randint(1, 5) for _ in range(rows)]  # python RNG
    prompts = [torch.randint(3, 32, (3,)).tolist() for _ in range(rows)]  # torch RNG
    completions = [torch.randint(3, 32, (n,)).tolist() for n in lens]
    adv = np.random.normal(size=rows).tolist()  # numpy RNG
    old = [(-3.4 + 0.2 * np.random.normal(size=n)).tolist() for n in lens]
    return collate(prompts, completions, advantages=adv, old_logps=old)


def _steps(learner, k):
    for _ in range(k):
        learner.step(_batch_from_global_rng())


def _params(learner):
    return {k: v.clone() for k, v in learner.model.state_dict().items()}


def _seed(s):
    random.seed(s)
    np.random.seed(s)
    torch.manual_seed(s)


@pytest.fixture(scope="module")
def uninterrupted(tiny_model_dir, tmp_path_factory):
    """4 steps straight through, with a checkpoint after step 2."""
    root = tmp_path_factory.mktemp("ckpts")
    _seed(0)
    a = Learner(tiny_model_dir, CFG)
    _steps(a, 2)
    path = save_checkpoint(
        checkpoint_dir(root, 2),
        model=a.model,
        optimizer=a.optimizer,
        step=2,
        policy_version=2,
        source_dir=tiny_model_dir,
        curriculum_state={"cursor": np.int64(7), "weights": np.array([0.5, 0.5])},
    )
    _steps(a, 2)
    return path, _params(a)


def test_resume_is_identical_to_uninterrupted(tiny_model_dir, uninterrupted):
    path, want = uninterrupted
    _seed(12345)  # whatever state the new process is in
    b = Learner(path, CFG, ref_path=tiny_model_dir, resume=True)
    ck = load_checkpoint(path)
    assert (ck.step, ck.policy_version) == (2, 2)
    assert ck.curriculum_state == {"cursor": 7, "weights": [0.5, 0.5]}
    _steps(b, 2)
    got = _params(b)
    assert want.keys() == got.keys()
    for k in want:
        assert torch.equal(want[k], got[k]), k


@pytest.mark.parametrize("skip", ["rng", "optimizer"])
def test_resume_without_rng_or_optimizer_diverges(tiny_model_dir, uninterrupted, skip):
    """The control for the test above: each restored piece matters."""
    path, want = uninterrupted
    _seed(12345)
    b = Learner(path, CFG, ref_path=tiny_model_dir, resume=(skip != "optimizer"))
    load_checkpoint(path, restore_rng=(skip != "rng"))
    _steps(b, 2)
    got = _params(b)
    assert any(not torch.allclose(want[k], got[k]) for k in want)


def test_checkpoint_is_an_hf_model_dir(tiny_model_dir, uninterrupted):
    path, _ = uninterrupted
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "model.safetensors", "optimizer.pt", "trainer_state.json"} <= names
    m = load_model(path)
    assert m.config.num_hidden_layers == 2
    state = json.loads((path / "trainer_state.json").read_text())
    assert set(state["rng"]) >= {"python", "numpy", "torch"}


def test_latest_checkpoint_skips_incomplete(tmp_path, tiny_model_dir):
    assert latest_checkpoint(tmp_path / "none") is None
    m = load_model(tiny_model_dir)
    opt = torch.optim.AdamW(m.parameters())
    for step in (2, 10):
        save_checkpoint(
            checkpoint_dir(tmp_path, step), model=m, optimizer=opt, step=step, policy_version=step
        )
    staging_dir(checkpoint_dir(tmp_path, 12))  # a save that crashed midway
    (checkpoint_dir(tmp_path, 11)).mkdir()  # a dir without trainer state
    assert latest_checkpoint(tmp_path) == checkpoint_dir(tmp_path, 10)
    with pytest.raises(RldataError, match="not a complete training checkpoint"):
        load_checkpoint(checkpoint_dir(tmp_path, 11))
