"""How long the CLI takes to start: `rldata --store S tables` (the quickest command that opens a store)
and `rldata --help`, this checkout against a baseline install, run alternately.

usage: python benchmarks/bench_cli_startup.py --baseline /path/to/other/.venv/bin/rldata [--runs 20]

The baseline is another install of rldata (for example a worktree of the previous commit with its own
virtual environment): both run on the same machine, in alternating order, so a change in load touches
both alike.  Prints the medians, the spread and the ratio (this / baseline) as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _cli_runs import RLDATA

COMMANDS = {"tables": ["tables"], "help": ["--help"]}


def timed(exe: str, store: str, args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([exe, "--store", store, *args], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="the baseline install's rldata executable")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "store")
        subprocess.run(
            [sys.executable, "-c", f"from rldata import open_store; open_store({store!r})"], check=True
        )
        out = {}
        for name, argv in COMMANDS.items():
            got: dict[str, list[float]] = {"this": [], "baseline": []}
            for exe in (RLDATA, args.baseline):  # one untimed run each: the file cache warm
                timed(exe, store, argv)
            for i in range(args.runs):
                order = [("this", RLDATA), ("baseline", args.baseline)]
                for who, exe in order if i % 2 == 0 else order[::-1]:
                    got[who].append(timed(exe, store, argv))
            med = {k: statistics.median(v) for k, v in got.items()}
            out[name] = {
                "median_s": {k: round(v, 3) for k, v in med.items()},
                "min_s": {k: round(min(v), 3) for k, v in got.items()},
                "max_s": {k: round(max(v), 3) for k, v in got.items()},
                "ratio_this_over_baseline": round(med["this"] / med["baseline"], 3),
                "runs": args.runs,
            }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
