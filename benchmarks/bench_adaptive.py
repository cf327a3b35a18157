"""`rldata sample --adaptive` on the real engine: samples drawn, wall time and agreement with fixed N.

Side by side in one run, each on a fresh store with the same tasks (the bundled 3,500 arith tasks
by default) and the same sampling params (N=16, T=1, max_tokens 8, seed 0):
fixed N=16, adaptive exact, sequential alpha 0.05 and alpha 0.01 (round 4, band [0.1, 0.9]).
Agreement: the keep/drop decision of `rldata filter --band 0.1,0.9` against fixed N's.

    python benchmarks/bench_adaptive.py [--tasks 3500] [--json benchmarks/bench_adaptive.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def _store(root: Path, n: int):
    from rldata import open_store
    from rldata.sample_data.arith import load_bundled

    rows = (load_bundled("train") + load_bundled("heldout"))[:n]
    store = open_store(root)
    store.append(
        "tasks",
        [
            {
                "task_id": f"b{i:05d}",
                "source": "arith",
                "domain": "math",
                "prompt": r["prompt"],
                "answer": r["answer"],
            }
            for i, r in enumerate(rows)
        ],
    )
    return store


def main() -> None:
    from rldata.configs.sampling import SampleConfig, SamplingSpec
    from rldata.jobs.sample import run_sample
    from rldata.ledger.select import Band, filter_store

    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=3500)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    spec = SamplingSpec(n=16, temperature=1.0, max_tokens=8, seed=0)
    rules = {
        "fixed": {},
        "exact": {"adaptive": "exact", "band": "0.1,0.9", "round_size": 4},
        "sequential a=0.05": {"adaptive": "sequential", "band": "0.1,0.9", "alpha": 0.05, "round_size": 4},
        "sequential a=0.01": {"adaptive": "sequential", "band": "0.1,0.9", "alpha": 0.01, "round_size": 4},
    }
    out, decisions = {"tasks": args.tasks, "load_before": os.getloadavg(), "rules": {}}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, rule in rules.items():
            store = _store(Path(tmp) / name.replace(" ", "_"), args.tasks)
            t0 = time.monotonic()
            s = run_sample(store, SampleConfig(sampling=spec, **rule))
            wall = time.monotonic() - t0
            _, rows = filter_store(store, name="band", band=Band(0.1, 0.9), dry_run=True)
            decisions[name] = dict(zip(rows["task_id"].to_list(), rows["decision"].to_list()))
            out["rules"][name] = {
                "samples": s.samples,
                "wall_s": round(wall, 1),
                "rounds": s.adaptive_rounds,
                "stopped_early": s.stopped_early,
            }
            print(name, out["rules"][name], flush=True)
    fixed = out["rules"]["fixed"]
    for name, r in out["rules"].items():
        same = sum(decisions[name][t] == d for t, d in decisions["fixed"].items())
        r["fraction_of_fixed_samples"] = round(r["samples"] / fixed["samples"], 4)
        r["wall_vs_fixed"] = round(r["wall_s"] / fixed["wall_s"], 3)
        r["agreement_with_fixed"] = round(same / len(decisions["fixed"]), 4)
    out["load_after"] = os.getloadavg()
    text = json.dumps(out, indent=1)
    if args.json:
        Path(args.json).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
