"""One weight sync, learner actor -> engine actor, the way the trainer did it and the way it does now.

    python benchmarks/bench_weight_sync.py [--model DIR] [--reps 30]

Local Ray, one learner actor (rldata.trainer.learner.LearnerGroup) and one vLLM engine actor
(rldata.engine.actors.start_engines), the bundled model unless ``--model``.  Per path, ``--reps`` timed
syncs after 3 untimed ones, median and min in ms:

- ``tensors + vllm reload``: what the trainer did before: rank 0's ``get_weights`` (one pickled tensor
  per parameter) into the engine's vLLM ``reload_weights``;
- ``flat + vllm reload``: one flat buffer, still vLLM's loader;
- ``flat + direct``: one flat buffer copied straight into vLLM's parameters (what the trainer does now).

Each path is timed end to end (``ray.get(engine.reload_weights.remote(learner.X.remote()))``, what the
producer thread waits for), and the engine's part alone (the weights already in the object store).
Prints one JSON object; run it under an exclusive lock on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()

    import ray

    from rldata.engine.actors import ensure_ray, start_engines
    from rldata.engine.core import default_model_path
    from rldata.trainer.config import TrainConfig
    from rldata.trainer.learner import LearnerGroup

    ensure_ray(None, num_cpus=3)
    model = args.model or str(default_model_path())
    cfg = TrainConfig(model=model, prompts_per_step=4, n=16, micro_batch=64)
    learners = LearnerGroup(model, cfg)
    engine = start_engines(1, model, engine_kwargs={"max_model_len": 64, "kv_cache_gib": 1.0})[0]
    rank0 = learners.actors[0]

    def timed(fn) -> dict:
        for _ in range(3):
            fn()
        ts = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return {"median_ms": 1e3 * statistics.median(ts), "min_ms": 1e3 * min(ts)}

    paths = {
        "tensors + vllm reload": (rank0.get_weights, False),
        "flat + vllm reload": (rank0.flat_weights, False),
        "flat + direct": (rank0.flat_weights, True),
    }
    out = {"model": model, "reps": args.reps, "load_avg_before": os.getloadavg()}
    for name, (get, direct) in paths.items():
        ref = get.remote()
        how = ray.get(engine.reload_weights.remote(ref, direct))
        out[name] = {
            "loaded_by": how,
            "end_to_end": timed(lambda g=get, d=direct: ray.get(engine.reload_weights.remote(g.remote(), d))),
            "engine_only": timed(lambda r=ref, d=direct: ray.get(engine.reload_weights.remote(r, d))),
            "learner_to_store": timed(lambda g=get: ray.wait([g.remote()], fetch_local=False)),
        }
    out["load_avg_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
