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

Offline path: :func:`export_preferences` turns judge rows into (chosen, rejected) pairs, JSONL or
Parquet, for training a smaller reward model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from rldata.errors import ConfigError, RldataError
from rldata.params import SamplingSpec
from rldata.verify.base import Verdict

__all__ = [
    "PAIRWISE",
    "POINTWISE",
    "Judge",
    "JudgeTemplate",
    "export_preferences",
    "judge_rows",
    "judge_store",
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
        for part_name, part, keys in (("pointwise", self.pointwise, ("{response}",)),
                                      ("pairwise", self.pairwise, ("{a}", "{b}"))):
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
    """Run judge prompts through an :class:`rldata.engine.Engine` (or anything with the same
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


def judge_store(
    store, judge: Judge, *, mode: str = "pointwise", run_id: str | None = None, limit: int | None = None
) -> int:
    """Judge the store's trajectories (of ``run_id``, or all) and append the verdicts; returns rows
    added.  Pairwise pairs consecutive samples of a task (0 vs 1, 2 vs 3, ...), so each trajectory is
    in at most one pairwise row.  Already judged trajectories (either side of a pair) are skipped."""
    if mode not in ("pointwise", "pairwise"):
        raise RldataError(f"judge mode must be pointwise or pairwise, got {mode!r}")
    verifier = POINTWISE if mode == "pointwise" else PAIRWISE
    conds = ["t.traj_id NOT IN (SELECT traj_id FROM verifications WHERE verifier = $v)"]
    if run_id:
        conds.append("t.run_id = $run")
    q = (
        "SELECT t.traj_id, t.task_id, t.sample_idx, t.completion, k.prompt, k.answer FROM trajectories t "
        f"JOIN tasks k USING (task_id) WHERE {' AND '.join(conds)} ORDER BY t.task_id, t.sample_idx, t.traj_id"
    )
    params = {"v": verifier, **({"run": run_id} if run_id else {})}
    df = store.sql(q, params=params).pl()
    if mode == "pointwise":
        if limit is not None:
            df = df.head(limit)
        if df.is_empty():
            return 0
        verdicts = judge.pointwise(
            df["prompt"].to_list(), df["completion"].fill_null("").to_list(), df["answer"].to_list()
        )
        rows = judge_rows(
            verdicts,
            df["traj_id"].to_list(),
            df["task_id"].to_list(),
            verifier=verifier,
            version=judge.version,
        )
    else:
        done = store.sql("SELECT detail FROM verifications WHERE verifier = $v", params={"v": verifier}).pl()
        paired = {t for d in done["detail"] for t in (json.loads(d).get("b"),) if t}
        df = df.filter(~pl.col("traj_id").is_in(list(paired)))  # B sides of earlier pairs are judged too
        pairs = []
        for (_task,), g in df.group_by("task_id", maintain_order=True):
            recs = g.to_dicts()
            pairs += [(recs[i], recs[i + 1]) for i in range(0, len(recs) - 1, 2)]
        if limit is not None:
            pairs = pairs[:limit]
        if not pairs:
            return 0
        verdicts = judge.pairwise(
            [a["prompt"] for a, _ in pairs],
            [a["completion"] or "" for a, _ in pairs],
            [b["completion"] or "" for _, b in pairs],
        )
        rows = judge_rows(
            verdicts,
            [a["traj_id"] for a, _ in pairs],
            [a["task_id"] for a, _ in pairs],
            verifier=verifier,
            version=judge.version,
            others=[b["traj_id"] for _, b in pairs],
        )
    return store.append("verifications", rows, dedupe=True)


def _pairs_pairwise(store) -> pl.DataFrame:
    q = (
        "SELECT v.task_id, v.verifier_version AS judge, v.passed, v.detail, k.prompt FROM verifications v "
        "JOIN tasks k USING (task_id) WHERE v.verifier = $v AND v.layer = 'judge' AND v.passed IS NOT NULL"
    )
    df = store.sql(q, params={"v": PAIRWISE}).pl()
    if df.is_empty():
        return pl.DataFrame()
    det = [json.loads(d) for d in df["detail"]]
    win = [d["a"] if p else d["b"] for d, p in zip(det, df["passed"])]
    lose = [d["b"] if p else d["a"] for d, p in zip(det, df["passed"])]
    return df.select("task_id", "prompt", "judge").with_columns(
        pl.Series("chosen_traj_id", win),
        pl.Series("rejected_traj_id", lose),
        pl.Series("rationale", [d.get("rationale", "") for d in det]),
        pl.lit("pairwise").alias("kind"),
    )


def _pairs_pointwise(store) -> pl.DataFrame:
    q = (
        "SELECT v.task_id, v.traj_id, v.verifier_version AS judge, v.passed, v.detail, k.prompt "
        "FROM verifications v JOIN tasks k USING (task_id) "
        "WHERE v.verifier = $v AND v.layer = 'judge' AND v.passed IS NOT NULL ORDER BY v.task_id, v.traj_id"
    )
    df = store.sql(q, params={"v": POINTWISE}).pl()
    rows = []
    for _key, g in df.group_by(["task_id", "judge"], maintain_order=True):
        pos, neg = g.filter(pl.col("passed")), g.filter(~pl.col("passed"))
        for p, n in zip(pos.iter_rows(named=True), neg.iter_rows(named=True)):  # each sample in one pair
            rows.append(
                {
                    "task_id": p["task_id"],
                    "prompt": p["prompt"],
                    "judge": p["judge"],
                    "chosen_traj_id": p["traj_id"],
                    "rejected_traj_id": n["traj_id"],
                    "rationale": json.loads(p["detail"]).get("rationale", ""),
                    "kind": "pointwise",
                }
            )
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def export_preferences(store, out: str | Path, *, kinds: Sequence[str] = ("pairwise", "pointwise")) -> int:
    """Write (prompt, chosen, rejected) pairs from the judge rows to ``out`` (.jsonl or .parquet)."""
    out = Path(out)
    if out.suffix not in (".jsonl", ".parquet"):
        raise RldataError(f"{out}: preference export writes .jsonl or .parquet")
    frames = [
        f
        for f in (
            (_pairs_pairwise(store) if "pairwise" in kinds else pl.DataFrame()),
            (_pairs_pointwise(store) if "pointwise" in kinds else pl.DataFrame()),
        )
        if f.height
    ]
    cols = [
        "task_id",
        "prompt",
        "chosen",
        "rejected",
        "chosen_traj_id",
        "rejected_traj_id",
        "kind",
        "judge",
        "rationale",
    ]
    if frames:
        pairs = pl.concat(frames, how="vertical_relaxed")
        comp = store.sql("SELECT traj_id, completion FROM trajectories").pl()
        pairs = (
            pairs.join(
                comp.rename({"traj_id": "chosen_traj_id", "completion": "chosen"}), on="chosen_traj_id"
            )
            .join(
                comp.rename({"traj_id": "rejected_traj_id", "completion": "rejected"}), on="rejected_traj_id"
            )
            .select(cols)
        )
    else:
        pairs = pl.DataFrame({c: [] for c in cols}, schema={c: pl.String for c in cols})
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        pairs.write_parquet(out)
    else:
        pairs.write_ndjson(out)
    return pairs.height
