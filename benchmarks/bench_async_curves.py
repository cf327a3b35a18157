"""Issue 14 §4 "Learning": held-out accuracy curves of sync against async K=1/2/4, and async K=2
without the behaviour weight, over several seeds, through the real CLI on the bundled tiny model.

    nice -n 10 python benchmarks/bench_async_curves.py [--steps 40] [--eval-every 20] [--seeds 0,1,2] [--tag T]
    python benchmarks/bench_async_curves.py --report   # merge every tag's runs, print the table

1. ingest the bundled arith tasks and their held-out split (once, into benchmarks/_work/async_curves);
2. for every config and seed: ``rldata train --where <training split> --eval-heldout`` with the same
   steps, prompts per step and group size, and no dynamic sampling, so every run generates and
   trains on exactly steps x prompts x G rollouts;
3. the held-out accuracy curve of each run from the metrics table; the mean over seeds with its
   min-max band per config -> benchmarks/bench_async_curves.json and .png.

Runs already recorded in the work dir's runs.json are skipped, so an interrupted benchmark
resumes; ``--only CONFIG`` runs one config (e.g. to time one run first).  ``--tag T`` uses its own
work dir and store (benchmarks/_work/async_curves-T), so two invocations can share the machine's
cores (e.g. ``--seeds 0`` and ``--seeds 1``); ``--report`` merges every work dir's runs into the
JSON and PNG.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from _cli_runs import band_summary, plot_bands, rldata, settings_dict, settings_file, train_settings
from _cli_runs import sql as _sql

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "async_curves"  # + "-<tag>" with --tag
TRAIN_SPLIT = "json_extract_string(metadata, '$.split') = 'train'"

# the runs' shared `rldata train` settings (TrainConfig / TrainRun fields); any `rldata train` option on
# the command line wins over them (--steps 20, --lr 2e-4, --eval-n 4...)
TRAIN = {
    "steps": 40,
    "prompts_per_step": 32,
    "n": 8,
    "max_tokens": 8,
    "lr": 1e-4,
    "dynamic_sampling": False,  # every step trains on exactly prompts x G rollouts
    "where": TRAIN_SPLIT,
    "eval": {"every": 20, "size": 200, "n": 8, "heldout": True},
}
# name -> the TrainConfig fields that differ; everything else is shared by all runs.
CONFIGS = {
    "sync": {"mode": "sync"},
    "async K=1": {"mode": "async", "max_staleness": 1},
    "async K=2": {"mode": "async", "max_staleness": 2},
    "async K=4": {"mode": "async", "max_staleness": 4},
    "async K=2, no behaviour weight": {"mode": "async", "max_staleness": 2, "behav_weight": False},
}


def sh(*argv: str) -> str:
    return rldata(WORK / "store", *argv)


def sql(q: str) -> list[dict]:
    return _sql(WORK / "store", q)


def slug(name: str, seed: int) -> str:
    s = name.replace("async K=", "async-k").replace(", no behaviour weight", "-nobw")
    return f"curves-{s}-s{seed}"


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def curve_of(run_id: str) -> list[tuple[int, float]]:
    rows = sql(
        f"SELECT step, value FROM metrics WHERE run_id = '{run_id}' AND name = 'eval/accuracy' ORDER BY step"
    )
    return [(r["step"], r["value"]) for r in rows]


def step_means(run_id: str) -> dict[str, float]:
    rows = sql(
        f"SELECT name, avg(value) AS v FROM metrics WHERE run_id = '{run_id}' AND name IN "
        "('reward_mean', 'samples', 'staleness', 'rho_mean', 'tis_frac', 'mismatch_kl', "
        "'clip_frac', 'time/step') GROUP BY name"
    )
    return {r["name"]: r["v"] for r in rows}


def train(args, name: str, seed: int) -> dict:
    run_id = slug(name, seed)
    t = args.train.train
    fields = {"micro_batch": t.micro_batch or t.batch_size, **CONFIGS[name]}
    cfg = settings_file(args.train, WORK / f"{run_id}.yaml", **fields)
    before = load()
    t0 = time.monotonic()
    sh("train", "--config", str(cfg), "--seed", str(seed), "--run-id", run_id, "--out", str(WORK / "runs"))
    wall = round(time.monotonic() - t0, 1)
    means = step_means(run_id)
    return {
        "config": name,
        "seed": seed,
        "run_id": run_id,
        "fields": fields,
        "curve": curve_of(run_id),
        "rollouts": round(means.get("samples", 0) * t.steps),
        "per_step_mean": means,
        "wall_s": wall,
        "load_before": before,
        "load_after": load(),
    }


def summarise(runs: list[dict]) -> dict:
    """Per config and eval step: mean, min and max held-out accuracy over the seeds run."""
    groups = {name: [r["curve"] for r in runs if r["config"] == name] for name in CONFIGS}
    return {name: band_summary(curves) for name, curves in groups.items() if curves}


def write_report(args, extra: dict | None = None) -> dict:
    """Every run of every work dir (all tags) -> bench_async_curves.json and .png."""
    runs = []
    for f in sorted((HERE / "_work").glob("async_curves*/runs.json")):
        runs += json.loads(f.read_text())
    runs.sort(key=lambda r: (r["seed"], list(CONFIGS).index(r["config"])))
    summary = {
        "train": settings_dict(args.train),
        "rollouts_per_run": args.train.train.steps * args.train.train.batch_size,
        "machine": {"cpus": os.cpu_count()},
        "mean_over_seeds": summarise(runs),
        "runs": runs,
        **(extra or {}),
    }
    (HERE / "bench_async_curves.json").write_text(json.dumps(summary, indent=2, default=str))
    plot_bands(
        summary["mean_over_seeds"],
        HERE / "bench_async_curves.png",
        eval_n=args.train.train.eval_spec().n,
        style=lambda name: "--" if "no behaviour" in name else "-",
    )
    return summary


def markdown(summary: dict) -> str:
    """The RESULTS.md table: accuracy per eval step (mean, min..max over seeds), and per-step means."""
    steps = next(iter(summary["mean_over_seeds"].values()), {})
    head = " / ".join(steps)
    lines = [
        (
            f"| config | seeds | held-out accuracy at step {head}: mean (min..max) | "
            "gain at the last step, mean (min..max) | staleness | rho mean | TIS frac | mismatch KL | wall s |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, per_step in summary["mean_over_seeds"].items():
        rs = [r for r in summary["runs"] if r["config"] == name]
        acc = " / ".join(f"{v['mean']:.3f} ({v['min']:.3f}..{v['max']:.3f})" for v in per_step.values())
        gains = [r["curve"][-1][1] - r["curve"][0][1] for r in rs]
        gain = f"{sum(gains) / len(gains):+.3f} ({min(gains):+.3f}..{max(gains):+.3f})"

        def avg(key, rs=rs):
            vals = [r["per_step_mean"].get(key) for r in rs if r["per_step_mean"].get(key) is not None]
            return sum(vals) / len(vals) if vals else float("nan")

        wall = " / ".join(f"{r['wall_s']:.0f}" for r in rs)
        lines.append(
            f"| {name} | {len(rs)} | {acc} | {gain} | {avg('staleness'):.2f} | {avg('rho_mean'):.3f} | "
            f"{avg('tis_frac'):.4f} | {avg('mismatch_kl'):.4f} | {wall} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Any other option is rldata train's (see rldata train --help).",
    )
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--only", action="append", choices=list(CONFIGS), help="run only these configs")
    ap.add_argument("--tag", help="own work dir and store: benchmarks/_work/async_curves-TAG")
    ap.add_argument("--report", action="store_true", help="only merge the recorded runs into JSON + PNG")
    args, rest = ap.parse_known_args()
    args.train = train_settings(TRAIN, rest)  # the runs' settings, by rldata train's own options
    if args.report:
        print(markdown(write_report(args)))
        return
    global WORK
    if args.tag:
        WORK = WORK.with_name(f"async_curves-{args.tag}")
    WORK.mkdir(parents=True, exist_ok=True)
    record = WORK / "runs.json"
    if not (WORK / "store").exists() or not sql("SELECT count(*) AS n FROM tasks")[0]["n"]:
        sh("ingest", "--sample", "arith")
        sh("ingest", "--sample", "arith-heldout")
    runs = json.loads(record.read_text()) if record.exists() else []
    done = {r["run_id"] for r in runs}
    seeds = [int(s) for s in args.seeds.split(",")]
    names = args.only or list(CONFIGS)
    # Seed-major order: every config gets its first seed's run before any second-seed run, so a
    # partial benchmark still compares all configs.
    for seed in seeds:
        for name in names:
            if slug(name, seed) in done:
                continue
            r = train(args, name, seed)
            runs.append(r)
            record.write_text(json.dumps(runs, indent=2, default=str))
            write_report(args)
            print(
                f"{r['run_id']}: curve {r['curve']} rollouts {r['rollouts']} wall {r['wall_s']}s "
                f"load {r['load_before']} -> {r['load_after']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
