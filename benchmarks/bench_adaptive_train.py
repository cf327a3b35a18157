"""Issue 15 §3: does training on the adaptive selection match training on the fixed-N one?

    nice -n 10 python benchmarks/bench_adaptive_train.py [--steps 40] [--eval-every 20] [--seeds 0,1,2]

Through the real CLI, on the bundled tiny model and arith tasks (CPU). One store per selection rule
(a fresh store each, so the ledger, the selection named ``band`` and the runs never mix):

1. ingest the bundled arith tasks and their held-out split;
2. ``rldata sample --n 16`` on the first ``--tasks`` training tasks (by task_id): fixed N, then
   ``--adaptive exact --band 0.1,0.9`` and ``--adaptive sequential --alpha 0.05 --band 0.1,0.9``;
3. ``rldata filter --band 0.1,0.9 --name band`` in each store; kept counts and the overlap of each
   kept set with fixed N's;
4. ``rldata train --where "task_id IN (kept tasks of band)"`` (uniform over the kept tasks) per
   selection and seed, the same trainer settings for all; held-out accuracy from the metrics table.

Runs go seed by seed (every selection at seed 0, then seed 1, ...) so a cut-short benchmark still
holds paired runs. A finished run's row is cached under the work dir and reused on a rerun with the
same settings (``--cached-only`` reports those and starts none).
Output: benchmarks/bench_adaptive_train.json and .png (mean, min-max band per rule).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from _cli_runs import band_summary, plot_bands, rldata, settings_dict, settings_file, sql, train_settings

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "adaptive_train"
TRAIN_SPLIT = "json_extract_string(metadata, '$.split') = 'train'"
BAND = "0.1,0.9"
RULES = {
    "fixed": [],
    "exact": ["--adaptive", "exact", "--band", BAND],
    "sequential a=0.05": ["--adaptive", "sequential", "--alpha", "0.05", "--band", BAND],
}
KEPT = "task_id IN (SELECT task_id FROM selections WHERE selection = 'band' AND decision = 'keep')"
# the runs' `rldata train` settings (TrainConfig / TrainRun fields); any `rldata train` option on the
# command line wins over them (--steps 20, --lr 2e-4, --eval-n 4...)
TRAIN = {
    "steps": 40,
    "prompts_per_step": 32,
    "n": 8,
    "max_tokens": 8,
    "lr": 1e-4,
    "max_resample": 2,
    "where": KEPT,  # uniform over the kept tasks
    "eval": {"every": 20, "size": 200, "n": 8, "heldout": True},
}


def store_of(rule: str) -> Path:
    return WORK / ("store-" + rule.split()[0])


def prepare(args, rule: str) -> dict:
    """Sample and filter one rule's store (skipped where already done); its kept task ids."""
    store = store_of(rule)
    done = store / "prep.json"
    if done.exists():
        return json.loads(done.read_text())
    if not store.exists():
        rldata(store, "ingest", "--sample", "arith")
        rldata(store, "ingest", "--sample", "arith-heldout")
    where = (
        f"t.task_id IN (SELECT task_id FROM tasks WHERE {TRAIN_SPLIT} ORDER BY task_id LIMIT {args.tasks})"
    )
    t0 = time.monotonic()
    max_tokens = str(args.train.train.rollout.max_tokens)
    rldata(
        store,
        "sample",
        "--n",
        "16",
        "--where",
        where,
        "--max-tokens",
        max_tokens,
        "--seed",
        "0",
        *RULES[rule],
    )
    wall = time.monotonic() - t0
    base = sql(
        store,
        "SELECT model, count(*) AS tasks, sum(n + n_error) AS samples, avg(pass_rate) AS mean "
        "FROM passrates GROUP BY model ORDER BY tasks DESC LIMIT 1",
    )[0]
    rldata(store, "filter", "--band", BAND, "--name", "band", "--model", base["model"])
    rows = sql(store, "SELECT task_id, decision FROM selections WHERE selection = 'band' ORDER BY task_id")
    out = {
        "model": base["model"],
        "tasks": base["tasks"],
        "samples": int(base["samples"]),  # a DuckDB HUGEINT sum, printed as a JSON string
        "mean_pass_rate": base["mean"],
        "sample_wall_s": round(wall, 1),
        "decisions": {r["task_id"]: r["decision"] for r in rows},
    }
    done.write_text(json.dumps(out))
    return out


