"""Make tests/data/stores/v4 with the code of commit 5291bef (the last release whose params hash
included N: trajectories schema version 3, passrates version 4, selections version 2).

Run with that release's modules first on the path, e.g. (see v4/README.md)::

    git worktree add /tmp/prevrel4 5291bef
    cd /tmp/prevrel4 && for d in jobs trainer schemas sample_data; do ln -s ../$d rldata/$d; done
    PYTHONPATH=/tmp/prevrel4 python tests/data/stores/make_v4.py OUT_DIR

The rows are what that release's `rldata sample` writes (ids, hashes and sampling-params JSON from its
own ``traj_id`` and ``SamplingSpec``; ledger counts from its own ``recompute_passrates``), written by
hand so that timestamps are fixed and the upgrade test can compare every cell:

- task A (plain) and task C (calculator episodes): an N=4 job and an N=8 job, both seed 0, so samples
  0..3 were drawn twice under two params hashes and two traj_ids (same completions); one of A's
  overlapping copies has a verifier timeout where the other passed;
- task B: the N=8 job (seed 0) and an N=4 job with seed 1 (disjoint samples);
- task D: an adaptive exact job (N=8, band 0.1,0.9, round 4) that stopped after 4 draws;
- task A again at temperature 0.5 (N=4): another distribution, never pooled with the others;
- imported rollouts (params hash 'imported', no sampling params) and a ledger row whose params hash
  no trajectory explains: both must come through unchanged;
- a selection 'band' on the N=8 slice, pinned to the passrates version it read.
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
from rldata.ledger import passrate_row, recompute_passrates
from rldata.params import SamplingSpec
from rldata.store import open_store

T0 = dt.datetime(2027, 3, 1, 12, 0, tzinfo=dt.UTC)
MODEL, REV = "tiny-arith@0123456789ab", "0123456789ab"
CALC = "calculator@1"


def _sample_rows(tasks, spec, run_id, idxs, *, calc=(), flaky=(), errors=()):
    """The rows the previous release's sample job writes for ``idxs`` of each task."""
    trajs, vers = [], []
    for tid, answer in tasks:
        ekey = CALC if tid in calc else ""
        for idx in idxs:
            t = traj_id(MODEL, spec.params_hash, spec.seed, tid, idx, ekey)
            # deterministic in (task, seed, index, temperature), like the engine: both jobs drew the same
            ok = (idx + spec.seed + len(tid)) % 3 != 0 and spec.temperature == 1.0
            completion = answer if ok else "0"
            trajs.append(
                {
                    "traj_id": t,
                    "task_id": tid,
                    "run_id": run_id,
                    "sample_idx": idx,
                    "model": MODEL,
                    "model_revision": REV,
                    "policy_version": 0,
                    "params_hash": spec.params_hash,
                    "sampling_params": spec.to_json(),
                    "seed": spec.seed,
                    "prompt": f"prompt of {tid}",
                    "completion": completion,
                    "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": completion}]
                    if ekey
                    else None,
                    "prompt_tokens": 9,
                    "completion_tokens": 2 + idx % 3,
                    "cumulative_logprob": -0.5 - idx,
                    "finish_reason": "env_done" if ekey else "stop",
                    "reward": float(ok),
                    "created_at": T0,
                    "env_id": "calculator" if ekey else None,
                    "env_version": "1" if ekey else None,
                    "num_turns": 2 if ekey else 1,
                    "num_tool_calls": 1 if ekey else 0,
                    "env_info": '{"tool_calls": 1}' if ekey else None,
                }
            )
            timeout = (tid, idx) in flaky or (tid, idx) in errors
            vers.append(
                {
                    "traj_id": t,
                    "task_id": tid,
                    "verifier": "math",
                    "verifier_version": "1",
                    "layer": "answer",
                    "passed": None if timeout else ok,
                    "score": 0.0 if timeout else float(ok),
                    "extracted": None if timeout else completion,
                    "error": "timeout after 10.0s" if timeout else None,
                    "created_at": T0,
                }
            )
    return trajs, vers


