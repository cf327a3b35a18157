"""Make tests/data/stores/v5 with the code of commit 526609d (the last release whose trajectories'
messages were ``{role, content}`` only: trajectories schema version 4).

Run from a checkout of that commit (see v5/README.md)::

    PYTHONPATH=/tmp/prevrel5 python tests/data/stores/make_v5.py OUT_DIR

The rows are what that release's ``rldata sample`` writes for the ``calculator`` environment (the
``<calc>`` protocol: an assistant turn, a ``tool`` message, the answer) and for a plain task, written
by hand so that timestamps are fixed and the upgrade test can compare every cell.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

import polars as pl

from rldata.ingest import ingest
from rldata.jobs.sample import traj_id
from rldata.ledger import recompute_passrates
from rldata.params import SamplingSpec
from rldata.store import open_store

T0 = dt.datetime(2027, 4, 1, 12, 0, tzinfo=dt.UTC)
MODEL, REV = "tiny-arith@0123456789ab", "0123456789ab"
CALC = "calculator@1+0000000000"


def main(out: str) -> None:
    store = open_store(out)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "mini5.jsonl"
        src.write_text(
            "".join(
                json.dumps({"prompt": f"What is {i} * {i + 7}?", "answer": str(i * (i + 7))}) + "\n"
                for i in range(2)
            )
        )
        ingest(store, src, source="mini", domain="math")
    tasks = store.read("tasks").sort("task_id")
    (a, c), answers = tasks["task_id"].to_list(), dict(zip(tasks["task_id"], tasks["answer"]))
    store.upsert(
        "tasks",
        [
            {**r, "env_id": "calculator", "env_version": "1+0000000000"}
            for r in tasks.filter(pl.col("task_id") == c).to_dicts()
        ],
    )
    store.append(
        "environments",
        [
            {
                "env_id": "calculator",
                "kind": "calculator",
                "spec": '{"config": {}, "env": "calculator", "max_turns": 4}',
                "version": "1+0000000000",
                "created_at": T0,
            }
        ],
    )
    spec = SamplingSpec(n=4, max_tokens=8, seed=0)
    store.append(
        "runs",
        [
            {
                "run_id": "run-5",
                "kind": "sample",
                "args": json.dumps({"spec": spec.to_dict()}),
                "status": "done",
                "started_at": T0,
                "ended_at": T0,
                "summary": json.dumps({"params_hash": spec.params_hash}),
            }
        ],
    )
    trajs, vers = [], []
    for tid in (a, c):
        episode = tid == c
        for idx in range(4):
            ok = idx % 2 == 0
            completion = answers[tid] if ok else "0"
            t = traj_id(MODEL, spec.params_hash, spec.seed, tid, idx, CALC if episode else "")
            messages = None
            if episode:
                messages = [
                    {"role": "system", "content": "Use <calc>EXPR</calc>."},
                    {"role": "user", "content": f"prompt of {tid}"},
                    {"role": "assistant", "content": f"<calc>{idx}*{idx + 7}</calc>"},
                    {"role": "tool", "content": str(idx * (idx + 7))},
                    {"role": "assistant", "content": completion},
                ]
            trajs.append(
                {
                    "traj_id": t,
                    "task_id": tid,
                    "run_id": "run-5",
                    "sample_idx": idx,
                    "model": MODEL,
                    "model_revision": REV,
                    "policy_version": 0,
                    "params_hash": spec.params_hash,
                    "sampling_params": spec.to_json(),
                    "seed": spec.seed,
                    "prompt": f"prompt of {tid}",
                    "completion": completion,
                    "messages": messages,
                    "prompt_tokens": 9,
                    "completion_tokens": 3 + idx,
                    "cumulative_logprob": -0.25 - idx,
                    "finish_reason": "env_done" if episode else "stop",
                    "reward": float(ok),
                    "created_at": T0,
                    "env_id": "calculator" if episode else None,
                    "env_version": "1+0000000000" if episode else None,
                    "num_turns": 2 if episode else 1,
                    "num_tool_calls": 1 if episode else 0,
                    "env_info": '{"tool_calls": 1}' if episode else None,
                }
            )
            vers.append(
                {
                    "traj_id": t,
                    "task_id": tid,
                    "verifier": "math",
                    "verifier_version": "1",
                    "layer": "answer",
                    "passed": ok,
                    "score": float(ok),
                    "extracted": completion,
                    "created_at": T0,
                }
            )
    store.append("trajectories", trajs)
    store.append("verifications", vers)
    rows = recompute_passrates(
        store, model=MODEL, params_hash=spec.params_hash, verifier_keys=["math@1"], task_ids=[a, c], write=False
    )
    store.upsert("passrates", [{**r, "run_id": "run-5", "updated_at": T0} for r in rows])
    print({t: store.count(t) for t in ("tasks", "trajectories", "verifications", "passrates", "runs")})


if __name__ == "__main__":
    main(sys.argv[1])
