"""Verifications/s: rldata's deduplicated, parallel math verification vs a sequential math-verify loop.

Workload: GSM8K tasks from ``sample_data/gsm8k`` with 16 model-like samples each.  A model's
samples of one task repeat a few answers (right, or one of a few typical mistakes) in varying
surface forms ("#### 18", "The answer is 18.", "\\boxed{18}", ...), after the reference reasoning.

Settings, run side by side (interleaved, repeated; median reported):
- baseline: ``math_verify.verify(parse(gold), parse(completion))`` for every completion, in order,
  in this process (what one writes without rldata);
- for the breakdown only: math-verify on the answers rldata extracts, one by one (no dedup);
- ``verify_many``: rldata on one core, in the local verifier process (dedup, no parallelism);
- ``verify_on_ray``: rldata on a local Ray with 2 CPUs (dedup + 2 workers).

Each setting gets a warm-up pass on other tasks first (imports, Ray workers, verifier processes),
and each repeat uses tasks of its own, so no cache carries answers from one repeat to the next.
The script also reports how often rldata's verdict agrees with the baseline's.

Usage: ``.venv/bin/python benchmarks/bench_verify.py [--tasks 200] [--samples 16] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
from importlib.resources import files

FORMS = (
    "#### {a}",
    "The answer is {a}.",
    "So the answer is $\\boxed{{{a}}}$.",
    "Answer: {a}",
    "Therefore she has {a} in total.",
)


def load_gsm8k(name: str) -> list[tuple[str, str]]:
    """(reference solution without the <<calc>> notes and the #### line, gold answer)."""
    path = files("rldata.sample_data") / "gsm8k" / name
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        body, _, gold = row["answer"].rpartition("####")
        out.append((re.sub(r"<<[^>]*>>", "", body).strip(), gold.strip()))
    return out


def make_completions(tasks, samples: int, seed: int) -> list[tuple[str, str]]:
    """(completion, gold) pairs: per task a few candidate answers, drawn with repetition."""
    rng = random.Random(seed)
    out = []
    for body, gold in tasks:
        g = int(gold.replace(",", "")) if gold.replace(",", "").lstrip("-").isdigit() else None
        wrong = [str(g + 1), str(g * 2), str(max(g - 10, 0))] if g is not None else ["0"]
        for _ in range(samples):
            r = rng.random()
            ans = gold if r < 0.55 else (wrong[0] if r < 0.75 else rng.choice(wrong))
            if g is not None and g >= 1000 and rng.random() < 0.5:
                ans = f"{int(ans.replace(',', '')):,}"  # "1,234" as models write it
            form = rng.choice(FORMS)
            out.append((f"{body}\n{form.format(a=ans)}", gold))
    return out


def run_baseline(pairs) -> list[bool]:
    from math_verify import parse, verify

    return [bool(verify(parse(gold), parse(comp))) for comp, gold in pairs]


def run_extracted(pairs) -> list[bool]:
    """Not a setting users run: separates the gain of reading the answer first from dedup."""
    from math_verify import parse, verify

    from rldata.verify.extract import extract_answer
    from rldata.verify.math import parse_answer

    out = []
    for comp, gold in pairs:
        ans = extract_answer(comp)
        out.append(ans is not None and bool(verify(parse(gold), parse(ans))))
    parse_answer.cache_clear()
    return out


def run_local(pairs) -> list[bool | None]:
    from rldata.verify.run import verify_many

    return [vs[0].passed for vs in verify_many([("math", c, {"answer": g}) for c, g in pairs])]


def run_ray(pairs) -> list[bool | None]:
    from rldata.verify.parallel import verify_on_ray

    items = [{"key": i, "domain": "math", "completion": c, "answer": g} for i, (c, g) in enumerate(pairs)]
    out = verify_on_ray(items, where="ray")  # the parallel path (cheap checks would stay in the driver)
    return [out[i][0].passed for i in range(len(pairs))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200, help="GSM8K test tasks to verify")
    ap.add_argument("--samples", type=int, default=16, help="samples per task")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import ray

    from rldata.verify.run import plan

    # Every repeat gets tasks of its own, so no setting gains from caches filled by an earlier repeat
    # (math-verify's parse caches in the baseline, rldata's in its verifier processes).
    pool = load_gsm8k("test.jsonl") + load_gsm8k("train.jsonl")
    warm = make_completions(pool[:40], args.samples, args.seed + 1)
    slices = [pool[40 + r * args.tasks : 40 + (r + 1) * args.tasks] for r in range(args.repeats)]
    if len(slices[-1]) < args.tasks:
        raise SystemExit(
            f"not enough GSM8K tasks for {args.repeats} x {args.tasks}: {len(pool) - 40} available"
        )
    workloads = [make_completions(s, args.samples, args.seed + r) for r, s in enumerate(slices)]
    units, _ = plan([("math", c, {"answer": g}) for c, g in workloads[0]])  # dedup numbers only
    n = len(workloads[0])
    print(
        f"workload per repeat: {args.tasks} GSM8K tasks x {args.samples} samples = {n} completions, "
        f"{len(units)} distinct (answer, gold) checks ({n / len(units):.1f}x duplication)"
    )

    t0 = time.monotonic()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"ray.init: {time.monotonic() - t0:.1f}s (not counted)")
    settings = {
        "baseline (sequential math_verify)": run_baseline,
        "math_verify on extracted answers, no dedup (1 core)": run_extracted,
        "verify_many (1 core, dedup)": run_local,
        "verify_on_ray (2 CPUs)": run_ray,
    }
    for fn in settings.values():
        fn(warm)
    rates: dict[str, list[float]] = {k: [] for k in settings}
    results = {}
    agree = {k: [0, 0, 0] for k in settings}  # same as baseline, compared, error verdicts
    for measured in workloads:
        for name, fn in settings.items():
            t0 = time.monotonic()
            results[name] = fn(measured)
            rates[name].append(len(measured) / (time.monotonic() - t0))
        ref = results[next(iter(settings))]
        for name in settings:
            got = results[name]
            agree[name][0] += sum(a == b for a, b in zip(ref, got))
            agree[name][1] += len(ref)
            agree[name][2] += sum(g is None for g in got)
    base_name = next(iter(settings))
    base = statistics.median(rates[base_name])
    print("| setting | verifications/s (median) | runs | ratio to baseline |")
    print("|---|---|---|---|")
    for name, rs in rates.items():
        med = statistics.median(rs)
        runs = ", ".join(f"{r:.0f}" for r in rs)
        print(f"| {name} | {med:.0f} | {runs} | {med / base:.2f}x |")
    for name in list(settings)[1:]:
        same, total, errors = agree[name]
        print(
            f"{name}: agrees with the baseline on {same / total:.2%} of completions; {errors} error verdicts"
        )
    ray.shutdown()


if __name__ == "__main__":
    main()
