"""``rldata judge run``: judge stored trajectories with the generative judge and append its verdicts.

The judge itself (prompts, strict parsing, swap consistency) is :mod:`rldata.rewards.judge`; this
module is the store job around it: which trajectories to judge, how pairwise pairs are formed, and
the ``verifications`` rows it appends.
"""

from __future__ import annotations

import json

import polars as pl

from rldata.configs.fields import at_least, config, nested, one_of, param, validate
from rldata.configs.sampling import EngineConfig, SamplingSpec
from rldata.errors import RldataError
from rldata.rewards.judge import PAIRWISE, POINTWISE, Judge, judge_rows

__all__ = ["JUDGE_MODES", "JudgeConfig", "judge_store"]

JUDGE_MODES = ("pointwise", "pairwise")


@config
class JudgeConfig:
    """Which trajectories `rldata judge run` judges, how, and on which engine."""

    mode: str = param(
        "pointwise", check=one_of(*JUDGE_MODES), help="pointwise (VERDICT: 1/0) or pairwise (VERDICT: A/B)."
    )
    # the judge's engine (its model, context, dtype...): one, in this process
    engine: EngineConfig = nested(
        EngineConfig, defaults={"max_model_len": 4096}, only=("model", "max_model_len", "vllm")
    )
    # one greedy verdict per prompt: the judge's output budget is its setting
    sampling: SamplingSpec = nested(
        SamplingSpec, defaults={"n": 1, "temperature": 0.0, "max_tokens": 256}, only=("max_tokens",)
    )
    run_id: str | None = param(None, help="Only trajectories of this run.")
    limit: int | None = param(None, check=at_least(1), help="Judge at most this many trajectories (pairs).")
    swap: bool = param(True, help="Pairwise: judge each pair in both orders (--no-swap: one order only).")

    def __post_init__(self):
        validate(self)


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
