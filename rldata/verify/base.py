"""The verifier contract and registry.

A verifier checks one completion against one task and returns one :class:`Verdict` per layer
(single-layer verifiers return one, with ``layer="answer"``).  Verifiers are pure functions of
(completion, task) plus a version string that is stored with every result, so results of
different verifier versions never mix in the pass-rate ledger.

A verifier must not raise on bad completions; :func:`run_verifier` still guards every call, and
turns a crash or timeout into an error verdict (``passed=None``), never a silent 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "DOMAIN_DEFAULTS", "REGISTRY", "Verdict", "Verifier", "all_passed", "for_domain", "get_verifier", "no_answer",
    "register", "verdict_rows",
]


@dataclass(frozen=True)
class Verdict:
    passed: bool | None  # None = the verifier errored (crash, timeout): not a pass, not a fail
    score: float = 0.0  # reward in [0, 1] for this layer
    extracted: str | None = None  # the answer pulled out of the completion
    error: str | None = None
    detail: Mapping[str, Any] | None = None
    layer: str = "answer"  # answer | rule | public | hidden | judge

    @classmethod
    def failure(cls, error: str, *, layer: str = "answer", extracted: str | None = None) -> Verdict:
        return cls(passed=None, score=0.0, extracted=extracted, error=error, layer=layer)


def all_passed(verdicts: Sequence[Verdict]) -> bool | None:
    """A sample's outcome over its layers: None (an error) if any layer errored, else whether all
    passed.  The one rule the ledger, ``rldata sample`` and the trainer share."""
    if any(v.passed is None for v in verdicts):
        return None
    return all(v.passed for v in verdicts)


def no_answer(verdicts: Sequence[Verdict]) -> bool:
    """A parse failure: the verifier ran (no error) but found no answer (or code) to check in the
    completion: every non-judge layer has ``extracted`` None.  Counted apart from wrong answers."""
    own = [v for v in verdicts if v.layer != "judge"]
    return bool(own) and all_passed(own) is not None and all(v.extracted is None for v in own)


def verdict_rows(task_id: str, traj_id: str, verifier: str, version: str, verdicts: Sequence[Verdict]) -> list[dict]:
    """``verifications`` rows, one per layer, for one sample's verdicts."""
    return [
        {
            "traj_id": traj_id, "task_id": task_id, "verifier": verifier, "verifier_version": version,
            "layer": v.layer, "passed": v.passed, "score": float(v.score), "extracted": v.extracted,
            "error": v.error, "detail": json.dumps(dict(v.detail), default=str) if v.detail else None,
        }
        for v in verdicts
    ]


class Verifier(Protocol):
    name: str
    version: str

    def verify(self, completion: str, task: Mapping[str, Any]) -> list[Verdict]:
        """``task`` carries at least ``answer`` (and ``tests`` for code tasks)."""
        ...


REGISTRY: dict[str, Callable[[], Verifier]] = {}
DOMAIN_DEFAULTS: dict[str, str] = {"math": "math", "arith": "math", "code": "code", "text": "exact"}


def register(name: str, *, domains: tuple[str, ...] = ()):
    """Class decorator: ``@register("math", domains=("math",))``."""

    def deco(factory):
        REGISTRY[name] = factory
        for d in domains:
            DOMAIN_DEFAULTS[d] = name
        return factory

    return deco


def get_verifier(name: str) -> Verifier:
    from rldata.verify import _load_builtin

    _load_builtin()
    try:
        return REGISTRY[name]()
    except KeyError:
        raise KeyError(f"unknown verifier {name!r}; known: {', '.join(sorted(REGISTRY))}") from None


def for_domain(domain: str) -> Verifier:
    """The default verifier for a task domain (math -> math-verify, code -> sandboxed tests)."""
    from rldata.verify import _load_builtin

    _load_builtin()
    name = DOMAIN_DEFAULTS.get(domain)
    if name is None:
        raise KeyError(f"no verifier for domain {domain!r}; domains: {', '.join(sorted(DOMAIN_DEFAULTS))}")
    return get_verifier(name)
