"""Verifier correctness, not speed: agreement with labels, false positives and false negatives.

Math: rldata's math verifier (extraction + math-verify, through ``verify_many``) and bare
math-verify (``verify(parse(gold), parse(completion))``) on the labelled adversarial corpus
tests/data/math_adversarial.jsonl, overall and per class, and on every labelled set (the corpus
and the held-out sets math_adversarial_heldout*.jsonl; per class for held-out set 3).

Code: false rejections of reference solutions by the code verifier (rule layer alone, and all
three layers in the real sandbox), on the bundled code tasks and the converted HumanEval set
(tests/data/humaneval_code_tasks.jsonl); and how many wrong bodies (``return None``, a lookup
table of the public cases) get through.

    python benchmarks/bench_verifier_agreement.py [--no-sandbox | --math-only] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from rldata.verify.agreement import agreement, bare_math_verify, load_labelled, rldata_math

ROOT = Path(__file__).parents[1]
CORPUS = ROOT / "tests" / "data" / "math_adversarial.jsonl"
MATH_SETS = {
    "corpus": CORPUS,
    "heldout": ROOT / "tests" / "data" / "math_adversarial_heldout.jsonl",
    "heldout2": ROOT / "tests" / "data" / "math_adversarial_heldout2.jsonl",
    "heldout3": ROOT / "tests" / "data" / "math_adversarial_heldout3.jsonl",
}
CODE_SETS = {
    "sample_data": ROOT / "sample_data" / "code_tasks.jsonl",
    "humaneval": ROOT / "tests" / "data" / "humaneval_code_tasks.jsonl",
}


def math_table(path: Path = CORPUS) -> dict:
    rows = load_labelled(path)
    labels = [r["label"] for r in rows]
    ours = rldata_math(rows)
    bare = [bare_math_verify(r["gold"], r["completion"]) for r in rows]
    by_class: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_class[r["class"]].append(i)
    out = {"all": {"rldata": agreement(ours, labels), "bare": agreement(bare, labels)}}
    for cls, idx in sorted(by_class.items()):
        sub = [labels[i] for i in idx]
        out[cls] = {
            "rldata": agreement([ours[i] for i in idx], sub),
            "bare": agreement([bare[i] for i in idx], sub),
        }
    return out


def _hack(t: dict) -> tuple[str, str]:
    """(a body returning nothing, a lookup table of the public cases) for one task."""
    tests = t["tests"]
    if tests["style"] == "stdio":
        table = {c["input"]: c["output"] for c in tests["public"]}
        return "print()\n", f"import sys\nprint({table!r}.get(sys.stdin.read(), ''), end='')\n"
    entry = tests["entry_point"]
    lines = [f"def {entry}(*args):"]
    for c in tests["public"]:
        lines += [f"    if args == {tuple(c['input'])!r}:", f"        return {c['output']!r}"]
    return f"def {entry}(*args):\n    return None\n", "\n".join([*lines, "    return None"]) + "\n"


def code_table(sandbox: bool) -> dict:
    from rldata.verify.base import all_passed
    from rldata.verify.code import CodeVerifier
    from rldata.verify.code_rules import check_rules, parse_tests

    v = CodeVerifier()
    out = {}
    for name, path in CODE_SETS.items():
        tasks = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rec = {
            "tasks": len(tasks),
            "rule_rejects_reference": 0,
            "all_layers_reject_reference": None,
            "none_body_passes": None,
            "lookup_flagged_by_rule": 0,
            "lookup_passes": None,
        }
        for t in tasks:
            tests = parse_tests(t["tests"])
            ref = t["metadata"]["reference_solution"]
            none_body, lookup = _hack(t)
            rec["rule_rejects_reference"] += not check_rules(ref, tests).passed
            rec["lookup_flagged_by_rule"] += check_rules(lookup, tests).detail["checks"]["hardcoded"] != "ok"
            if sandbox:
                task = {"tests": json.dumps(t["tests"])}
                for key, code in (
                    ("all_layers_reject_reference", ref),
                    ("none_body_passes", none_body),
                    ("lookup_passes", lookup),
                ):
                    ok = all_passed(v.verify(f"```python\n{code}\n```", task)) is True
                    bad = (not ok) if key == "all_layers_reject_reference" else ok
                    rec[key] = (rec[key] or 0) + bad
        out[name] = rec
    return out


def _print_table(first: str, table: dict) -> None:
    print(f"| {first} | n | rldata agree | rldata FP | rldata FN | bare agree | bare FP | bare FN |")
    print("|---|---|---|---|---|---|---|---|")
    for cls, d in table.items():
        o, b = d["rldata"], d["bare"]
        print(
            f"| {cls} | {o.n} | {o.agree} ({o.rate:.1%}) | {o.false_pos} | {o.false_neg} "
            f"| {b.agree} ({b.rate:.1%}) | {b.false_pos} | {b.false_neg} |"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-sandbox", action="store_true", help="code: rule layer only")
    ap.add_argument("--math-only", action="store_true", help="the math tables only")
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args(argv)
    tables = {name: math_table(path) for name, path in MATH_SETS.items()}
    m = tables["corpus"]
    _print_table("class", m)
    print()
    _print_table("set", {name: t["all"] for name, t in tables.items()})
    print()
    _print_table("heldout3 class", tables["heldout3"])
    if a.math_only:
        if a.json:
            Path(a.json).write_text(
                json.dumps(
                    {
                        n: {k: {s: vars(x) for s, x in d.items()} for k, d in t.items()}
                        for n, t in tables.items()
                    }
                )
            )
        return 0
    c = code_table(not a.no_sandbox)
    print()
    print(
        "| set | tasks | reference rejected: rule | reference rejected: all layers | return None passes "
        "| lookup flagged by rule | lookup passes all layers |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in c.items():
        print(
            f"| {name} | {r['tasks']} | {r['rule_rejects_reference']} | {r['all_layers_reject_reference']} "
            f"| {r['none_body_passes']} | {r['lookup_flagged_by_rule']} | {r['lookup_passes']} |"
        )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {"math": {k: {s: vars(x) for s, x in d.items()} for k, d in m.items()}, "code": c}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