def train(args, rule: str, seed: int) -> dict | None:
    store = store_of(rule)
    t = args.train.train
    run_id = f"s{seed}-{t.steps}x{t.eval.every}n{t.eval_spec().n}"
    cached = store / f"run-{run_id}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    if args.cached_only:
        return None
    cfg = settings_file(
        args.train, store / f"train-{run_id}.yaml", micro_batch=t.micro_batch or t.batch_size, seed=seed
    )
    load0, t0 = os.getloadavg()[0], time.monotonic()
    out = rldata(
        store,
        "train",
        "--config",
        str(cfg),
        "--run-id",
        run_id,
        "--out",
        str(WORK / ("ckpt-" + rule.split()[0])),
        "--format",
        "json",
    )
    row = json.loads(out)[0]
    row["wall_s"] = round(time.monotonic() - t0, 1)
    row["load_before_after"] = [load0, os.getloadavg()[0]]
    curve = sql(
        store,
        f"SELECT step, value FROM metrics WHERE run_id = '{run_id}' AND name = 'eval/accuracy' ORDER BY step",
    )
    per_step = sql(
        store,
        f"SELECT name, avg(value) AS v, sum(value) AS s FROM metrics WHERE run_id = '{run_id}' "
        "AND name IN ('reward_mean', 'groups_kept', 'groups_dropped', 'samples', 'time/step') "
        "GROUP BY name",
    )
    row["curve"] = [(r["step"], r["value"]) for r in curve]
    row["per_step_mean"] = {r["name"]: r["v"] for r in per_step}
    row["rollouts"] = next((r["s"] for r in per_step if r["name"] == "samples"), None)
    cached.write_text(json.dumps(row, default=str))
    return row


def overlap(prep: dict) -> dict:
    """Each rule's kept set against fixed N's, and its decisions' agreement with fixed N's."""
    fixed = prep["fixed"]["decisions"]
    keep_f = {t for t, d in fixed.items() if d == "keep"}
    out = {}
    for rule, p in prep.items():
        keep = {t for t, d in p["decisions"].items() if d == "keep"}
        out[rule] = {
            "kept": len(keep),
            "kept_and_fixed_kept": len(keep & keep_f),
            "only_this": len(keep - keep_f),
            "only_fixed": len(keep_f - keep),
            "jaccard_with_fixed": round(len(keep & keep_f) / max(1, len(keep | keep_f)), 4),
            "decision_agreement": round(
                sum(p["decisions"].get(t) == d for t, d in fixed.items()) / max(1, len(fixed)), 4
            ),
            "decisions": {d: sum(v == d for v in p["decisions"].values()) for d in ("keep", "drop")}
            | {"other": sum(v not in ("keep", "drop") for v in p["decisions"].values())},
        }
    return out


def summarize(runs: dict) -> dict:
    """Per rule and eval step: mean, min and max held-out accuracy over the seeds run."""
    return {rule: band_summary(r["curve"] for r in by_seed.values()) for rule, by_seed in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Any other option is rldata train's (see rldata train --help).",
    )
    ap.add_argument("--tasks", type=int, default=1500)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--rules", default=",".join(RULES), help="comma-separated, of: " + ", ".join(RULES))
    ap.add_argument(
        "--cached-only", action="store_true", help="report only the runs already done; start none"
    )
    ap.add_argument("--json", default=str(HERE / "bench_adaptive_train.json"))
    args, rest = ap.parse_known_args()
    args.train = train_settings(TRAIN, rest)  # the runs' settings, by rldata train's own options
    rules = [r.strip() for r in args.rules.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    WORK.mkdir(parents=True, exist_ok=True)
    t0, load_before = time.monotonic(), os.getloadavg()
    prep = {rule: prepare(args, rule) for rule in ["fixed", *[r for r in rules if r != "fixed"]]}
    runs: dict = {rule: {} for rule in rules}
    not_run = []
    for seed in seeds:
        for rule in rules:
            row = train(args, rule, seed)
            if row is None:
                not_run.append(f"{rule} seed {seed}")
                continue
            runs[rule][str(seed)] = row
            print(rule, seed, row["curve"], flush=True)
    summary = summarize(runs)
    out = {
        "args": {k: v for k, v in vars(args).items() if k != "train"},
        "train": settings_dict(args.train),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "wall_s_this_invocation": round(time.monotonic() - t0, 1),
        # sampling plus every training run, from the cached rows (a rerun reuses them)
        "total_wall_s": round(
            sum(p["sample_wall_s"] for p in prep.values())
            + sum(r["wall_s"] for by_seed in runs.values() for r in by_seed.values()),
            1,
        ),
        "not_run": not_run,
        "sampling": {
            r: {k: v for k, v in p.items() if k != "decisions"} | {"samples": int(p["samples"])}
            for r, p in prep.items()
        },
        "selections": overlap(prep),
        "summary": summary,
        "runs": runs,
    }
    Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    plot_bands(summary, Path(args.json).with_suffix(".png"), eval_n=args.train.train.eval_spec().n)
    print(json.dumps({k: out[k] for k in ("sampling", "selections", "summary")}, indent=1))


if __name__ == "__main__":
    main()
