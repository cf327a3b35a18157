"""`rldata predict` on the bundled arithmetic with the bundled model: how well unseen tasks' pass rates
are predicted, what `sample --skip-predicted --adaptive sequential` saves against a full N=16 sweep,
and how a fit ages over a training run.

1. The full sweep: the 3,500 bundled tasks x N=16 (T=1, max_tokens 16, seed 0) with `rldata sample`,
   in ``--store`` (made when empty; reused otherwise).
2. Per seed (default 0, 1, 2): the tasks split by id in halves (rldata.predict.backtest.holdout_split,
   share 0.5); the predictor fit on one half's N=16 rows (every feature family) predicts the other
   half.  Spearman rho of the predicted mean against the N=16 pass rate of the held-out half, with the
   per-category mean and prompt length beside it.
3. Per seed, `--skip-predicted C --adaptive sequential --alpha A --round 4 --band 0.1,0.9` on the
   held-out half, replayed on the sweep's own samples: sample j of a task is the same sample in both
   (same seed and indices), so the job's rounds draw prefixes of the sweep's verdict sequences.  The
   replay calls the job's own functions (rldata.predict.plan.plan_of, rldata.adaptive.rules.decide_frame
   with the priors).  Reported: samples drawn against 16 per task, and the share of held-out tasks
   whose keep/drop differs from the sweep's (a skip is a drop).  ``--real`` also runs the real job for
   seed 0 on a copy of the store with the held-out half's rows removed, to check the replay.
4. ``--drift-store S``: a store holding a short curriculum run (rldata train) of the same model; the
   backtest's version split: the fit at policy version 0 scored on windows of later versions, beside the
   live posterior refreshed at each window's start.

    python benchmarks/bench_predict.py --store /tmp/bench-predict [--seeds 0,1,2] [--real]
        [--drift-store S] [--json benchmarks/bench_predict.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

BAND = "0.1,0.9"
GRID = (
    (0.9, 0.05),
    (0.95, 0.05),
    (0.95, 0.04),
    (0.95, 0.03),
    (0.98, 0.03),
    (0.95, 0.02),
)  # (skip conf, alpha)


def sweep(root: Path):
    import rldata

    store = rldata.open_store(root)
    if store.count("passrates") == 0:
        rldata.ingest(store, sample="arith")
        rldata.ingest(store, sample="arith-heldout")
        t = time.monotonic()
        res = rldata.sample(store, n=16, seed=0)
        print(f"full sweep: {res.samples} samples in {time.monotonic() - t:.0f}s", flush=True)
    return store


def verdicts(store) -> dict[str, list]:
    """task -> [True | False | None (verifier error)] for sample indices 0..15 of seed 0."""
    rows = store.sql(
        "SELECT t.task_id, t.sample_idx, v.passed FROM trajectories t JOIN verifications v USING (traj_id) "
        "WHERE t.seed = 0 AND t.sample_idx < 16 ORDER BY 1, 2"
    ).fetchall()
    out: dict[str, list] = {}
    for task, _, passed in rows:
        out.setdefault(task, []).append(passed)
    return out


def replay(ids, seqs, plan, *, alpha: float | None, band) -> dict:
    """The adaptive job's rounds over the sweep's verdicts: task -> (decision, draws)."""
    import polars as pl

    from rldata.adaptive.rules import AdaptiveSpec, decide_frame

    spec = AdaptiveSpec("sequential", alpha, 4, band, priors=dict(plan.priors) if plan else None)
    todo = [t for t in ids if not plan or t not in plan.skips]
    counts = {t: [0, 0, 0] for t in todo}  # verified, correct, errors
    drawn = {t: 0 for t in todo}
    while True:
        frame = decide_frame(
            pl.DataFrame(
                [{"task_id": t, "n": c[0], "n_correct": c[1], "n_error": c[2]} for t, c in counts.items()],
                schema={"task_id": pl.String, "n": pl.Int64, "n_correct": pl.Int64, "n_error": pl.Int64},
            ),
            spec,
            n_max=16,
        )
        nxt = frame.filter(pl.col("next_draws") > 0)
        if nxt.height == 0:
            break
        for t, k in nxt.select("task_id", "next_draws").iter_rows():
            for v in seqs[t][drawn[t] : drawn[t] + k]:
                c = counts[t]
                if v is None:
                    c[2] += 1
                else:
                    c[0] += 1
                    c[1] += int(v)
            drawn[t] += k
    out = {t: (d, drawn[t]) for t, d in zip(frame["task_id"], frame["decision"])}
    for t in plan.skips if plan else ():
        if t in ids:
            out[t] = ("drop", 0)
    return out


def fixed_decisions(seqs, ids, band) -> dict[str, str]:
    import polars as pl

    from rldata.stats import decide

    df = pl.DataFrame(
        {
            "task_id": ids,
            "n": [sum(v is not None for v in seqs[t]) for t in ids],
            "n_correct": [sum(v is True for v in seqs[t]) for t in ids],
            "n_error": [sum(v is None for v in seqs[t]) for t in ids],
        }
    )
    got = decide(df, band, min_n=16)
    return dict(zip(got["task_id"], got["decision"]))


def one_seed(store, seqs, feats, counts, seed: int) -> dict:
    import numpy as np
    import polars as pl
    from scipy import stats

    from rldata.predict.backtest import holdout_split
    from rldata.predict.calibration import beta_from_mean
    from rldata.predict.fit import fit_predictor
    from rldata.predict.plan import plan_of
    from rldata.stats import Band

    band = Band.parse(BAND)
    ids = sorted(set(counts["task_id"]) & set(seqs))
    train, held = holdout_split(ids, seed=seed, share=0.5)
    t0 = time.monotonic()
    model = fit_predictor(feats, counts.filter(pl.col("task_id").is_in(train)), seed=seed, folds=5)
    fit_s = time.monotonic() - t0
    p = model.mean(feats, held)
    by = dict(zip(counts["task_id"], counts["n_correct"] / counts["n"]))
    rate = np.array([by[t] for t in held])
    rho = float(stats.spearmanr(p, rate).statistic)
    a, b = beta_from_mean(p, model.strength)
    rows = pl.DataFrame(
        {"task_id": held, "alpha": a, "beta": b, "prior_alpha": a, "prior_beta": b, "p_mean": p}
    )
    fixed = fixed_decisions(seqs, held, band)
    out = {
        "seed": seed,
        "held": len(held),
        "spearman": rho,
        "strength": model.strength,
        "fit_s": fit_s,
        "C": model.C,
        "runs": {},
    }
    runs = [("sequential (Jeffreys)", None, 0.05)] + [
        (f"skip {c} + predicted prior, alpha {al}", c, al) for c, al in GRID
    ]
    runs += [("skip 0.95 only, fixed N", 0.95, None)]
    for name, conf, alpha in runs:
        plan = plan_of(rows, band=band, conf=conf, own=True) if conf is not None else None
        if alpha is None:  # skips, then fixed N on the rest
            got = {t: ("drop", 0) if t in plan.skips else (fixed[t], 16) for t in held}
        else:
            got = replay(held, seqs, plan, alpha=alpha, band=band)
        samples = sum(d for _, d in got.values())
        changed = sum(got[t][0] != fixed[t] for t in held)
        out["runs"][name] = {
            "samples_frac": samples / (16 * len(held)),
            "saved": 1 - samples / (16 * len(held)),
            "changed": changed / len(held),
            "skipped": len(plan.skips) if plan else 0,
        }
    out["held_ids"] = held
    out["plan_09"] = plan_of(rows, band=band, conf=0.9, own=True)
    return out


def real_run(root: Path, res: dict, seqs, conf: float, alpha: float) -> dict:
    """The real `rldata sample --skip-predicted CONF --adaptive sequential --alpha A` on seed 0's held-out half."""
    import rldata
    from rldata.ledger.select import filter_store
    from rldata.stats import Band

    copy = root.parent / (root.name + "-real")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy)
    st = rldata.open_store(copy)
    held = res["held_ids"]
    ids = "', '".join(held)
    for table in ("trajectories", "verifications", "passrates"):
        st.delete(table, f"task_id IN ('{ids}')")
    sel = [{"selection": "held", "task_id": t, "decision": "keep", "reason": "in_band"} for t in held]
    st.upsert("selections", sel)
    t = time.monotonic()
    got = rldata.sample(
        st, n=16, seed=0, selection="held", skip_predicted=conf, adaptive="sequential", alpha=alpha, band=BAND
    )
    wall = time.monotonic() - t
    _, rows = filter_store(st, name="x", band=Band.parse(BAND), dry_run=True, min_n=16)
    dec = dict(zip(rows["task_id"], rows["decision"]))
    fixed = fixed_decisions(seqs, held, Band.parse(BAND))
    return {
        "samples": got.samples,
        "samples_frac": got.samples / (16 * len(held)),
        "skipped": got.skipped_predicted,
        "changed": sum(dec[t] != fixed[t] for t in held) / len(held),
        "wall_s": wall,
    }


