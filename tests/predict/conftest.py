"""A store of bundled arithmetic tasks with ledger rows of the bundled model drawn from known pass
rates (harder levels pass less): what the predictor learns from, without sampling."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rldata.engine.core import model_identity
from rldata.ledger.core import passrate_row

LEVEL_P = {1: 0.89, 2: 0.52, 3: 0.42, 4: 0.16, 5: 0.09}  # docs/model.md: the tiny model per level
KEY = {"params_hash": "ph0", "verifier_key": "math@1"}


def add_tasks(store, n_tasks: int = 240, *, split: str = "train", prefix: str = "t") -> list[dict]:
    from rldata.sample_data.arith import load_bundled

    rows = load_bundled(split)
    rows = rows[:: max(1, len(rows) // n_tasks)][:n_tasks]
    tasks = [
        {
            "task_id": f"{prefix}{i:04d}",
            "source": r["source"],
            "domain": "math",
            "category": r["category"],
            "prompt": r["prompt"],
            "answer": r["answer"],
            "metadata": json.dumps(r["metadata"]),
        }
        for i, r in enumerate(rows)
    ]
    store.append("tasks", tasks)
    return tasks


def add_ledger(store, tasks: list[dict], *, n: int = 16, seed: int = 0, model: str | None = None) -> dict:
    """Counts drawn from Beta-spread pass rates around each level's; returns task -> (k, n)."""
    rng = np.random.default_rng(seed)
    name = model or model_identity(None).name
    out, rows = {}, []
    for t in tasks:
        m = LEVEL_P[json.loads(t["metadata"])["level"]]
        p = rng.beta(m * 6, (1 - m) * 6)
        k = int(rng.binomial(n, p))
        out[t["task_id"]] = (k, n)
        rows.append(passrate_row(t["task_id"], model=name, **KEY, n=n, n_correct=k, n_error=0))
    store.upsert("passrates", rows)
    return out


@pytest.fixture
def arith_store(store):
    tasks = add_tasks(store)
    add_ledger(store, tasks)
    return store
