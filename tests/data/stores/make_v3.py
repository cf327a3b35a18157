"""Make tests/data/stores/v3 with the code of commit 243eedc (the last release where passrates had
schema version 3 and selections version 1).

Run with that release's modules first on the path, e.g. (see v3/README.md)::

    git worktree add /tmp/prevrel 243eedc
    PYTHONPATH=/tmp/prevrel python tests/data/stores/make_v3.py OUT_DIR

Version 3 added multi-turn episode columns (trajectories ``num_turns``, ``num_tool_calls``,
``env_info``) and the adaptive-N stopping columns (passrates ``stop_rule``, ``alpha``,
``confidence``, ``n_max``, ``band``): half the rows here fill them, so an upgrade must keep those
values too.  In this release passrates and selections key the verifier as ``verifier_version``
(holding ``name@version``); the next one renames that column ``verifier_key``.

Deterministic values (fixed timestamps) so the upgrade test can compare every cell.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

import polars as pl

from rldata.ingest import ingest
from rldata.ledger import passrate_row
from rldata.store import open_store

T0 = dt.datetime(2027, 1, 15, 12, 0, tzinfo=dt.UTC)


def main(out: str) -> None:
    store = open_store(out)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "mini3.jsonl"
        src.write_text("".join(json.dumps({"prompt": f"What is {i} * {i + 2}?", "answer": str(i * (i + 2))}) + "\n"
                               for i in range(4)))
        ingest(store, src, source="mini", domain="math")
    tasks = store.read("tasks").sort("task_id")["task_id"].to_list()
    calc = tasks[:2]  # these two run in the calculator environment, as multi-turn episodes
    store.upsert("tasks", [{**r, "env_id": "calculator", "env_version": "1"}
                           for r in store.read("tasks").filter(pl.col("task_id").is_in(calc)).to_dicts()])
    store.append("runs", [{"run_id": "run-v3", "kind": "sample", "args": "{}", "status": "done",
                           "started_at": T0, "ended_at": T0, "summary": '{"n": 8}'}])
    trajs, vers = [], []
    for i, tid in enumerate(tasks):
        for s in range(2):
            traj = f"traj-{i}-{s}"
            ok = s == 0
            episode = tid in calc
            trajs.append({"traj_id": traj, "task_id": tid, "run_id": "run-v3", "sample_idx": s, "model": "tiny",
                          "model_revision": "rev0", "policy_version": 0, "params_hash": "ph0",
                          "sampling_params": '{"temperature": 1.0}', "seed": 7 + s, "prompt": f"p{i}",
                          "completion": f"answer {i}", "messages": [{"role": "user", "content": f"p{i}"}],
                          "prompt_tokens": 5, "completion_tokens": 3, "cumulative_logprob": -1.5,
                          "finish_reason": "env_done" if episode else "stop", "reward": float(ok), "created_at": T0,
                          **({"env_id": "calculator", "env_version": "1", "num_turns": 2, "num_tool_calls": 1,
                              "env_info": '{"tool_calls": 1}'} if episode else {"num_turns": 1})})
            vers.append({"traj_id": traj, "task_id": tid, "verifier": "math", "verifier_version": "1",
                         "layer": "answer", "passed": ok, "score": float(ok), "extracted": str(i),
                         "created_at": T0})
    store.append("trajectories", trajs)
    store.append("verifications", vers)
    store.upsert("passrates", [
        {**passrate_row(tid, model="tiny", params_hash="ph0", verifier_version="math@1", n=2, n_correct=1,
                        n_error=0, run_id="run-v3", env_version="calculator@1" if tid in calc else "",
                        **({"stop_rule": "sequential", "alpha": 0.05, "confidence": 0.9, "n_max": 8,
                            "band": "0.2,0.8"} if tid in calc else {})),
         "updated_at": T0}
        for tid in tasks
    ])
    store.append("selections", [{"selection": "mid", "task_id": tid, "decision": "keep", "reason": "in_band",
                                 "pass_rate": 0.5, "n": 2, "n_correct": 1, "model": "tiny", "params_hash": "ph0",
                                 "verifier_version": "math@1", "passrates_version": 1,
                                 "params": '{"band": [0.2, 0.8]}', "created_at": T0}
                                for tid in tasks])
    store.append("metrics", [{"run_id": "run-v3", "step": 0, "name": "reward_mean", "value": 0.5,
                              "created_at": T0}])
    store.append("environments", [
        {"env_id": "single-turn", "kind": "single-turn", "spec": '{"env": "single-turn"}', "version": "1",
         "created_at": T0},
        {"env_id": "calculator", "kind": "calculator", "spec": '{"config": {}, "env": "calculator", "max_turns": 4}',
         "version": "1", "created_at": T0},
    ])
    print({t: store.count(t) for t in ("tasks", "trajectories", "verifications", "passrates", "runs", "selections")})


if __name__ == "__main__":
    main(sys.argv[1])
