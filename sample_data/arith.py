"""Synthetic integer arithmetic tasks with difficulty knobs, and the bundled task files.

A task is a bare expression ending in ``=`` (``"12+7="``) and its integer value as text
(``"19"``).  Knobs: how many digits an operand has at most, how many operands, which operators,
whether a parenthesised group appears.  Named difficulty levels 1..5 mix a few knob settings each.
Everything is deterministic for a seed.  Only ``+ - *`` appear, so every answer is an integer.

Regenerate the bundled files (the command the project used)::

    python -m rldata.sample_data.arith --out sample_data/arith_tasks.jsonl \\
        --heldout-out sample_data/arith_heldout.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BUNDLE_HELDOUT",
    "BUNDLE_TRAIN",
    "LEVELS",
    "ArithSpec",
    "evaluate",
    "generate",
    "generate_levels",
    "load_bundled",
    "make_bundle",
    "write_jsonl",
]

OPERATORS = "+-*"
_OP_NAMES = {"+": "add", "-": "sub", "*": "mul"}
_PRECEDENCE = {"+": 1, "-": 1, "*": 2}


@dataclass(frozen=True)
class ArithSpec:
    """One knob setting.  ``mul_digits`` caps the operand right of a ``*`` (2-digit x 1-digit)."""

    digits: int = 1  # an operand has at most this many digits (0 .. 10**digits - 1)
    n_operands: int = 2
    operators: str = "+"  # the operators drawn from, e.g. "+-*"
    parens: bool = False  # wrap a random run of 2 .. n-1 operands in parentheses
    allow_negative: bool = False  # False: redraw until the value is >= 0
    mul_digits: int | None = None  # digits of an operand right of "*"; None = digits

    def __post_init__(self):
        if not 1 <= self.digits <= 6:
            raise ValueError(f"digits must be in 1..6, got {self.digits}")
        if not 2 <= self.n_operands <= 8:
            raise ValueError(f"n_operands must be in 2..8, got {self.n_operands}")
        if not self.operators or set(self.operators) - set(OPERATORS):
            raise ValueError(f"operators must be a non-empty subset of {OPERATORS!r}, got {self.operators!r}")
        if self.parens and self.n_operands < 3:
            raise ValueError("parens need n_operands >= 3 (a group must be a strict sub-run)")
        if self.mul_digits is not None and not 1 <= self.mul_digits <= self.digits:
            raise ValueError(f"mul_digits must be in 1..digits, got {self.mul_digits}")


# Difficulty levels, ordered by what the embedded tiny model finds hard (measured: see
# docs/model.md); a level splits its tasks evenly over its knob settings.
LEVELS: dict[int, tuple[ArithSpec, ...]] = {
    1: (ArithSpec(1, 2, "+-*"),),
    2: (ArithSpec(1, 3, "+-"), ArithSpec(2, 2, "*", mul_digits=1)),
    3: (ArithSpec(1, 3, "+-*"), ArithSpec(1, 3, "+-*", parens=True)),
    4: (ArithSpec(1, 4, "+-*"), ArithSpec(2, 2, "+-")),
    5: (ArithSpec(1, 4, "+-*", parens=True), ArithSpec(2, 3, "+-")),
}

# The bundled files: tasks per level.  Level 1 has only 255 distinct prompts, so it is small.
BUNDLE_TRAIN = {1: 150, 2: 600, 3: 800, 4: 800, 5: 650}
BUNDLE_HELDOUT = {1: 50, 2: 100, 3: 120, 4: 120, 5: 110}


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def evaluate(tokens: list) -> int:
    """Value of a flat token list (ints, operators, "(" and ")") with the usual precedence."""
    out: list[int] = []
    ops: list[str] = []

    def reduce_top():
        b, a = out.pop(), out.pop()
        out.append(_apply(a, ops.pop(), b))

    for tok in tokens:
        if isinstance(tok, int):
            out.append(tok)
        elif tok == "(":
            ops.append(tok)
        elif tok == ")":
            while ops[-1] != "(":
                reduce_top()
            ops.pop()
        else:  # left-associative: reduce while the stacked operator binds at least as tightly
            while ops and ops[-1] != "(" and _PRECEDENCE[ops[-1]] >= _PRECEDENCE[tok]:
                reduce_top()
            ops.append(tok)
    while ops:
        reduce_top()
    return out[0]


def _operand(rng: random.Random, digits: int) -> int:
    return rng.randrange(10**digits)


def _draw(spec: ArithSpec, rng: random.Random) -> list:
    ops = [rng.choice(spec.operators) for _ in range(spec.n_operands - 1)]
    nums = []
    for i in range(spec.n_operands):
        right_of_mul = i > 0 and ops[i - 1] == "*"
        d = spec.mul_digits if right_of_mul and spec.mul_digits is not None else spec.digits
        nums.append(_operand(rng, d))
    lo = hi = -1
    if spec.parens:
        size = rng.randrange(2, spec.n_operands)  # a strict sub-run, so the group matters to parsing
        lo = rng.randrange(spec.n_operands - size + 1)
        hi = lo + size - 1
    tokens: list = []
    for i, n in enumerate(nums):
        if i:
            tokens.append(ops[i - 1])
        if i == lo:
            tokens.append("(")
        tokens.append(n)
        if i == hi:
            tokens.append(")")
    return tokens


def _row(tokens: list, spec: ArithSpec, *, level: int | None, split: str) -> dict:
    value = evaluate(tokens)
    used = "".join(sorted({t for t in tokens if t in _OP_NAMES}, key=OPERATORS.index))
    kind = _OP_NAMES[used] if len(used) == 1 else "mix"
    category = f"{kind}/d{spec.digits}/o{spec.n_operands}" + ("/p" if spec.parens else "")
    return {
        "prompt": "".join(str(t) for t in tokens) + "=",
        "answer": str(value),
        "domain": "math",
        "source": "arith",
        "category": category,
        "metadata": {
            "level": level,
            "digits": spec.digits,
            "operands": spec.n_operands,
            "ops": used,
            "parens": spec.parens,
            "split": split,
        },
    }


def _stream(spec: ArithSpec, rng: random.Random, *, level, split) -> Iterator[dict]:
    while True:
        tokens = _draw(spec, rng)
        if not spec.allow_negative and evaluate(tokens) < 0:
            continue
        yield _row(tokens, spec, level=level, split=split)


def _take_unique(rows: Iterator[dict], n: int, seen: set[str], *, what: str) -> list[dict]:
    """First ``n`` rows whose prompt is not in ``seen`` (updated); gives up after many repeats."""
    out: list[dict] = []
    misses = 0
    for row in rows:
        if len(out) == n:
            break
        if row["prompt"] in seen:
            misses += 1
            if misses > 200 * n + 10_000:  # the knob setting has fewer distinct prompts than asked
                raise ValueError(f"{what}: only {len(out)} distinct prompts found, asked for {n}")
            continue
        seen.add(row["prompt"])
        out.append(row)
    return out


def generate(
    n: int,
    *,
    seed: int,
    level: int | None = None,
    digits: int = 1,
    n_operands: int = 2,
    operators: str = "+",
    parens: bool = False,
    allow_negative: bool = False,
    mul_digits: int | None = None,
    split: str = "train",
    exclude: Iterable[str] = (),
) -> list[dict]:
    """``n`` distinct tasks, deterministic for ``seed``; ``level`` overrides the knobs.

    A level splits ``n`` evenly over its knob settings (the first ones take the remainder), each
    drawn from its own seeded stream.  ``exclude`` lists prompts that must not appear (for
    example the held-out set's).
    """
    if level is not None:
        if level not in LEVELS:
            raise ValueError(f"level must be one of {sorted(LEVELS)}, got {level}")
        specs = LEVELS[level]
    else:
        specs = (ArithSpec(digits, n_operands, operators, parens, allow_negative, mul_digits),)
    seen = set(exclude)
    rows: list[dict] = []
    for i, spec in enumerate(specs):
        k = n // len(specs) + (i < n % len(specs))
        rng = random.Random(f"arith:{seed}:{level}:{i}")  # str seeds are stable across processes
        stream = _stream(spec, rng, level=level, split=split)
        rows.extend(_take_unique(stream, k, seen, what=f"level {level} {spec}"))
    return rows


def generate_levels(
    counts: dict[int, int], *, seed: int, split: str = "train", exclude: Iterable[str] = ()
) -> list[dict]:
    """``counts[level]`` distinct tasks per level, in level order, none of them in ``exclude``."""
    rows: list[dict] = []
    seen = set(exclude)
    for level in sorted(counts):
        got = generate(counts[level], seed=seed, level=level, split=split, exclude=seen)
        seen.update(r["prompt"] for r in got)
        rows.extend(got)
    return rows


def make_bundle(*, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """The bundled (train, heldout) task lists: held-out drawn first, train excludes its prompts."""
    heldout = generate_levels(BUNDLE_HELDOUT, seed=seed + 1, split="heldout")
    train = generate_levels(BUNDLE_TRAIN, seed=seed, split="train", exclude=(r["prompt"] for r in heldout))
    return train, heldout


def write_jsonl(rows: Iterable[dict], path: str | Path) -> int:
    n = 0
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
            n += 1
    return n


def load_bundled(split: str = "train") -> list[dict]:
    """The bundled tasks shipped with the package (``split``: train | heldout)."""
    from importlib.resources import files

    name = {"train": "arith_tasks.jsonl", "heldout": "arith_heldout.jsonl"}[split]
    text = files("rldata.sample_data").joinpath(name).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m rldata.sample_data.arith", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="train tasks (jsonl)")
    p.add_argument("--heldout-out", help="held-out tasks (jsonl); with it, writes the bundle's two files")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-n", type=int, help="without --heldout-out: this many tasks of one level or knob setting")
    p.add_argument("--level", type=int, choices=sorted(LEVELS))
    p.add_argument("--digits", type=int, default=1)
    p.add_argument("--operands", type=int, default=2)
    p.add_argument("--operators", default="+")
    p.add_argument("--parens", action="store_true")
    a = p.parse_args(argv)
    if a.heldout_out:
        train, heldout = make_bundle(seed=a.seed)
        print(f"{write_jsonl(train, a.out)} train tasks -> {a.out}")
        print(f"{write_jsonl(heldout, a.heldout_out)} held-out tasks -> {a.heldout_out}")
        return
    if a.n is None:
        p.error("-n is required without --heldout-out")
    rows = generate(
        a.n,
        seed=a.seed,
        level=a.level,
        digits=a.digits,
        n_operands=a.operands,
        operators=a.operators,
        parens=a.parens,
    )
    print(f"{write_jsonl(rows, a.out)} tasks -> {a.out}")


if __name__ == "__main__":
    _main()
