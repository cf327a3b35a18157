"""Math verification throughput of this checkout's verifier against an earlier revision's, side by side.

A change to answer extraction (issue 44's forms: number words, percents, mixed numbers, ...) adds
work to every completion; this measures what it costs.  Workload: bench_verify.py's (GSM8K reference
reasoning + an answer in one of five forms, 16 samples per task), plus the same completions with
the answer written the issue-44 ways (words, cents, percents, a parenthetical).  For each repeat,
both versions run in fresh subprocesses on the same completions, interleaved (old, new, old, ...),
each after a warm-up on other tasks:

- ``extract``: ``MathVerifier().extract`` over every completion (the per-completion cost; dedup
  cannot hide it), completions/s of this process's CPU time;
- ``plan + check``: the work of ``verify_many`` (extract, dedup, check each distinct unit) done in
  this process (``run_units_here``), completions/s of CPU time: what the load of a shared machine
  changes least;
- ``verify_many``: the whole local path (checks in the verifier process), completions/s, wall.

The earlier revision's ``rldata/verify/`` is taken with ``git archive`` into a temporary directory;
a finder put first on ``sys.meta_path`` imports ``rldata.verify`` from there (the rest of rldata
is this checkout's).

    python benchmarks/bench_verify_versions.py --base main [--tasks 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).parents[1]

CHILD = r"""
import json, os, re, sys, time
base = os.environ.get("RLDATA_BENCH_BASE")
if base:  # the earlier revision's rldata.verify package, ahead of this checkout's
    from importlib.machinery import PathFinder

    class _Base:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "rldata.verify" or name.startswith("rldata.verify."):
                where = os.path.join(base, *name.split(".")[:-1])
                return PathFinder.find_spec(name, [where])
            return None

    sys.meta_path.insert(0, _Base)
sys.path.insert(0, {bench!r})
from bench_verify import load_gsm8k, make_completions
from rldata.verify.math import MathVerifier
from rldata.verify.math import parse_answer
from rldata.verify.run import expand, plan, run_units_here, verify_many

tasks, samples, repeat, styled = {tasks}, {samples}, {repeat}, {styled}
pool = load_gsm8k("test.jsonl") + load_gsm8k("train.jsonl")
STYLES = ("{{a}} in words", "${{a}}.00", "{{a}}%", "{{a}} (as computed above).")
WORDS = "zero one two three four five six seven eight nine ten".split()

def restyle(pairs, seed):
    out = []
    for i, (comp, gold) in enumerate(pairs):
        body, _, last = comp.rpartition("\n")
        a = re.findall(r"\d[\d,]*", last)[-1].replace(",", "")  # the sample's answer, right or wrong
        style = STYLES[(i + seed) % len(STYLES)]
        if style.endswith("in words"):
            ans = WORDS[int(a)] if a.isdigit() and int(a) < 11 else a
        else:
            ans = style.format(a=a)
        out.append((body + "\nSo the answer is " + ans + ".", gold))
    return out

def work(pairs):
    return restyle(pairs, 0) if styled else pairs

warm = work(make_completions(pool[:40], samples, 1))
mine = pool[40 + repeat * tasks : 40 + (repeat + 1) * tasks]
pairs = work(make_completions(mine, samples, repeat))
v = MathVerifier()
v.prepare()
verify_many([("math", c, {{"answer": g}}) for c, g in warm])
for c, g in warm:
    v.extract(c, {{"answer": g}})
items = [("math", c, {{"answer": g}}) for c, g in pairs]
t0 = time.process_time()
for c, g in pairs:
    v.extract(c, {{"answer": g}})
t1 = time.process_time()
parse_answer.cache_clear()
units, where = plan(items)
expand(where, run_units_here(units, timeout_s=None))
t2 = time.process_time()
w0 = time.perf_counter()
out = verify_many(items)
w1 = time.perf_counter()
print(json.dumps({{"version": v.version, "n": len(pairs), "extract_s": t1 - t0, "check_cpu_s": t2 - t1,
                  "verify_s": w1 - w0, "passed": sum(vs[0].passed is True for vs in out),
                  "errors": sum(vs[0].passed is None for vs in out)}}))
"""


def _old_tree(rev: str, into: Path) -> None:
    data = subprocess.run(["git", "archive", rev, "rldata"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")


def _run(pythonpath: str | None, **kw) -> dict:
    env = None
    if pythonpath:
        env = {**os.environ, "RLDATA_BENCH_BASE": pythonpath}
    code = CHILD.format(bench=str(ROOT / "benchmarks"), **kw)
    out = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"benchmark child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="the revision to compare with")
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="also write the numbers here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _old_tree(args.base, Path(tmp))
        sides = {"base": tmp, "this": None}
        rows: dict[tuple[str, bool], list[dict]] = {}
        for styled in (False, True):
            for r in range(args.repeats):
                for side, path in sides.items():
                    got = _run(path, tasks=args.tasks, samples=args.samples, repeat=r, styled=styled)
                    rows.setdefault((side, styled), []).append(got)
    print(
        "| workload | version | extract /s CPU | plan + check /s CPU | verify_many /s wall "
        "| runs (plan + check) | passed | errors |"
    )
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for (side, styled), runs in rows.items():
        med = {
            k: statistics.median(x["n"] / x[k] for x in runs)
            for k in ("extract_s", "check_cpu_s", "verify_s")
        }
        name = "issue-44 forms" if styled else "bench_verify forms"
        summary[f"{name}/{side}"] = {"version": runs[0]["version"], "per_s_median": med, "runs": runs}
        each = ", ".join(f"{x['n'] / x['check_cpu_s']:.0f}" for x in runs)
        passed, errors = sum(x["passed"] for x in runs), sum(x["errors"] for x in runs)
        print(
            f"| {name} | {runs[0]['version']} | {med['extract_s']:.0f} | {med['check_cpu_s']:.0f} "
            f"| {med['verify_s']:.0f} | {each} | {passed} | {errors} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
