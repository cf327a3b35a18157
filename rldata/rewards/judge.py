"""Generative reward model (GenRM): an LLM judge run through the same vLLM engine as sampling.

- Pointwise: "is this response correct?"  The judge ends with the line ``VERDICT: 1`` or
  ``VERDICT: 0``; the score is 1.0 or 0.0.
- Pairwise: "which response is better?"  The judge ends with ``VERDICT: A`` or ``VERDICT: B``.
  With ``swap=True`` (default) each pair is judged in both orders and only a consistent preference
  counts (a judge that always says "A" gets an error, not a preference).

Parsing is strict: the last non-empty line must be exactly the verdict line, and no other line may
start with ``VERDICT``.  Anything else is an error result (``passed=None``, ``error`` says why),
never a score.  Verdict and rationale go to ``Verdict.detail`` and from there to the
``verifications`` table (``layer="judge"``, verifier ``genrm`` or ``genrm_pair``).

The store job that judges stored trajectories is :func:`rldata.jobs.judge.judge_store`; the export
of judge rows as (chosen, rejected) pairs is :func:`rldata.interop.preferences.export_preferences`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rldata.configs.sampling import SamplingSpec
from rldata.errors import ConfigError, RldataError
from rldata.verify.base import Verdict

__all__ = [
    "PAIRWISE",
    "POINTWISE",
    "Judge",
    "JudgeTemplate",
    "judge_rows",
    "pairwise_prompt",
    "parse_pairwise",
    "parse_pointwise",
    "pointwise_prompt",
]

POINTWISE = "genrm"  # verifier names in the verifications table
PAIRWISE = "genrm_pair"
_VERDICT_LINE = re.compile(r"^\s*VERDICT\b", re.IGNORECASE)
_POINT = re.compile(r"^VERDICT: ([01])$")
_PAIR = re.compile(r"^VERDICT: ([AB])$")


@dataclass(frozen=True)
class JudgeTemplate:
    """Prompt templates (``str.format``); ``name`` goes into the stored verifier version."""

    name: str = "v1"
    pointwise: str = (
        "You are grading a response to a task.\n\nTask:\n{prompt}\n\n{reference_block}Response:\n{response}\n\n"
        "Explain briefly whether the response is correct. Then end with one line, exactly "
        "'VERDICT: 1' if it is correct or 'VERDICT: 0' if it is not.\n"
    )
    pairwise: str = (
        "You are comparing two responses to a task.\n\nTask:\n{prompt}\n\nResponse A:\n{a}\n\nResponse B:\n{b}\n\n"
        "Explain briefly which response is better. Then end with one line, exactly 'VERDICT: A' or 'VERDICT: B'.\n"
    )
    reference: str = "Reference answer:\n{reference}\n\n"

    def __post_init__(self):
        for part_name, part, keys in (
            ("pointwise", self.pointwise, ("{response}",)),
            ("pairwise", self.pairwise, ("{a}", "{b}")),
        ):
            missing = [k for k in keys if k not in part]
            if missing:
                raise ConfigError(f"judge template {self.name!r} lacks {', '.join(missing)}", field=part_name)


def pointwise_prompt(
    prompt: str, response: str, *, reference: str | None = None, template: JudgeTemplate = JudgeTemplate()
) -> str:
    ref = template.reference.format(reference=reference) if reference else ""
    return template.pointwise.format(
        prompt=prompt, response=response, reference=reference or "", reference_block=ref
    )


def pairwise_prompt(prompt: str, a: str, b: str, *, template: JudgeTemplate = JudgeTemplate()) -> str:
    return template.pairwise.format(prompt=prompt, a=a, b=b)


def _parse(text: str, pattern: re.Pattern, mode: str) -> tuple[str | None, str, str | None]:
    """(verdict, rationale, error)."""
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    if not lines:
        return None, "", "empty judge output"
    m = pattern.match(lines[-1].strip())
    if m is None:
        return None, text, f"unparseable {mode} verdict: last line {lines[-1].strip()[:80]!r}"
    if any(_VERDICT_LINE.match(ln) for ln in lines[:-1]):
        return None, text, f"ambiguous {mode} verdict: more than one VERDICT line"
    return m.group(1), "\n".join(lines[:-1]).strip(), None


def parse_pointwise(text: str) -> Verdict:
    """``VERDICT: 1`` -> passed, score 1.0; ``VERDICT: 0`` -> failed, 0.0; anything else -> error."""
    verdict, rationale, error = _parse(text, _POINT, "pointwise")
    detail = {"mode": "pointwise", "verdict": verdict, "rationale": rationale[:4000]}
    if error:
        return Verdict(None, 0.0, None, error, {**detail, "raw": (text or "")[:4000]}, layer="judge")
    return Verdict(verdict == "1", float(verdict == "1"), verdict, None, detail, layer="judge")


def parse_pairwise(text: str) -> Verdict:
    """``VERDICT: A`` -> passed (A preferred), score 1.0; ``B`` -> 0.0; anything else -> error."""
    verdict, rationale, error = _parse(text, _PAIR, "pairwise")
    detail = {"mode": "pairwise", "verdict": verdict, "rationale": rationale[:4000]}
    if error:
        return Verdict(None, 0.0, None, error, {**detail, "raw": (text or "")[:4000]}, layer="judge")
    return Verdict(verdict == "A", float(verdict == "A"), verdict, None, detail, layer="judge")


def _swap_combine(first: Verdict, second: Verdict) -> Verdict:
    """Combine the (a, b) and (b, a) judgments: the same response must win both times."""
    if first.passed is None or second.passed is None:
        bad = first if first.passed is None else second
        return Verdict(
            None,
            0.0,
            None,
            bad.error,
            {"mode": "pairwise", "orders": [first.detail, second.detail]},
            layer="judge",
        )
    if first.passed == second.passed:  # "A" then "A" again means the position won, not a response
        return Verdict(
            None,
            0.0,
            None,
            f"inconsistent under swap: {first.extracted} then {second.extracted}",
            {"mode": "pairwise", "orders": [first.detail, second.detail]},
            layer="judge",
        )
    detail = {
        "mode": "pairwise",
        "verdict": first.extracted,
        "rationale": first.detail["rationale"],
        "swapped_rationale": second.detail["rationale"],
    }
    return Verdict(first.passed, first.score, first.extracted, None, detail, layer="judge")


@dataclass
class Judge:
    """Run judge prompts through an :class:`rldata.engine.core.Engine` (or anything with the same
    ``generate(prompts, SamplingSpec) -> list[list[Sample]]`` and ``tokenizer``)."""

    engine: Any
    template: JudgeTemplate = field(default_factory=JudgeTemplate)
    sampling: SamplingSpec = field(default_factory=lambda: SamplingSpec(n=1, temperature=0.0, max_tokens=256))
    swap: bool = True

    @property
    def version(self) -> str:
        model = getattr(self.engine, "model_id", "?")
        rev = getattr(self.engine, "revision", "")
        return f"{self.template.name}:{model}" + (f"@{rev}" if rev else "")

    def _generate(self, prompts: list[str]) -> list[str | Verdict]:
        """Judge outputs; a prompt too long for the engine gets an error verdict, not a crash."""
        limit = getattr(self.engine, "max_model_len", None)
        todo, out = [], [None] * len(prompts)
        if not limit:
            lengths = [0] * len(prompts)
        elif hasattr(self.engine, "count_tokens"):  # an engine actor: one call, not one per prompt
            lengths = self.engine.count_tokens(prompts)
        else:
            lengths = [len(self.engine.tokenizer.encode(p)) for p in prompts]
        for i, (p, n_tok) in enumerate(zip(prompts, lengths)):
            if limit and n_tok + self.sampling.max_tokens > limit:
                out[i] = Verdict.failure(
                    f"judge prompt too long: {n_tok} tokens + {self.sampling.max_tokens} "
                    f"> max_model_len {limit}",
                    layer="judge",
                )
            else:
                todo.append(i)
        if todo:
            spec = SamplingSpec(**{**self.sampling.to_dict(), "n": 1})
            for i, samples in zip(todo, self.engine.generate([prompts[i] for i in todo], spec)):
                out[i] = samples[0].text
        return out

    def pointwise(
        self, prompts: Sequence[str], responses: Sequence[str], references: Sequence[str | None] | None = None
    ) -> list[Verdict]:
        refs = references if references is not None else [None] * len(prompts)
        if not len(prompts) == len(responses) == len(refs):
            raise RldataError("pointwise judge: prompts, responses and references differ in length")
        texts = self._generate(
            [
                pointwise_prompt(p, r, reference=ref, template=self.template)
                for p, r, ref in zip(prompts, responses, refs)
            ]
        )
        return [t if isinstance(t, Verdict) else parse_pointwise(t) for t in texts]

    def pairwise(self, prompts: Sequence[str], a: Sequence[str], b: Sequence[str]) -> list[Verdict]:
        if not len(prompts) == len(a) == len(b):
            raise RldataError("pairwise judge: prompts, a and b differ in length")
        ab = [pairwise_prompt(p, x, y, template=self.template) for p, x, y in zip(prompts, a, b)]
        ba = (
            [pairwise_prompt(p, y, x, template=self.template) for p, x, y in zip(prompts, a, b)]
            if self.swap
            else []
        )
        texts = self._generate(ab + ba)
        first = [t if isinstance(t, Verdict) else parse_pairwise(t) for t in texts[: len(ab)]]
        if not self.swap:
            return first
        second = [t if isinstance(t, Verdict) else parse_pairwise(t) for t in texts[len(ab) :]]
        return [_swap_combine(f, s) for f, s in zip(first, second)]


def judge_rows(
    verdicts: Sequence[Verdict],
    traj_ids: Sequence[str],
    task_ids: Sequence[str],
    *,
    verifier: str,
    version: str,
    others: Sequence[str] | None = None,
) -> list[dict]:
    """``verifications`` rows for judge verdicts (pairwise: ``others`` are the B trajectories)."""
    rows = []
    for i, (v, traj, task) in enumerate(zip(verdicts, traj_ids, task_ids, strict=True)):
        detail = dict(v.detail or {})
        if others is not None:
            detail.update(a=traj, b=others[i])
        rows.append(
            {
                "traj_id": traj,
                "task_id": task,
                "verifier": verifier,
                "verifier_version": version,
                "layer": "judge",
                "passed": v.passed,
                "score": v.score,
                "extracted": v.extracted,
                "error": v.error,
                "detail": json.dumps(detail, ensure_ascii=False),
            }
        )
    return rows
