"""Issue 28 §4: live samplers against uniform, dynamic sampling and the static curriculum, through the
real CLI, on the bundled tiny model and arith tasks (CPU).

    python benchmarks/bench_live_samplers.py [--seeds 3] [--base-tasks 400] [rldata train options: --steps 12 --eval-every 6 --lr 1e-4 ...]

1. ingest the bundled arith tasks and their held-out split; base pass rates at N=16 on
   ``--base-tasks`` training tasks: the pool.  Every config but the curriculum draws from the whole
   pool (all-wrong and all-right tasks included: what a live sampler has to steer away from; the
   live samplers' prior is these ledger rows); the curriculum draws from its band-filtered buckets of
   the same tasks (``rldata filter --band 0.1,0.9`` then ``rldata stratify``), the offline answer;
2. per seed, nine runs with the same steps, batch and eval schedule: ``uniform`` (no dynamic
   sampling), ``uniform+ds`` (today's default), ``curriculum`` (static buckets), ``live:band``
   (prime-rl pools), ``live:learnability``, ``live:skip``, ``curriculum+live:band`` (the
   curriculum's phases, live:band choosing within each), and ``gaussian`` / ``curriculum+gaussian``
   (issue 43 §4, alone and within the buckets); ``--configs`` picks some; one local Ray serves all runs;
3. per run, from the metrics table: rollouts generated (``samples`` summed, resampling rounds
   included) up to each evaluation, held-out accuracy at N=16, the zero-variance group share; then
   per config over seeds: the rollouts to reach ``uniform+ds``'s final accuracy (same seed), the
   final accuracy, the share, as means with a t-interval, and paired differences against
   ``uniform+ds`` per seed.

Everything lands under benchmarks/_work/live_bench/ (``wall-RUN.txt``: seconds and load average per
run); the summary is printed as JSON and written to benchmarks/bench_live_samplers.json.  A run is
skipped when the store has it done, so an interrupted benchmark continues; ``--no-run`` summarises.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _cli_runs import rldata, settings_dict, settings_file, train_settings

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
    # live:band choosing among each curriculum phase's band-filtered tasks (issue 28 §2: "with the
    # bucket curriculum")
    "curriculum+live:band": ["--sampler", "live:band"],
    # issue 43 §4: the Nemotron-style curriculum (a Gaussian over pass rate, its mean from easy to hard
    # over the run, per domain), its default settings; alone on the pool and within the band buckets
    "gaussian": ["--sampler", "gaussian"],
    "curriculum+gaussian": ["--sampler", "gaussian"],
}
BASELINE = "uniform+ds"
# this benchmark's `rldata train` settings (TrainConfig / TrainRun fields); any `rldata train` option
# on the command line wins over them (--lr 1e-4, --n 4, --eval-every 10...)
TRAIN = {
    "steps": 40,
    "prompts_per_step": 16,
    "n": 8,
    "max_tokens": 8,
    "lr": 5e-4,
    "max_resample": 2,
    "decay": 0.9,
    "eval": {"every": 5, "size": 150, "n": 16, "heldout": True},
}


def sh(*argv: str) -> str:
    return rldata(WORK / "store", *argv, tail=3)


def sql(q: str) -> list[dict]:
    # in-process: a CLI round trip costs 10-20 s on a loaded 2-core machine, several per run
    from rldata import open_store

    return open_store(WORK / "store").sql(q).pl().to_dicts()


def shared_ray() -> subprocess.Popen:
    """One local Ray for every run (RAY_ADDRESS): each run would otherwise start and stop its own.
    The process that started it holds it; ending that process ends it."""
    # a private cluster on this machine, for this benchmark's own runs: no token between them
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import ray, sys, time; ray.init(address='local', num_cpus=4, include_dashboard=False, "
                "runtime_env={'env_vars': {'VLLM_ENABLE_V1_MULTIPROCESSING': '0'}}); "
                "print(ray.get_runtime_context().gcs_address, flush=True); time.sleep(10**7)"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    os.environ["RAY_ADDRESS"] = p.stdout.readline().strip()
    return p


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
        str(max(1, args.train.train.steps // 4)),
        "--curriculum",
        str(WORK / "buckets.yaml"),
    )


def prepare_base(args) -> None:
    sh("ingest", "--sample", "arith")
    sh("ingest", "--sample", "arith-heldout")
    where = f"t.task_id IN (SELECT task_id FROM tasks WHERE {TRAIN_SPLIT} ORDER BY task_id LIMIT {args.base_tasks})"
    max_tokens = str(args.train.train.rollout.max_tokens)
    sh("sample", "--n", "16", "--where", where, "--max-tokens", max_tokens, "--seed", "0")


# The pool every config but the curriculum draws from: the base-sampled tasks, unfiltered (their whole
# pass-rate spread, all-wrong and all-right tasks included: what a live sampler has to learn to avoid).
# The curriculum draws from its band-filtered buckets of the same tasks (the offline alternative).
POOL = "task_id IN (SELECT task_id FROM passrates)"


# The configs whose runs do not read the live state: a run of one is a function of its seed and
# settings (same held-out curve bit for bit, checked on seed 0), so --reuse may take them from an
# earlier summary made with the same settings instead of training them again.
REUSABLE = ("uniform", "uniform+ds", "curriculum")


def reused(args, name: str, seed: int) -> dict | None:
    if not args.reuse or name not in REUSABLE:
        return None
    old = json.loads(Path(args.reuse).read_text())
    same = old.get("train") == settings_dict(args.train) and old["args"]["base_tasks"] == args.base_tasks
    if not same:  # a summary of an earlier release records no train settings: not reused
        raise SystemExit(f"--reuse {args.reuse}: made with other settings")
    for p in old["configs"].get(name, {}).get("per_seed", []):
        if p["seed"] == seed:
            return {
                "run_id": f"reused from {Path(args.reuse).name}",
                "curve": p["curve"],
                "zero_variance_share": p["zero_variance_share"],
                "wall": p["wall_s_load"],
            }
    return None


def run(args, name: str, seed: int) -> dict:
    run_id = f"{name.replace(':', '-').replace('+', '_')}-s{seed}{args.tag}"
    done = sql(f"SELECT count(*) AS n FROM runs WHERE run_id = '{run_id}' AND status = 'done'")[0]["n"]
    if not done and (prior := reused(args, name, seed)) is not None:
        return prior
    if not done:
        if args.no_run:
            return None
        t = args.train.train
        cfg = settings_file(
            args.train,
            WORK / f"train-{run_id}.yaml",
            micro_batch=t.micro_batch or t.batch_size,  # one micro-batch per step unless given
            dynamic_sampling=name != "uniform",
        )
        tasks = (
            ["--curriculum", str(WORK / "buckets.yaml")]
            if name.startswith("curriculum")
            else ["--where", POOL]
        )
        # a run killed part-way (its checkpoints are there, its status is not done) continues
        resume = ["--resume"] if (WORK / "runs" / run_id / "checkpoints").is_dir() else []
        t0 = time.monotonic()
        sh(
            "train",
            "--config",
            str(cfg),
            *tasks,
            "--seed",
            str(seed),
            "--run-id",
            run_id,
            "--out",
            str(WORK / "runs"),
            *CONFIGS[name],
            *resume,
        )
        (WORK / f"wall-{run_id}.txt").write_text(f"{time.monotonic() - t0:.1f} {os.getloadavg()[0]:.2f}\n")
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
    wall = WORK / f"wall-{run_id}.txt"
    return {
        "run_id": run_id,
        "curve": curve,
        "zero_variance_share": statistics.fmean(zv) if zv else None,
        "wall": wall.read_text().split() if wall.exists() else None,
    }


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
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Any other option is rldata train's (see rldata train --help).",
    )
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--base-tasks", type=int, default=600)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--tag", default="", help="suffix of the run ids (a second setting in the same store)")
    ap.add_argument("--no-run", action="store_true", help="summarise the finished runs only")
    ap.add_argument(
        "--reuse", help="a summary JSON with the same settings: its uniform, uniform+ds and curriculum runs"
    )
    args, rest = ap.parse_known_args()
    args.train = train_settings(TRAIN, rest)  # the runs' settings, by rldata train's own options
    WORK.mkdir(parents=True, exist_ok=True)
    prepare(args)
    names = args.configs.split(",")
    ray = None if args.no_run or os.environ.get("RAY_ADDRESS") else shared_ray()
    try:
        runs = {(n, s): run(args, n, s) for s in range(args.seeds) for n in names}
        # --no-run: the seeds whose six runs have all finished
        seeds = [s for s in range(args.seeds) if all(runs[(n, s)] is not None for n in names)]
    finally:
        if ray is not None:
            ray.terminate()
            ray.wait(60)
    out = {
        "args": {k: v for k, v in vars(args).items() if k != "train"},
        "train": settings_dict(args.train),
        "seeds": seeds,
        "configs": {},
    }
    base = sql("SELECT model FROM passrates GROUP BY model ORDER BY count(*) DESC LIMIT 1")
    spread = sql(
        "SELECT stddev_pop(pass_rate) AS sd, avg(pass_rate) AS mean, count(*) AS tasks, "
        "avg(CASE WHEN n_correct = 0 THEN 1.0 ELSE 0.0 END) AS share_all_wrong, "
        "avg(CASE WHEN n_correct = n THEN 1.0 ELSE 0.0 END) AS share_all_right, "
        "avg(CASE WHEN pass_rate BETWEEN 0.1 AND 0.9 THEN 1.0 ELSE 0.0 END) AS share_in_band "
        f"FROM passrates WHERE model = '{base[0]['model']}' AND task_id IN (SELECT task_id FROM tasks WHERE {TRAIN_SPLIT})"
    )
    out["base_pass_rate_spread"] = spread[0]
    for n in names:
        per_seed = []
        for s in seeds:
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
                    "curve": r["curve"],
                    "wall_s_load": r["wall"],
                }
            )
        for p, b in zip(per_seed, [runs[(BASELINE, s)] for s in seeds] if BASELINE in names else []):
            # > 1: this config reached the baseline's final accuracy with that many times fewer rollouts
            mine, theirs = p["rollouts_to_baseline_final"], rollouts_to(b["curve"], b["curve"][-1][1])
            p["rollout_ratio_vs_baseline"] = theirs / mine if mine and theirs else None
        out["configs"][n] = {
            "final": interval([p["final"] for p in per_seed]),
            "rollouts_to_baseline_final": interval([p["rollouts_to_baseline_final"] for p in per_seed]),
            "zero_variance_share": interval([p["zero_variance_share"] for p in per_seed]),
            "rollout_ratio_vs_baseline": interval([p.get("rollout_ratio_vs_baseline") for p in per_seed]),
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
