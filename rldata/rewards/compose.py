"""Reward composition from a YAML spec, per domain, with every component kept for logging.

For each sample of a batch, with its domain's settings::

    r_vr'    = zscore_domain(r_vr)     if normalize else r_vr       # verifiable reward (0/1, score)
    r_genrm' = zscore_domain(r_genrm)  if normalize else r_genrm    # generative judge score
    total    = alpha * r_vr' + (1 - alpha) * r_genrm' - length_penalty(length)

The z-score is taken per domain over the batch (population std; a domain whose values are all
equal gets 0), before mixing, so a domain with a dense reward cannot drown one with a sparse reward.

Errors count as wrong.  A verifier error (``r_vr`` None: crash, timeout) scores 0, and a judge
error 0, BEFORE the z-score, and the length penalty applies as to any sample; so an error never
scores above a wrong answer of the same length in any spec, and a policy gains nothing by making
the verifier time out.  (Leaving errors out of the group statistics and the loss was rejected: a
masked sample escapes the negative advantage a wrong one gets, which is itself a reward hack.)
``vr_error`` / ``rm_error`` flag them, and the metrics count them (``reward/n_error/<domain>``).
``r_mix`` is the reward before the length penalty; dynamic sampling keeps or drops a group on its
spread (correctness), never on the penalty's.

YAML::

    default: {alpha: 1.0, normalize: false}
    domains:
      math: {alpha: 1.0, normalize: true,
             length_penalty: {kind: overlong, max_tokens: 512, buffer: 128, coef: 1.0}}
      code: {alpha: 0.8, normalize: true}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from rldata.errors import ConfigError, RldataError
from rldata.rewards.judge import POINTWISE
from rldata.verify.base import Verdict

__all__ = [
    "COMPONENTS",
    "DomainReward",
    "LengthPenalty",
    "RewardSpec",
    "RewardTally",
    "compose_rewards",
    "load_reward_spec",
    "metrics_rows",
    "reward_metrics",
    "rewards_for_run",
    "score_samples",
]

COMPONENTS = ("r_vr", "r_genrm", "r_vr_norm", "r_genrm_norm", "length_penalty", "total")
_KINDS = ("none", "overlong", "linear")


@dataclass(frozen=True)
class LengthPenalty:
    """``overlong``: DAPO's soft overlong penalty, 0 up to ``max_tokens - buffer``, rising linearly to
    ``coef`` at ``max_tokens`` and ``coef`` beyond; ``linear``: ``coef * length / max_tokens``."""

    kind: str = "none"
    max_tokens: int = 1024
    buffer: int = 256
    coef: float = 1.0

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ConfigError(
                f"length_penalty.kind must be one of {_KINDS}, got {self.kind!r}", field="length_penalty"
            )
        if self.max_tokens <= 0:
            raise ConfigError(
                f"length_penalty.max_tokens must be > 0, got {self.max_tokens}", field="length_penalty"
            )
        if not 0 < self.buffer <= self.max_tokens:
            raise ConfigError(
                f"length_penalty.buffer must be in (0, max_tokens], got {self.buffer}", field="length_penalty"
            )
        if self.coef < 0:
            raise ConfigError(f"length_penalty.coef must be >= 0, got {self.coef}", field="length_penalty")

    def expr(self, length: pl.Expr) -> pl.Expr:
        if self.kind == "none":
            return pl.lit(0.0)
        if self.kind == "linear":
            return self.coef * length.cast(pl.Float64) / self.max_tokens
        start = self.max_tokens - self.buffer
        return self.coef * ((length.cast(pl.Float64) - start) / self.buffer).clip(0.0, 1.0)


@dataclass(frozen=True)
class DomainReward:
    alpha: float = 1.0  # weight of the verifiable reward; 1 - alpha goes to the judge
    normalize: bool = False  # z-score each component within the domain's part of the batch
    length_penalty: LengthPenalty = field(default_factory=LengthPenalty)
    eps: float = 1e-6  # added to the std in the z-score

    def __post_init__(self):
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"alpha must be in [0, 1], got {self.alpha}", field="alpha")
        if self.eps <= 0:
            raise ConfigError(f"eps must be > 0, got {self.eps}", field="eps")


@dataclass(frozen=True)
class RewardSpec:
    default: DomainReward = field(default_factory=DomainReward)
    domains: Mapping[str, DomainReward] = field(default_factory=dict)

    def for_domain(self, domain: str) -> DomainReward:
        return self.domains.get(domain, self.default)

    def check_max_tokens(self, max_tokens: int, *, where: str = "reward spec") -> RewardSpec:
        """Validate every length penalty against the run's completion cap ``max_tokens``.

        A penalty whose ``max_tokens`` exceeds the run's never reaches its full value (an
        ``overlong`` one whose ramp starts past the cap never fires at all): the spec was written
        for another run, so it is an error, not a silent no-op."""
        named = [("default", self.default), *((f"domains.{d}", v) for d, v in self.domains.items())]
        for key, dom in named:
            lp = dom.length_penalty
            if lp.kind != "none" and lp.max_tokens > max_tokens:
                raise RldataError(
                    f"{where}: {key}.length_penalty.max_tokens={lp.max_tokens} exceeds the run's max_tokens="
                    f"{max_tokens} (completions never get that long): set it to at most {max_tokens}"
                )
        return self

    def needs_judge(self, domains) -> bool:
        """Whether any of ``domains`` mixes in the judge's score (alpha < 1)."""
        return any(self.for_domain(d).alpha < 1.0 for d in domains)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None, *, where: str = "reward spec") -> RewardSpec:
        obj = dict(obj or {})
        unknown = set(obj) - {"default", "domains"}
        if unknown:
            raise RldataError(
                f"{where}: unknown key(s) {', '.join(sorted(unknown))} (expected default, domains)"
            )
        try:
            default = _domain(obj.get("default"), f"{where}: default")
            domains = {
                str(d): _domain(v, f"{where}: domains.{d}") for d, v in (obj.get("domains") or {}).items()
            }
        except TypeError as e:
            raise RldataError(f"{where}: {e}") from None
        return cls(default=default, domains=domains)


