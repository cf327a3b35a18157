"""Issue 5 §6 experiments, through the real CLI, on the bundled tiny model and arith tasks (CPU).

    python benchmarks/train_experiments.py [--steps 40] [--eval-every 10] [--base-tasks 1000]

1. ingest the bundled arith tasks and their held-out split;
2. base pass rates at N=16 (``rldata sample``) on ``--base-tasks`` training tasks, then
   ``rldata filter --band 0.1,0.9`` and ``rldata stratify`` (easy/hard buckets, easy first) -> buckets.yaml;
3. run A: ``rldata train --curriculum buckets.yaml`` (band-filtered buckets, curriculum mixture);
   run B: ``rldata train --where <all training tasks>`` (unfiltered, uniform); same seed, steps,
   batch, eval schedule;
4. held-out accuracy at N=16 before, every ``--eval-every`` steps and after, from the metrics table;
   steps each run needs to reach given accuracies; a PNG of both curves.

Everything lands under benchmarks/_work/train_exp/ (store, runs); the summary is printed as JSON and
written to benchmarks/train_experiments.json, the curves to benchmarks/train_experiments.png.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _cli_runs import rldata, settings_dict, settings_file, train_settings
from _cli_runs import sql as _sql

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "train_exp"  # + "-<tag>" with --tag
TRAIN_SPLIT = "json_extract_string(metadata, '$.split') = 'train'"
# the runs' `rldata train` settings (TrainConfig / TrainRun fields); any `rldata train` option on the
# command line wins over them (--steps 20, --lr 1e-4, --model DIR...)
TRAIN = {
    "steps": 40,
    "prompts_per_step": 16,
    "n": 8,
    "max_tokens": 8,
    "lr": 5e-4,
    "max_resample": 2,
    "seed": 0,
    "eval": {"every": 10, "size": 150, "n": 16, "heldout": True},
}


def sh(*argv: str) -> str:
    return rldata(WORK / "store", *argv, tail=3)


def sql(q: str) -> list[dict]:
    return _sql(WORK / "store", q)


def prepare(args) -> dict:
    if not sql("SELECT count(*) AS n FROM tasks")[0]["n"]:
        sh("ingest", "--sample", "arith")
        sh("ingest", "--sample", "arith-heldout")
    where = (
        f"t.task_id IN (SELECT task_id FROM tasks WHERE {TRAIN_SPLIT} ORDER BY task_id "
        f"LIMIT {args.base_tasks})"
    )
    sh(
        "sample",
        "--n",
        "16",
        "--where",
        where,
        "--max-tokens",
        str(args.train.train.rollout.max_tokens),
        "--seed",
        "0",
        *model_opt(args),
    )
    base = sql(
        "SELECT model, count(*) AS tasks, avg(pass_rate) AS mean FROM passrates GROUP BY model "
        "ORDER BY tasks DESC LIMIT 1"
    )[0]
    sh("filter", "--band", "0.1,0.9", "--name", "band16", "--model", base["model"])
    sh(
        "stratify",
        "-s",
        "band16",
        "--buckets",
        "easy:0.5-0.9,hard:0.1-0.5",
        "--phase-steps",
        str(args.train.train.steps // 4),
        "--curriculum",
        str(WORK / "buckets.yaml"),
    )
    kept = sql(
        "SELECT bucket, count(*) AS n FROM selections WHERE selection = 'band16' AND decision = 'keep' "
        "GROUP BY bucket ORDER BY bucket"
    )
    return {
        "base_model": base["model"],
        "base_tasks": base["tasks"],
        "base_train_pass_rate": base["mean"],
        "band_buckets": {r["bucket"]: r["n"] for r in kept},
    }


def model_opt(args) -> list[str]:
    """The base sampling's model: the runs' own (--model, an rldata train option)."""
    model = args.train.train.engine.model
    return ["--model", model] if model else []


def train(args, run_id: str, *extra: str) -> dict:
    t = args.train.train
    cfg = settings_file(args.train, WORK / "train.yaml", micro_batch=t.micro_batch or t.batch_size)
    t0 = time.monotonic()
    out = sh(
        "train",
        "--config",
        str(cfg),
        "--run-id",
        run_id,
        "--out",
        str(WORK / "runs"),
        "--format",
        "json",
        *extra,
    )
    row = json.loads(out)[0]
    row["wall_s"] = round(time.monotonic() - t0, 1)
    curve = sql(
        f"SELECT step, value FROM metrics WHERE run_id = '{run_id}' AND name = 'eval/accuracy' ORDER BY step"
    )
    per_step = sql(
        f"SELECT name, avg(value) AS v, sum(value) AS s FROM metrics WHERE run_id = '{run_id}' AND name "
        "IN ('reward_mean', 'groups_kept', 'groups_dropped', 'samples', 'time/step', 'learner_idle_frac') "
        "GROUP BY name"
    )
    row["curve"] = [(r["step"], r["value"]) for r in curve]
    row["per_step_mean"] = {r["name"]: r["v"] for r in per_step}
    row["samples_total"] = next((r["s"] for r in per_step if r["name"] == "samples"), None)
    return row


def steps_to(curve, target: float):
    return next((s for s, v in curve if v >= target), None)


def plot(runs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
    for name, r in runs.items():
        xs, ys = zip(*r["curve"])
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out accuracy (N=16)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def report(suffix: str) -> None:
    """Curves of every training run in the store (also runs started by hand), as JSON and PNG."""
    rows = sql("SELECT run_id, step, value FROM metrics WHERE name = 'eval/accuracy' ORDER BY run_id, step")
    runs: dict = {}
    for r in rows:
        runs.setdefault(r["run_id"], {"curve": []})["curve"].append((r["step"], r["value"]))
    (HERE / f"train_experiments{suffix}.json").write_text(json.dumps(runs, indent=2))
    plot(runs, HERE / f"train_experiments{suffix}.png")
    print(json.dumps(runs, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Any other option is rldata train's (see rldata train --help).",
    )
    ap.add_argument("--base-tasks", type=int, default=1000)
    ap.add_argument("--tag", help="work dir suffix and result file suffix")
    ap.add_argument(
        "--report-only", action="store_true", help="only re-read the curves of every run in the store"
    )
    args, rest = ap.parse_known_args()
    args.train = train_settings(TRAIN, rest)  # the runs' settings, by rldata train's own options
    global WORK
    if args.tag:
        WORK = WORK.with_name(f"train_exp-{args.tag}")
    suffix = f"-{args.tag}" if args.tag else ""
    if args.report_only:
        report(suffix)
        return
    WORK.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    prep = prepare(args)
    runs = {
        "curriculum (band buckets)": train(
            args, "exp-curriculum", "--curriculum", str(WORK / "buckets.yaml")
        ),
        "uniform (unfiltered)": train(args, "exp-uniform", "--where", TRAIN_SPLIT),
    }
    before = runs["curriculum (band buckets)"]["curve"][0][1]
    best = max(v for r in runs.values() for _, v in r["curve"])
    targets = sorted({round(before + f * (best - before), 4) for f in (0.25, 0.5, 0.75)})
    summary = {
        "args": {k: v for k, v in vars(args).items() if k != "train"},
        "train": settings_dict(args.train),
        **prep,
        "runs": runs,
        "targets": {str(t): {name: steps_to(r["curve"], t) for name, r in runs.items()} for t in targets},
        "total_wall_s": round(time.monotonic() - t0, 1),
    }
    (HERE / f"train_experiments{suffix}.json").write_text(json.dumps(summary, indent=2, default=str))
    plot(runs, HERE / f"train_experiments{suffix}.png")
    print(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