def main(out: str) -> None:
    store = open_store(out)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "mini4.jsonl"
        src.write_text(
            "".join(
                json.dumps({"prompt": f"What is {i} * {i + 3}?", "answer": str(i * (i + 3))}) + "\n"
                for i in range(4)
            )
        )
        ingest(store, src, source="mini", domain="math")
    tasks = store.read("tasks").sort("task_id")
    (a, b, c, d), answers = tasks["task_id"].to_list(), dict(zip(tasks["task_id"], tasks["answer"]))
    store.upsert(
        "tasks",
        [{**r, "env_id": "calculator", "env_version": "1"} for r in tasks.filter(pl.col("task_id") == c).to_dicts()],
    )
    store.append(
        "environments",
        [
            {
                "env_id": "calculator",
                "kind": "calculator",
                "spec": '{"config": {}, "env": "calculator", "max_turns": 4}',
                "version": "1",
                "created_at": T0,
            }
        ],
    )
    n4, n8 = SamplingSpec(n=4, max_tokens=8, seed=0), SamplingSpec(n=8, max_tokens=8, seed=0)
    n4s1, hot = SamplingSpec(n=4, max_tokens=8, seed=1), SamplingSpec(n=4, temperature=0.5, max_tokens=8, seed=0)
    jobs = [  # (run, spec, tasks, sample indices drawn, extra)
        ("run-n4", n4, [a, c], range(4), {"flaky": {(a, 1)}}),
        ("run-n8", n8, [a, b, c], range(8), {"errors": {(a, 5)}}),
        ("run-n4-seed1", n4s1, [b], range(4), {}),
        ("run-adaptive", n8, [d], range(4), {}),  # exact rule, stopped after one round of 4
        ("run-hot", hot, [a], range(4), {}),
    ]
    for run_id, spec, tids, idxs, extra in jobs:
        store.append(
            "runs",
            [
                {
                    "run_id": run_id,
                    "kind": "sample",
                    "args": json.dumps({"spec": spec.to_dict()}),
                    "status": "done",
                    "started_at": T0,
                    "ended_at": T0,
                    "summary": json.dumps({"params_hash": spec.params_hash}),
                }
            ],
        )
        trajs, vers = _sample_rows([(t, answers[t]) for t in tids], spec, run_id, idxs, calc={c}, **extra)
        store.append("trajectories", trajs)
        store.append("verifications", vers)
        rows = recompute_passrates(
            store, model=MODEL, params_hash=spec.params_hash, verifier_keys=["math@1"], task_ids=tids, write=False
        )
        stop = (
            {"stop_rule": "exact", "confidence": 1.0, "n_max": 8, "band": "0.1,0.9"}
            if run_id == "run-adaptive"
            else {}
        )
        store.upsert("passrates", [{**r, **stop, "run_id": run_id, "updated_at": T0} for r in rows])
    # rollouts another trainer logged: no sampling params, the hash 'imported'
    store.append(
        "trajectories",
        [
            {
                "traj_id": f"imp-{i}",
                "task_id": a,
                "run_id": "import:jsonl:abc",
                "sample_idx": i,
                "model": "unknown",
                "policy_version": 0,
                "params_hash": "imported",
                "prompt": "p",
                "completion": "c",
                "created_at": T0,
            }
            for i in range(2)
        ],
    )
    # a ledger row no stored trajectory explains (its samples were written by hand, then deleted)
    store.upsert(
        "passrates",
        [
            {
                **passrate_row(
                    a, model=MODEL, params_hash="0000feedbeef0000", verifier_key="math@1", n=3, n_correct=1, n_error=0
                ),
                "run_id": "run-lost",
                "updated_at": T0,
            }
        ],
    )
    pv = store.version("passrates")
    sel = store.sql(
        "SELECT task_id, n, n_correct, pass_rate FROM passrates WHERE params_hash = $1 AND env_version = '' "
        "ORDER BY task_id",
        params=[n8.params_hash],
    ).fetchall()
    key = {"model": MODEL, "params_hash": n8.params_hash, "verifier_key": "math@1"}
    params = {"band": [0.1, 0.9], "inclusive": True, "min_n": 8, "domain": None, **key, "decided_by": {"exact": 1, "fixed": 2}}
    store.append(
        "selections",
        [
            {
                "selection": "band",
                "task_id": tid,
                "decision": "keep" if 0 < k < n else "drop",
                "reason": "in_band" if 0 < k < n else "too_easy",
                "pass_rate": rate,
                "n": n,
                "n_correct": k,
                **key,
                "passrates_version": pv,
                "params": json.dumps(params, sort_keys=True),
                "created_at": T0,
            }
            for tid, n, k, rate in sel
        ],
    )
    store.append("metrics", [{"run_id": "run-n8", "step": 0, "name": "reward/total", "value": 0.6, "created_at": T0}])
    print({t: store.count(t) for t in ("tasks", "trajectories", "verifications", "passrates", "runs", "selections")})
    print({"n4": n4.params_hash, "n8": n8.params_hash, "n4s1": n4s1.params_hash, "hot": hot.params_hash})


if __name__ == "__main__":
    main(sys.argv[1])