def _domain(obj: Any, where: str) -> DomainReward:
    if obj is None:
        return DomainReward()
    if not isinstance(obj, Mapping):
        raise RldataError(f"{where}: expected a mapping, got {type(obj).__name__}")
    kw = dict(obj)
    lp = kw.pop("length_penalty", None)
    try:
        if lp is not None:
            if not isinstance(lp, Mapping):
                raise RldataError(f"{where}.length_penalty: expected a mapping")
            kw["length_penalty"] = LengthPenalty(**lp)
        return DomainReward(**kw)
    except (TypeError, ValueError) as e:
        raise RldataError(f"{where}: {e}") from None


def load_reward_spec(path: str | Path) -> RewardSpec:
    """Read a YAML reward spec (see the module docstring); errors name the file and the key."""
    import yaml

    from rldata.configs import yaml_safe  # start-up: loads yaml

    path = Path(path)
    try:
        obj = yaml_safe.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise RldataError(f"{path}: cannot read reward spec: {str(e).splitlines()[0]}") from None
    if obj is not None and not isinstance(obj, Mapping):
        raise RldataError(f"{path}: a reward spec is a mapping with 'default' and 'domains'")
    return RewardSpec.from_dict(obj, where=str(path))


def _zscore(col: str, eps: float) -> pl.Expr:
    x = pl.col(col)
    mean = x.mean().over("domain")
    std = x.std(ddof=0).over("domain")
    return pl.when(std > 0).then((x - mean) / (std + eps)).otherwise(pl.when(x.is_not_null()).then(0.0))


