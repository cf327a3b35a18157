"""Issue 28 §4: live samplers against uniform, dynamic sampling and the static curriculum, through the
real CLI, on the bundled tiny model and arith tasks (CPU).

    python benchmarks/bench_live_samplers.py [--seeds 5] [--steps 40] [--eval-every 5] [--base-tasks 600]

1. ingest the bundled arith tasks and their held-out split; base pass rates at N=16 on
   ``--base-tasks`` training tasks (the live samplers' ledger prior, and the curriculum's buckets:
   ``rldata filter --band 0.1,0.9`` then ``rldata stratify``);
2. per seed, six runs over the same tasks with the same steps, batch and eval schedule:
   ``uniform`` (no dynamic sampling), ``uniform+ds`` (today's default), ``curriculum`` (static
   buckets), ``live:band`` (prime-rl pools), ``live:learnability``, ``live:skip``;
3. per run, from the metrics table: rollouts generated (``samples`` summed) up to each evaluation,
   held-out accuracy at N=16, the zero-variance group share; then per config over seeds: the rollouts
   to reach ``uniform+ds``'s final accuracy (same seed), the final accuracy, the share, as means
   with a t-interval, and paired differences against ``uniform+ds`` per seed.

Everything lands under benchmarks/_work/live_bench/; the summary is printed as JSON and written to
benchmarks/bench_live_samplers.json.  On 2 cores a seed of six 40-step runs takes about an hour.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from _cli_runs import rldata
from _cli_runs import sql as _sql

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "live_bench"
TRAIN_SPLIT = "json_extract_string(metadata, '$.split') = 'train'"
CONFIGS = {
    "uniform": ["--sampler", "uniform"],  # and dynamic_sampling: false in its config file
    "uniform+ds": ["--sampler", "uniform"],
    "curriculum": [],  # the curriculum file's own sampler (mixture)
    "live:band": ["--sampler", "live:band"],
    "live:learnability": ["--sampler", "live:learnability"],
    "live:skip": ["--sampler", "live:skip"],
}
BASELINE = "uniform+ds"


def sh(*argv: str) -> str:
    return rldata(WORK / "store", *argv, tail=3)


def sql(q: str) -> list[dict]:
    return _sql(WORK / "store", q)


def prepare(args) -> None:
    if (WORK / "buckets.yaml").exists():
        return
    if not ((WORK / "store").exists() and sql("SELECT count(*) AS n FROM passrates")[0]["n"]):
        prepare_base(args)
    model = sql("SELECT model FROM passrates GROUP BY model ORDER BY count(*) DESC LIMIT 1")[0]["model"]
    sh("filter", "--band", "0.1,0.9", "--name", "band16", "--model", model)
    sh(
        "stratify",
        "-s",
        "band16",
        "--buckets",
        "easy:0.5-0.9,hard:0.1-0.5",
        "--phase-steps",
        str(max(1, args.steps // 4)),
        "--curriculum",
        str(WORK / "buckets.yaml"),
    )


def prepare_base(args) -> None:
    sh("ingest", "--sample", "arith")
    sh("ingest", "--sample", "arith-heldout")
    where = f"t.task_id IN (SELECT task_id FROM tasks WHERE {TRAIN_SPLIT} ORDER BY task_id LIMIT {args.base_tasks})"
    sh("sample", "--n", "16", "--where", where, "--max-tokens", str(args.max_tokens), "--seed", "0")


def run(args, name: str, seed: int) -> dict:
    run_id = f"{name.replace(':', '-').replace('+', '-')}-s{seed}"
    done = sql(f"SELECT count(*) AS n FROM runs WHERE run_id = '{run_id}' AND status = 'done'")[0]["n"]
    if not done:
        cfg = WORK / f"train-{run_id}.yaml"
        cfg.write_text(
            f"prompts_per_step: {args.prompts}\ngroup_size: {args.group}\nmax_tokens: {args.max_tokens}\n"
            f"lr: {args.lr}\nmicro_batch: {args.prompts * args.group}\nmax_resample: 2\n"
            f"eval_size: {args.eval_size}\neval_n: 16\nlive: {{decay: {args.decay}}}\n"
            f"dynamic_sampling: {'false' if name == 'uniform' else 'true'}\n"
        )
        sh(
            "train",
            "--config",
            str(cfg),
            "--curriculum",
            str(WORK / "buckets.yaml"),
            "--seed",
            str(seed),
            "--steps",
            str(args.steps),
            "--eval-every",
            str(args.eval_every),
            "--eval-heldout",
            "--run-id",
            run_id,
            "--out",
            str(WORK / "runs"),
            *CONFIGS[name],
        )
    rows = sql(
        f"SELECT step, name, value FROM metrics WHERE run_id = '{run_id}' AND name IN "
        "('samples', 'eval/accuracy', 'zero_variance_share') ORDER BY step"
    )
    samples, cum, curve, zv = {}, 0.0, [], []
    for r in rows:
        if r["name"] == "samples":
            cum += r["value"]
            samples[r["step"]] = cum
        elif r["name"] == "zero_variance_share":
            zv.append(r["value"])
    for r in rows:
        if r["name"] == "eval/accuracy":
            curve.append((samples.get(r["step"], 0.0), r["value"]))
    return {"run_id": run_id, "curve": curve, "zero_variance_share": statistics.fmean(zv) if zv else None}


def rollouts_to(curve, target: float):
    return next((n for n, acc in curve if acc >= target), None)


def interval(xs: list[float]) -> dict:
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"mean": None, "n": 0}
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return {"mean": m, "n": 1}
    t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57}.get(len(xs), 2.0)  # 95% two-sided, n-1 dof
    half = t * statistics.stdev(xs) / math.sqrt(len(xs))
    return {"mean": m, "lo": m - half, "hi": m + half, "n": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--eval-size", type=int, default=150)
    ap.add_argument("--base-tasks", type=int, default=600)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--decay", type=float, default=0.9)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    prepare(args)
    names = args.configs.split(",")
    runs = {(n, s): run(args, n, s) for s in range(args.seeds) for n in names}
    out = {"args": vars(args), "configs": {}}
    spread = sql(
        "SELECT stddev_pop(pass_rate) AS sd, avg(pass_rate) AS mean, count(*) AS tasks FROM passrates "
        "WHERE model NOT LIKE '%+%' AND model NOT LIKE 'step-%'"
    )
    out["base_pass_rate_spread"] = spread[0]
    for n in names:
        per_seed = []
        for s in range(args.seeds):
            r, base = runs[(n, s)], runs.get((BASELINE, s))
            target = base["curve"][-1][1] if base and base["curve"] else None
            per_seed.append(
                {
                    "seed": s,
                    "final": r["curve"][-1][1] if r["curve"] else None,
                    "rollouts_to_baseline_final": rollouts_to(r["curve"], target)
                    if target is not None
                    else None,
                    "rollouts_total": r["curve"][-1][0] if r["curve"] else None,
                    "zero_variance_share": r["zero_variance_share"],
                }
            )
        out["configs"][n] = {
            "final": interval([p["final"] for p in per_seed]),
            "rollouts_to_baseline_final": interval([p["rollouts_to_baseline_final"] for p in per_seed]),
            "zero_variance_share": interval([p["zero_variance_share"] for p in per_seed]),
            "per_seed": per_seed,
        }
    if BASELINE in names:
        for n in names:
            diffs = [
                (a["final"] - b["final"]) if a["final"] is not None and b["final"] is not None else None
                for a, b in zip(out["configs"][n]["per_seed"], out["configs"][BASELINE]["per_seed"])
            ]
            out["configs"][n]["paired_final_diff_vs_baseline"] = interval(diffs)
    (HERE / "bench_live_samplers.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
