"""A hostile pass over the classes of issue 29, round 2: fresh probes, not the fuzz corpus's cases.

Each probe runs one CLI command in-process (``rldata.cli.main``) against a small store and must be
refused: a non-zero exit, exactly one ``rldata: error:`` line, no traceback, and every file of the
store byte-identical.  A probe that exits 0 (or changes the store) is a *silent acceptance*.  A few
probes check an accepted command's result instead (exact numbers).  Prints one line per probe and
the tally; ``--json FILE`` writes the results.

    .venv/bin/python benchmarks/hostile29.py [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rldata.cli import main
from tests.reliability.helpers import banded_store, fingerprint

BOMB = (
    "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
)


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # a probe must never get here: main returns the code
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def probes(store: str, tmp: Path) -> list[tuple[str, str, list[str]]]:
    """(class, name, argv) of the refusal probes."""
    (tmp / "bomb.yaml").write_text(BOMB)
    (tmp / "t.jsonl").write_text('{"prompt": "z?", "answer": "1"}\n')
    link = tmp / "link"
    link.symlink_to(store)
    s = store
    return [
        # outputs into the store, every route
        (
            "outputs",
            "rejects through a symlink",
            ["ingest", str(tmp / "t.jsonl"), "--rejects", f"{link}/r.jsonl"],
        ),
        (
            "outputs",
            "curriculum via ..",
            ["stratify", "-s", "s1", "--quantiles", "2", "--curriculum", f"{s}/tasks/../b.yaml"],
        ),
        ("outputs", "env profile --report", ["env", "profile", "calculator", "--report", f"{s}/card.html"]),
        ("outputs", "judge export into the store", ["judge", "export", f"{s}/prefs"]),
        (
            "outputs",
            "metrics export into the store",
            ["metrics", "export", f"{s}/tb", "--run", "r1", "--to", "tensorboard"],
        ),
        (
            "outputs",
            "export-model into the store",
            ["--store", s, "export-model", "r1", "--out", f"{s}/model", "--runs-dir", str(tmp)],
        ),
        ("outputs", "report into a table dir", ["report", "--out", f"{s}/passrates/rep"]),
        (
            "outputs",
            "filter --out a commit file",
            [
                "filter",
                "--band",
                "0.1,0.9",
                "--name",
                "s3",
                "--out",
                f"{s}/selections/_delta_log/00000000000000000009.json",
            ],
        ),
        # SQL reads nothing else
        ("sql", "read_csv /etc/passwd", ["sql", "SELECT * FROM read_csv('/etc/passwd')"]),
        ("sql", "read_json_auto home", ["sql", "SELECT * FROM read_json_auto('~/.bash_history')"]),
        (
            "sql",
            "parquet_metadata of a table file glob",
            ["sql", f"SELECT * FROM parquet_metadata('{tmp}/*.parquet')"],
        ),
        ("sql", "httpfs url", ["sql", "SELECT * FROM read_text('http://127.0.0.1:1/x')"]),
        (
            "sql",
            "where reads a file",
            ["passrates", "--where", "t.task_id IN (SELECT content FROM read_text('/etc/hostname'))"],
        ),
        ("sql", "where with a second statement", ["passrates", "--where", "1=1; SELECT 1"]),
        ("sql", "set a setting", ["sql", "SET enable_external_access = true"]),
        ("sql", "attach", ["sql", f"ATTACH '{tmp}/x.db' AS x"]),
        # bounded inputs: YAML in every YAML-reading command
        ("yaml", "rewards --spec bomb", ["rewards", "--run-id", "r1", "--spec", str(tmp / "bomb.yaml")]),
        ("yaml", "sample --config bomb", ["sample", "--config", str(tmp / "bomb.yaml")]),
        ("yaml", "filter --config bomb", ["filter", "--config", str(tmp / "bomb.yaml")]),
        ("yaml", "stratify --config bomb", ["stratify", "--config", str(tmp / "bomb.yaml")]),
        ("yaml", "verify --config bomb", ["verify", "--config", str(tmp / "bomb.yaml")]),
        ("yaml", "demo --config bomb", ["demo", "--config", str(tmp / "bomb.yaml")]),
        # names and ids
        (
            "names",
            "metrics export ../",
            ["metrics", "export", str(tmp / "tb"), "--run", "../../etc", "--to", "tensorboard"],
        ),
        ("names", "verify --run-id with a quote", ["verify", "--run-id", "x' OR '1'='1"]),
        ("names", "cost --run ../x", ["cost", "--params", "7e9", "--gpu", "h100", "--run", "../x"]),
        ("names", "train --tag with a newline", ["train", "--tag", "a\nb", "--out", str(tmp / "runs")]),
        ("names", "stratify selection ../", ["stratify", "-s", "../s1", "--quantiles", "2"]),
        # sampling parameters refused before Ray starts
        ("params", "temperature -1", ["sample", "--temperature", "-1"]),
        ("params", "top-p 2", ["sample", "--top-p", "2"]),
        ("params", "max-tokens 0", ["sample", "--max-tokens", "0"]),
        ("params", "seed -1", ["sample", "--seed", "-1"]),
        ("params", "engines -2", ["sample", "--engines", "-2"]),
        ("params", "n nan", ["sample", "--n", "nan"]),
        # exact numbers and finite rewards
        ("numbers", "cost params nan", ["cost", "--params", "nan", "--tokens", "1e9", "--gpu", "h100"]),
        ("numbers", "cost params -7e9", ["cost", "--params", "-7e9", "--tokens", "1e9", "--gpu", "h100"]),
        ("numbers", "cost tokens 0", ["cost", "--params", "7e9", "--tokens", "0", "--gpu", "h100"]),
        ("numbers", "import reward as a string inf", ["import-rollouts", "@r.jsonl", "--format", "jsonl"]),
        ("numbers", "ingest answer -Infinity", ["ingest", "@n.jsonl"]),
        # doctor on a path that is not a store
        ("doctor", "doctor on a missing store", ["--store", str(tmp / "nope"), "doctor"]),
    ]


def main_(cli_args=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args(cli_args)
    results = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        store = banded_store(tmp / "store")
        (tmp / "r.jsonl").write_text('{"prompt": "p", "completion": "c", "score": "inf"}\n')
        (tmp / "n.jsonl").write_text('{"prompt": "q", "answer": -Infinity}\n')
        os.chdir(tmp)
        for cls, name, argv in probes(store, tmp):
            argv = [str(tmp / a[1:]) if a.startswith("@") else a for a in argv]
            if "--store" not in argv:
                argv = ["--store", store, *argv]
            before = fingerprint(store)
            code, out, err = _run(argv)
            lines = [ln for ln in err.splitlines() if ln.startswith("rldata: error:")]
            ok = code != 0 and len(lines) == 1 and "Traceback" not in err and fingerprint(store) == before
            results.append(
                {
                    "class": cls,
                    "probe": name,
                    "refused": ok,
                    "exit": code,
                    "line": (lines or [err[-200:]])[-1],
                }
            )
            print(f"{'ok  ' if ok else 'MISS'} [{cls}] {name}: exit {code}: {results[-1]['line'][:160]}")
        # exact numbers: accepted, and kept digit for digit
        big = tmp / "big.jsonl"
        big.write_text(
            '{"prompt": "big?", "answer": 12345678901234567890123}\n{"prompt": "dec?", "answer": 0.1000}\n'
        )
        code, _, err = _run(["--store", store, "ingest", str(big)])
        _, out, _ = _run(
            [
                "--store",
                store,
                "sql",
                "SELECT answer FROM tasks WHERE prompt IN ('big?', 'dec?') ORDER BY prompt",
                "-f",
                "csv",
            ]
        )
        kept = out.split() == ["answer", "12345678901234567890123", "0.1000"]
        results.append(
            {
                "class": "numbers",
                "probe": "big integer and decimal answers kept exactly",
                "refused": kept,
                "exit": code,
                "line": out.strip()[:160],
            }
        )
        print(f"{'ok  ' if kept else 'MISS'} [numbers] exact answers: {out.split()[1:]}")
    miss = [r for r in results if not r["refused"]]
    print(f"{len(results)} probes, {len(miss)} silent acceptance(s) or unclear refusals")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