def compose_rewards(batch: pl.DataFrame | Mapping[str, Any], spec: RewardSpec) -> pl.DataFrame:
    """Add the reward components to a batch with columns ``domain``, ``r_vr`` and optionally
    ``r_genrm`` and ``length`` (completion tokens).  Returns the batch (same row order) with
    ``alpha``, ``r_vr_norm``, ``r_genrm_norm``, ``length_penalty`` and ``total`` added."""
    df = batch if isinstance(batch, pl.DataFrame) else pl.DataFrame(dict(batch))
    if "domain" not in df.columns or "r_vr" not in df.columns:
        raise RldataError(f"compose_rewards needs columns 'domain' and 'r_vr'; got {df.columns}")
    judged = "r_genrm" in df.columns  # all-null judge scores (every verdict an error) are allowed
    if not judged:
        df = df.with_columns(pl.lit(None, dtype=pl.Float64).alias("r_genrm"))
    if "length" not in df.columns:
        df = df.with_columns(pl.lit(0, dtype=pl.Int64).alias("length"))
    df = df.with_columns(pl.col("r_vr", "r_genrm").cast(pl.Float64), pl.col("length").cast(pl.Int64))
    # errors count as wrong (0) before the z-score: see the module docstring
    df = df.with_columns(
        pl.col("r_vr").is_null().alias("vr_error"),
        (pl.col("r_genrm").is_null() & judged).alias("rm_error"),
    ).with_columns(pl.col("r_vr").fill_null(0.0), *([pl.col("r_genrm").fill_null(0.0)] if judged else []))
    parts = []
    for (dom,), part in df.with_row_index("_row").group_by("domain", maintain_order=True):
        cfg = spec.for_domain(dom)
        if cfg.alpha < 1.0 and not judged and part.height:
            raise RldataError(f"domain {dom!r}: alpha={cfg.alpha} needs r_genrm (judge scores), none given")
        norm = {
            c: (_zscore(c, cfg.eps) if cfg.normalize else pl.col(c)).alias(f"{c}_norm")
            for c in ("r_vr", "r_genrm")
        }
        part = part.with_columns(
            norm["r_vr"],
            norm["r_genrm"],
            pl.lit(cfg.alpha).alias("alpha"),
            cfg.length_penalty.expr(pl.col("length")).alias("length_penalty"),
        )
        w_vr = pl.when(pl.col("r_vr_norm").is_not_null()).then(pl.col("alpha")).otherwise(0.0)
        w_rm = pl.when(pl.col("r_genrm_norm").is_not_null()).then(1.0 - pl.col("alpha")).otherwise(0.0)
        mixed = (w_vr * pl.col("r_vr_norm").fill_null(0.0) + w_rm * pl.col("r_genrm_norm").fill_null(0.0)) / (
            w_vr + w_rm
        )
        part = part.with_columns(pl.when((w_vr + w_rm) > 0).then(mixed).otherwise(None).alias("r_mix"))
        part = part.with_columns((pl.col("r_mix") - pl.col("length_penalty")).alias("total"))
        parts.append(part)
    if not parts:
        return df.with_columns(
            *(
                pl.lit(None, dtype=pl.Float64).alias(c)
                for c in ("alpha", "r_vr_norm", "r_genrm_norm", "length_penalty", "r_mix", "total")
            )
        )
    return pl.concat(parts, how="vertical").sort("_row").drop("_row")


def score_samples(
    domains: list[str],
    passed: list[bool | None],
    lengths: list[int],
    spec: RewardSpec,
    *,
    judge: Sequence[Verdict] | None = None,
    no_answer: Sequence[bool] | None = None,
) -> pl.DataFrame:
    """Compose the rewards of one batch of samples (the online path of ``rldata sample`` and the
    trainer).  ``passed`` is the verifier outcome (None = error); ``judge`` the pointwise judge's
    verdicts (an error verdict gives no score), given when the spec needs them; ``no_answer`` marks
    the parse failures (:func:`rldata.verify.base.no_answer`), counted in the metrics."""
    batch = {
        "domain": pl.Series(domains, dtype=pl.String),
        "r_vr": pl.Series([None if p is None else float(p) for p in passed], dtype=pl.Float64),
        "length": pl.Series(lengths, dtype=pl.Int64),
    }
    if judge is not None:
        batch["r_genrm"] = pl.Series(
            [v.score if v.passed is not None else None for v in judge], dtype=pl.Float64
        )
    if no_answer is not None:
        batch["no_answer"] = pl.Series([bool(x) for x in no_answer], dtype=pl.Boolean)
    return compose_rewards(pl.DataFrame(batch), spec)


