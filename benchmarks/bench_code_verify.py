"""Code verifications per second: 1 worker process (baseline) vs N, side by side, on the sample tasks.

Each verification is the whole layered check of one completion: rule layer, then public and
hidden tests in one fresh sandbox.  The workload alternates the reference solution and a wrong one
for every task in ``sample_data/code_tasks.jsonl``.  Also reports the cost of isolation: the same
single-worker run with ``isolation="rlimits"`` (no namespaces).

    python benchmarks/bench_code_verify.py [--rounds 2] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from importlib.resources import files

__all__ = ["measure", "workload"]

WRONG = {
    "function": "```python\ndef {entry}(*args):\n    return None\n```",
    "stdio": "```python\nprint(input())\n```",
}


def workload(rounds: int) -> list[tuple[str, str]]:
    """(completion, tests JSON) pairs: the reference solution and a wrong one per task, ``rounds`` times."""
    tasks = [
        json.loads(x)
        for x in files("rldata.sample_data").joinpath("code_tasks.jsonl").read_text().splitlines()
    ]
    out = []
    for _ in range(rounds):
        for t in tasks:
            tests = json.dumps(t["tests"])
            out.append((f"```python\n{t['metadata']['reference_solution']}```", tests))
            out.append(
                (WRONG[t["tests"]["style"]].format(entry=t["tests"].get("entry_point", "solve")), tests)
            )
    return out


def _verify(args: tuple[str, str, str]) -> bool | None:
    from rldata.sandbox import SandboxLimits
    from rldata.verify.code import CodeVerifier, all_passed

    completion, tests, isolation = args
    v = CodeVerifier(limits=SandboxLimits(wall_s=30.0, cpu_s=20.0, isolation=isolation))
    return all_passed(v.verify(completion, {"tests": tests}))


def measure(items: list[tuple[str, str]], *, workers: int, isolation: str = "auto") -> tuple[float, list]:
    """Verifications per second with ``workers`` spawned processes (pool start-up excluded)."""
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        list(pool.map(_verify, [(items[0][0], items[0][1], isolation)] * workers))  # warm: imports done
        t0 = time.perf_counter()
        results = list(pool.map(_verify, [(c, t, isolation) for c, t in items]))
        dt = time.perf_counter() - t0
    return len(items) / dt, results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="passes over the sample tasks per measurement")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--repeats", type=int, default=3, help="measurements per setting, interleaved; medians shown"
    )
    args = ap.parse_args()
    from rldata.sandbox import probe_isolation

    items = workload(args.rounds)
    mode = probe_isolation().get("mode")
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; isolation auto -> {mode}; "
        f"{len(items)} verifications x {args.repeats} repeats"
    )
    settings = {"base": (1, "auto"), "multi": (args.workers, "auto"), "fallback": (1, "rlimits")}
    rates: dict[str, list[float]] = {k: [] for k in settings}
    verdicts = set()
    for _ in range(args.repeats):  # interleaved, so that load from other users hits every setting alike
        for key, (workers, isolation) in settings.items():
            rate, res = measure(items, workers=workers, isolation=isolation)
            rates[key].append(rate)
            verdicts.add(tuple(res))
    assert len(verdicts) == 1, "verdicts differ between runs"
    res = verdicts.pop()
    passed = sum(1 for r in res if r)
    print(f"verdicts: {passed} passed, {len(res) - passed} failed (expected {len(res) // 2} each)")
    med = {k: statistics.median(v) for k, v in rates.items()}
    for key, label in (
        ("base", f"1 worker  ({mode})"),
        ("multi", f"{args.workers} workers ({mode})"),
        ("fallback", "1 worker  (rlimits fallback)"),
    ):
        runs = ", ".join(f"{r:.2f}" for r in rates[key])
        ratio = "baseline" if key == "base" else f"ratio {med[key] / med['base']:.2f}x"
        print(f"{label:32s} {med[key]:6.2f} verifications/s  [{runs}]  {ratio}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