def save_features(path: str, f) -> None:
    import numpy as np

    np.savez(
        path,
        ids=np.array(f.task_ids),
        data=f.sparse.data,
        indices=f.sparse.indices,
        indptr=f.sparse.indptr,
        shape=np.array(f.sparse.shape),
        dense=f.dense,
        widths=np.array(f.widths),
        families=np.array(f.families),
    )


def load_features(path: str, counts):
    """Features saved by an earlier run of this benchmark on the same tasks, or None."""
    import numpy as np
    import scipy.sparse as sp

    from rldata.predict.features import Features

    if not Path(path).exists():
        return None
    z = np.load(path)
    if set(z["ids"].tolist()) != set(counts["task_id"].to_list()):
        return None
    sparse = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
    widths = tuple(int(w) for w in z["widths"])
    return Features(tuple(z["ids"].tolist()), sparse, z["dense"], tuple(z["families"].tolist()), widths)


def drift(path: Path) -> dict:
    import rldata
    from rldata.predict import PredictConfig, backtest_store

    st = rldata.open_store(path)
    res = backtest_store(st, PredictConfig(dry_run=True))
    return {s: m for s, m in res.splits.items() if s != "tasks"} | {"tasks": res.splits["tasks"]}


def main() -> None:
    import polars as pl

    from rldata.engine.core import model_identity
    from rldata.predict.features import build_features
    from rldata.predict.fit import ledger_counts, task_rows

    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--drift-store", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--features-cache", default=None, help="an .npz to reuse the features from (made when absent)"
    )
    ap.add_argument("--real-config", default="0.95,0.03", help="--real: CONF,ALPHA of the real job")
    args = ap.parse_args()
    print(f"load: {os.getloadavg()}", flush=True)
    root = Path(args.store)
    store = sweep(root)
    seqs = verdicts(store)
    _, counts = ledger_counts(
        store,
        model_identity(None).name,
        params_hash=None,
        verifier_key=None,
        version=store.version("passrates"),
    )
    t = time.monotonic()
    feats = load_features(args.features_cache, counts) if args.features_cache else None
    if feats is None:
        feats = build_features(
            task_rows(store, counts["task_id"].to_list()),
            ("text", "meta", "prefill", "logprob"),
            model_path=model_identity(None).load,
        )
        if args.features_cache:
            save_features(args.features_cache, feats)
    feat_s = time.monotonic() - t
    print(f"features of {counts.height} tasks in {feat_s:.1f}s", flush=True)
    results = [one_seed(store, seqs, feats, counts, int(s)) for s in args.seeds.split(",")]
    report = {"load_start": os.getloadavg(), "features_s": feat_s, "seeds": []}
    for r in results:
        print(
            f"seed {r['seed']}: held {r['held']}, spearman {r['spearman']:.3f}, strength {r['strength']:.2f}, "
            f"C {r['C']}, fit {r['fit_s']:.0f}s",
            flush=True,
        )
        for name, m in r["runs"].items():
            print(
                f"   {name:45s} samples {m['samples_frac']:.3f} (saved {m['saved']:.1%}), changed {m['changed']:.2%}, "
                f"skipped {m['skipped']}",
                flush=True,
            )
        report["seeds"].append({k: v for k, v in r.items() if k not in ("held_ids", "plan_09")})
    rho = [r["spearman"] for r in results]
    print(f"spearman mean {statistics.mean(rho):.3f} (min {min(rho):.3f}, max {max(rho):.3f})")
    for name in results[0]["runs"]:
        s = [r["runs"][name]["saved"] for r in results]
        c = [r["runs"][name]["changed"] for r in results]
        print(
            f"{name:45s} saved {statistics.mean(s):.1%} [{min(s):.1%}, {max(s):.1%}], "
            f"changed {statistics.mean(c):.2%} [{min(c):.2%}, {max(c):.2%}]"
        )
    if args.real:
        conf, alpha = (float(x) for x in args.real_config.split(","))
        report["real"] = real_run(root, results[0], seqs, conf, alpha)
        sim = results[0]["runs"].get(f"skip {conf} + predicted prior, alpha {alpha}")
        print(f"real job, seed 0: {report['real']} vs replay {sim}", flush=True)
    if args.drift_store:
        d = drift(Path(args.drift_store))
        report["drift"] = d
        rows = [
            {
                "split": s,
                "predictor": p,
                **{k: m.get(k) for k in ("tasks", "spearman", "brier", "bias", "coverage")},
            }
            for s, ps in d.items()
            for p, m in ps.items()
        ]
        with pl.Config(tbl_rows=40, tbl_cols=10, tbl_width_chars=160):
            print(pl.DataFrame(rows))
    report["load_end"] = os.getloadavg()
    print(f"load: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