class RewardTally:
    """Running per-domain sums of every component, so a long job can log means without keeping the
    composed rows (``rldata sample`` streams its batches)."""

    def __init__(self):
        self._sum: dict[tuple[str, str], float] = {}
        self._cnt: dict[tuple[str, str], int] = {}
        self._rows: dict[str, int] = {}
        self._errors: dict[str, int] = {}
        self._rm_errors: dict[str, int] = {}
        self._no_answer: dict[str, int] = {}

    def add(self, composed: pl.DataFrame) -> RewardTally:
        for (dom,), part in composed.group_by("domain", maintain_order=True):
            for c in COMPONENTS:
                col = part[c].drop_nulls()
                if len(col):
                    self._sum[dom, c] = self._sum.get((dom, c), 0.0) + float(col.sum())
                    self._cnt[dom, c] = self._cnt.get((dom, c), 0) + len(col)
            self._rows[dom] = self._rows.get(dom, 0) + part.height
            self._errors[dom] = self._errors.get(dom, 0) + int(part["vr_error"].sum())
            self._rm_errors[dom] = self._rm_errors.get(dom, 0) + int(part["rm_error"].sum())
            if "no_answer" in part.columns:
                self._no_answer[dom] = self._no_answer.get(dom, 0) + int(part["no_answer"].sum())
        return self

    def metrics(self) -> dict[str, float]:
        """Per-domain means of every component (``reward/<component>/<domain>``), counts, and the
        overall mean total, ready for the ``metrics`` table."""
        out: dict[str, float] = {}
        for dom in self._rows:
            for c in COMPONENTS:
                if self._cnt.get((dom, c)):
                    out[f"reward/{c}/{dom}"] = self._sum[dom, c] / self._cnt[dom, c]
            out[f"reward/n/{dom}"] = float(self._rows[dom])
            out[f"reward/n_error/{dom}"] = float(self._errors[dom])  # verifier errors, scored as wrong
            out[f"reward/n_judge_error/{dom}"] = float(self._rm_errors[dom])
            if dom in self._no_answer:  # parse failures: completions with no extractable answer
                out[f"parse_fail/{dom}"] = self._no_answer[dom] / self._rows[dom]
                out[f"parse_fail/n/{dom}"] = float(self._no_answer[dom])
        n = sum(self._cnt.get((d, "total"), 0) for d in self._rows)
        if n:
            out["reward/total"] = sum(self._sum.get((d, "total"), 0.0) for d in self._rows) / n
        return out


def reward_metrics(composed: pl.DataFrame) -> dict[str, float]:
    """:meth:`RewardTally.metrics` of one composed batch."""
    return RewardTally().add(composed).metrics()


def rewards_for_run(store, run_id: str, spec: RewardSpec, *, verifier: str | None = None) -> pl.DataFrame:
    """Compose the rewards of a stored run's trajectories.

    ``r_vr`` is 1.0 when every non-judge verification row of the trajectory passed (all layers of a
    layered verifier), 0.0 when one failed, None (scored as wrong, flagged ``vr_error``) when one
    errored or none exists; ``verifier``
    restricts it to one verifier.  ``r_genrm`` is the pointwise judge's score (``genrm`` rows), None
    for judge errors.  ``length`` is ``completion_tokens``.
    """
    only = "AND verifier = $verifier" if verifier else ""
    q = f"""
        WITH vr AS (
            SELECT traj_id, CASE WHEN bool_or(passed IS NULL) THEN NULL
                                 WHEN bool_and(passed) THEN 1.0 ELSE 0.0 END AS r_vr
            FROM verifications WHERE layer <> 'judge' {only} GROUP BY traj_id),
        rm AS (
            SELECT traj_id, max(CASE WHEN passed IS NOT NULL THEN score END) AS r_genrm
            FROM verifications WHERE verifier = $judge AND layer = 'judge' GROUP BY traj_id)
        SELECT t.traj_id, t.task_id, k.domain, vr.r_vr, rm.r_genrm, t.completion_tokens AS length
        FROM trajectories t JOIN tasks k USING (task_id)
        LEFT JOIN vr USING (traj_id) LEFT JOIN rm USING (traj_id)
        WHERE t.run_id = $run ORDER BY t.task_id, t.sample_idx, t.traj_id"""
    params = {"run": run_id, "judge": POINTWISE, **({"verifier": verifier} if verifier else {})}
    df = store.sql(q, params=params).pl()
    if df.is_empty():
        raise RldataError(f"run {run_id!r} has no trajectories")
    return compose_rewards(df, spec)


def metrics_rows(run_id: str, step: int, metrics: Mapping[str, float]) -> list[dict]:
    """``metrics`` table rows for :func:`reward_metrics` output."""
    return [{"run_id": run_id, "step": step, "name": k, "value": float(v)} for k, v in metrics.items()]
