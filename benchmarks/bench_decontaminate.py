"""Benchmark: decontamination recall and false flags on planted GSM8K copies, open-r1's rule beside it,
1M tasks against 10k eval items, and a planted set of wrong answer keys for ``suspect_key``.

    .venv/bin/python benchmarks/bench_decontaminate.py [--part planted,scale,suspect]
        [--gsm8k /work/shared/data/gsm8k] [--tasks 1000000] [--items 10000] [--out FILE]

Reads real GSM8K (MIT) from ``--gsm8k`` (default ``/work/shared/data/gsm8k``, train.jsonl and
test.jsonl; the tests never read it, they use the bundled ``sample_data/gsm8k`` subset).

- ``planted``: every one of the 7,473 train questions is a clean task; every one of the 1,319 test
  questions is the eval pack, and is also planted as a task in 7 forms: verbatim, with an instruction
  prefix, with a suffix, with whitespace changed, in LaTeX spelling (``\\$``, ``\\(..\\)``,
  ``\\dfrac{a}{b}``), with the dollar signs removed, and prefix + suffix + dollars removed + whitespace
  together (9,233 copies).  Recall = copies flagged / copies; false flags = clean tasks flagged /
  7,473, for each detector, for any detector (the command's default), and for open-r1's rule
  implemented from its description (lowercase, split on whitespace, flag a task that shares any word
  8-gram with any eval item).
- ``scale``: ``--tasks`` tasks against ``--items`` eval items, both made from GSM8K questions with
  their numbers redrawn (so texts are distinct and realistic), 1,000 eval items planted among the
  tasks; times the detection in memory and the whole command on a Delta store (reading the tasks,
  detecting, committing the rows), with CPU seconds and the load average.
- ``suspect``: the 150 bundled level-1 arithmetic tasks, 15 of them with a wrong key (the right
  answer + 1), sampled N=16 by the bundled model (``rldata.sample``), then ``rldata lint --rule
  suspect_key`` at its defaults: precision and recall against the planted keys.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
PREFIXES = (
    "Solve the following math problem step by step. ",
    "Question: ",
    "Problem: ",
    "Answer the question below.\n\n",
    "You are a helpful assistant. Solve: ",
)
SUFFIXES = (
    " Put your final answer within \\boxed{}.",
    "\nLet's think step by step.",
    " Show your work.",
    "\n\nAnswer:",
    " Give only the final number.",
)


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _spaces(q: str, rng: random.Random) -> str:
    return "  " + re.sub(" ", lambda _: rng.choice([" ", "  ", "\n", " \t", " "]), q) + " \n"


def _latex(q: str) -> str:
    q = re.sub(r"(\d+)/(\d+)", r"\\dfrac{\1}{\2}", q)
    q = re.sub(r"\$(\d[\d,.]*)", r"\\(\\$\1\\)", q)
    return q


EDITS = {
    "verbatim": lambda q, rng: q,
    "prefix": lambda q, rng: rng.choice(PREFIXES) + q,
    "suffix": lambda q, rng: q + rng.choice(SUFFIXES),
    "whitespace": _spaces,
    "latex": lambda q, rng: _latex(q),
    "dollars_removed": lambda q, rng: q.replace("$", ""),
    "combined": lambda q, rng: _spaces(rng.choice(PREFIXES) + q.replace("$", "") + rng.choice(SUFFIXES), rng),
}


def open_r1(tasks: list[str], items: list[str], n: int = 8) -> list[bool]:
    """open-r1's rule, from its description: lowercase, split on whitespace, flag a task sharing any
    word n-gram (n = 8) with any eval item."""

    def grams(text: str) -> set[tuple[str, ...]]:
        words = text.lower().split()
        return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}

    evals: set[tuple[str, ...]] = set()
    for t in items:
        evals |= grams(t)
    return [bool(grams(t) & evals) for t in tasks]


def planted(gsm8k: Path) -> dict:
    from rldata.quality.config import DecontaminateConfig
    from rldata.quality.detectors import EvalIndex, detect

    rng = random.Random(0)
    train = [r["question"] for r in _load(gsm8k / "train.jsonl")]
    test = [r["question"] for r in _load(gsm8k / "test.jsonl")]
    copies = [(kind, i, fn(q, rng)) for i, q in enumerate(test) for kind, fn in EDITS.items()]
    prompts = train + [c[2] for c in copies]
    ids = [f"clean{i}" for i in range(len(train))] + [f"copy{j}" for j in range(len(copies))]
    tasks = pl.DataFrame({"task_id": ids, "prompt": prompts, "domain": ["math"] * len(ids)})
    t0, c0 = time.perf_counter(), time.process_time()
    rows = detect(tasks, EvalIndex(pl.Series(test), DecontaminateConfig()))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    t1 = time.perf_counter()
    r1 = open_r1(prompts, test)
    r1_seconds = time.perf_counter() - t1
    flagged = {
        m: set(rows.filter(pl.col("method") == m)["task_id"]) for m in ("ngram", "coverage", "minhash")
    }
    flagged["any (default)"] = set(rows["task_id"])
    flagged["open-r1 rule"] = {ids[k] for k, hit in enumerate(r1) if hit}
    out = {
        "clean": len(train),
        "copies": len(copies),
        "eval_items": len(test),
        "seconds": seconds,
        "cpu_seconds": cpu,
    }
    out["open_r1_seconds"] = r1_seconds
    table = {}
    for name, hit in flagged.items():
        rec = {
            k: sum(f"copy{j}" in hit for j, c in enumerate(copies) if c[0] == k) / len(test) for k in EDITS
        }
        table[name] = {
            "recall": sum(f"copy{j}" in hit for j in range(len(copies))) / len(copies),
            "recall_by_edit": rec,
            "clean_flagged": sum(f"clean{i}" in hit for i in range(len(train))) / len(train),
            "clean_flagged_n": sum(f"clean{i}" in hit for i in range(len(train))),
        }
    out["methods"] = table
    missed = [c for j, c in enumerate(copies) if f"copy{j}" not in flagged["any (default)"]]
    out["missed_examples"] = [{"edit": k, "item": i, "text": t[:200]} for k, i, t in missed[:5]]
    clean_hits = rows.filter(pl.col("task_id").str.starts_with("clean")).join(
        pl.DataFrame({"task_id": ids, "prompt": prompts}), on="task_id"
    )
    out["clean_flagged_examples"] = [
        {"task": p[:160], "eval": test[e][:160], "method": m, "score": round(s, 3)}
        for p, e, m, s in clean_hits.select("prompt", "eval_idx", "method", "score").head(6).iter_rows()
    ]
    return out


def _redraw(q: str, rng: random.Random) -> str:
    return re.sub(r"\d+", lambda m: str(rng.randint(2, 999)), q)


def scale(gsm8k: Path, n_tasks: int, n_items: int) -> dict:
    from rldata import open_store
    from rldata.quality.config import DecontaminateConfig
    from rldata.quality.decontaminate import decontaminate_store
    from rldata.quality.detectors import EvalIndex, detect
    from rldata.quality.evalpack import read_pack

    rng = random.Random(1)
    train = [r["question"] for r in _load(gsm8k / "train.jsonl")]
    test = [r["question"] for r in _load(gsm8k / "test.jsonl")]
    items = test + [_redraw(rng.choice(test), rng) for _ in range(n_items - len(test))]
    plant = 1000
    tasks = [_redraw(train[i % len(train)], rng) for i in range(n_tasks - plant)]
    tasks += [rng.choice(PREFIXES) + items[rng.randrange(n_items)] for _ in range(plant)]
    frame = pl.DataFrame(
        {"task_id": [f"{i:08d}" for i in range(n_tasks)], "prompt": tasks, "domain": ["math"] * n_tasks}
    )
    out = {"tasks": n_tasks, "eval_items": n_items, "planted": plant, "load_before": os.getloadavg()[0]}
    t0, c0 = time.perf_counter(), time.process_time()
    rows = detect(frame, EvalIndex(pl.Series(items), DecontaminateConfig()))
    out["detect_seconds"], out["detect_cpu_seconds"] = time.perf_counter() - t0, time.process_time() - c0
    out["flagged"] = rows["task_id"].n_unique()
    out["planted_found"] = rows.filter(pl.col("task_id") >= f"{n_tasks - plant:08d}")["task_id"].n_unique()
    out["load_after_detect"] = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:  # the whole command on a Delta store
        store = open_store(Path(tmp) / "s")
        for at in range(0, n_tasks, 250_000):
            part = frame.slice(at, 250_000).with_columns(
                pl.lit("bench").alias("source"), pl.lit("0").alias("answer")
            )
            store.append("tasks", part.to_arrow())
        (Path(tmp) / "eval.jsonl").write_text("".join(json.dumps({"question": q}) + "\n" for q in items))
        read_pack(Path(tmp) / "eval.jsonl")  # warm the reader's imports outside the timing
        t0, c0 = time.perf_counter(), time.process_time()
        res = decontaminate_store(store, DecontaminateConfig(eval=str(Path(tmp) / "eval.jsonl")))
        out["command_seconds"], out["command_cpu_seconds"] = (
            time.perf_counter() - t0,
            time.process_time() - c0,
        )
        out["command_flagged"] = res.flagged
    out["load_after"] = os.getloadavg()[0]
    return out


def suspect() -> dict:
    import rldata
    from rldata.ingest import sample_path

    rng = random.Random(2)
    rows = [json.loads(x) for x in sample_path("arith").read_text().splitlines() if '"level":1' in x]
    wrong = set(rng.sample(range(len(rows)), 15))
    for i in wrong:
        rows[i]["answer"] = str(int(rows[i]["answer"]) + 1)
    out = {"tasks": len(rows), "planted_wrong_keys": len(wrong), "load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        store = rldata.open_store(Path(tmp) / "s")
        rldata.ingest(store, path=str(Path(tmp) / "t.jsonl"))
        t0 = time.perf_counter()
        s = rldata.sample(store, n=16, engines=1)
        out["sample_seconds"] = time.perf_counter() - t0
        out["samples"], out["correct"] = s.samples, s.correct
        t0 = time.perf_counter()
        res = rldata.lint(store, rules=("suspect_key",))
        out["lint_seconds"] = time.perf_counter() - t0
        prompts = dict(store.read("tasks").select("task_id", "prompt").iter_rows())
        found = {prompts[t] for t in res.rows["task_id"]}
        planted = {rows[i]["prompt"] for i in wrong}
        tp = len(found & planted)
        out["found"], out["true_positives"] = len(found), tp
        out["precision"] = tp / len(found) if found else None
        out["recall"] = tp / len(planted)
        out["false_positives"] = [
            json.loads(d) | {"prompt": prompts[t]}
            for t, d in res.rows.select("task_id", "detail").iter_rows()
            if prompts[t] not in planted
        ]
        out["missed"] = sorted(planted - found)
        # why: each missed task's votes, from the same rule with every threshold open
        from rldata.quality.suspect_key import suspect_findings

        every = suspect_findings(
            store,
            store.read("tasks").select("task_id", "answer"),
            share=0.0,
            min_samples=1,
            max_pass_rate=1.0,
        )
        rate = dict(store.sql("SELECT task_id, pass_rate FROM passrates").fetchall())
        out["missed_pass_rate"] = {prompts[t]: rate.get(t) for t in prompts if prompts[t] in planted - found}
        out["missed_detail"] = [
            {"prompt": prompts[t], **{k: v for k, v in json.loads(d).items() if k != "models"}}
            for t, d in every.iter_rows()
            if prompts[t] in planted - found
        ]
        rates = store.sql("SELECT pass_rate FROM passrates").pl()["pass_rate"]
        out["mean_pass_rate"] = float(rates.mean())
    out["load_after"] = os.getloadavg()[0]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="planted,scale,suspect")
    ap.add_argument("--gsm8k", default="/work/shared/data/gsm8k")
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "bench_decontaminate.json"))
    args = ap.parse_args()
    gsm8k = Path(args.gsm8k)
    if not (gsm8k / "test.jsonl").is_file():
        print(f"no GSM8K at {gsm8k}: give --gsm8k DIR (train.jsonl, test.jsonl)", file=sys.stderr)
        return 2
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count()}
    parts = args.part.split(",")
    if "planted" in parts:
        result["planted"] = planted(gsm8k)
        print(json.dumps(result["planted"], indent=1)[:3000], file=sys.stderr)
    if "scale" in parts:
        result["scale"] = scale(gsm8k, args.tasks, args.items)
        print(json.dumps(result["scale"], indent=1), file=sys.stderr)
    if "suspect" in parts:
        result["suspect"] = suspect()
        print(json.dumps(result["suspect"], indent=1)[:3000], file=sys.stderr)
    Path(args.out).write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
