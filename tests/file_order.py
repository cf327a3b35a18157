"""The order the test files go to pytest-xdist's workers: the longest first (tests/file_seconds.json).

``make test`` and ``make test-fast`` run the suite on two pytest-xdist workers, each with its own session Ray and warm
engines, handing out whole files (``--dist loadfile``: a module's shared run stays in one process).
A worker takes the next file when it is free, so a long file handed out last would run alone at the
end; longest first, the two finish together.  The seconds are measured (``--durations=0`` of a whole
run, summed per file) and only order the files: a file missing from the table runs after the
measured ones, in collection order, and a stale table costs time, never a test.

Rebuild the table from a run's log: ``python -m tests.file_order LOG`` (LOG: the output of
``make test PYTEST_ARGS=--durations=0``).
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

TABLE = Path(__file__).with_name("file_seconds.json")
_LINE = re.compile(r"^\s*([\d.]+)s\s+(?:setup|call|teardown)\s+(tests/[^:\s]+\.py)::")


def file_seconds(log: str) -> dict[str, float]:
    """Seconds per test file from the ``--durations`` lines of a pytest log, longest first."""
    total: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        m = _LINE.match(line)
        if m:
            total[m.group(2)] += float(m.group(1))
    return {f: round(s, 1) for f, s in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))}


def longest_first(items: list, seconds: dict[str, float]) -> list:
    """``items`` (pytest's collected tests) with whole files in order of ``seconds``, longest first;
    the tests of a file keep their order, and files not in ``seconds`` follow in theirs."""
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(item.nodeid.split("::")[0], i)
    rank = {f: (-seconds.get(f, 0.0), f not in seconds, first[f]) for f in first}
    return sorted(items, key=lambda item: rank[item.nodeid.split("::")[0]])  # stable: file order kept


def load() -> dict[str, float]:
    return json.loads(TABLE.read_text()) if TABLE.exists() else {}


def main(argv: list[str]) -> None:
    (log,) = argv
    table = file_seconds(Path(log).read_text())
    if not table:
        raise SystemExit(f"{log}: no --durations lines (run with PYTEST_ARGS=--durations=0)")
    TABLE.write_text(json.dumps(table, indent=0) + "\n")
    print(f"{TABLE}: {len(table)} files, {sum(table.values()):.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
