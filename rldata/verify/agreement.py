"""Agreement of a verifier with labelled completions, and bare math-verify as the baseline.

Used by the adversarial-corpus test (tests/verify/test_adversarial_corpus.py) and
benchmarks/bench_verifier_agreement.py; the corpus format is documented in tests/data/README.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rldata.errors import ConfigError, DuplicateKeyError, InputError, unique_keys
from rldata.verify.run import verify_many

__all__ = ["Agreement", "agreement", "bare_math_verify", "load_labelled", "rldata_math"]


@dataclass(frozen=True)
class Agreement:
    n: int
    agree: int
    false_pos: int  # passed, labelled wrong
    false_neg: int  # failed (or errored), labelled right

    @property
    def rate(self) -> float:
        return self.agree / self.n if self.n else 0.0


def agreement(passed: Sequence[bool], labels: Sequence[bool]) -> Agreement:
    """``passed[i]`` is True only for a pass (an error or a fail is False)."""
    if len(passed) != len(labels):
        raise ConfigError(f"{len(passed)} verdicts for {len(labels)} labels", field="labels")
    fp = sum(1 for p, y in zip(passed, labels) if p and not y)
    fn = sum(1 for p, y in zip(passed, labels) if y and not p)
    return Agreement(len(labels), len(labels) - fp - fn, fp, fn)


def load_labelled(path: str | Path) -> list[dict]:
    """Rows of a labelled JSONL corpus; each must have ``gold``, ``completion`` and a bool ``label``."""
    rows = []
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, object_pairs_hook=unique_keys)
        except DuplicateKeyError as e:
            raise InputError(str(path), str(i), str(e), e.key) from None
        except ValueError as e:
            raise InputError(str(path), str(i), f"invalid JSON: {e}") from None
        missing = {"gold", "completion", "label"} - set(row)
        if missing or not isinstance(row["label"], bool):
            raise InputError(str(path), str(i), "needs gold, completion and a true/false label")
        rows.append(row)
    return rows


def rldata_math(rows: Sequence[dict], *, timeout_s: float = 10.0) -> list[bool]:
    """rldata's math verifier on each row, through verify_many (child process, timeouts); a row's
    optional ``prompt`` is the task's prompt (the verifier ignores boxes quoted from it)."""
    tasks = [{"answer": r["gold"], "prompt": r.get("prompt")} for r in rows]
    out = verify_many([("math", r["completion"], t) for r, t in zip(rows, tasks)], timeout_s=timeout_s)
    return [vs[0].passed is True for vs in out]


def bare_math_verify(gold: str, completion: str) -> bool:
    """math-verify on its own: ``verify(parse(gold), parse(completion))`` with its default settings."""
    import math_verify

    try:
        return bool(math_verify.verify(math_verify.parse(gold), math_verify.parse(completion)))
    except Exception:  # noqa: BLE001 -- the baseline as users run it: anything raised is no pass
        return False
