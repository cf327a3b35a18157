"""The parameters of `rldata predict`, declared once (rldata.configs.fields): the CLI, the API and the docs
derive from these fields."""

from __future__ import annotations

from dataclasses import dataclass

from rldata.configs.fields import at_least, finite_between, param, sql_predicate, validate, validator
from rldata.errors import ConfigError
from rldata.stats import Band

__all__ = ["DEFAULT_FEATURES", "PredictConfig"]

DEFAULT_FEATURES = "text,meta,prefill,logprob"


def _families(v):
    from rldata.predict.features import parse_families  # start-up: loads scipy

    try:
        parse_families(v)
    except ConfigError as e:
        return str(e).removeprefix("features: ")
    return None


def _band(v):
    try:
        Band.parse(v)
    except ConfigError as e:
        return str(e)
    return None


@dataclass(frozen=True)
class PredictConfig:
    """Which policy `rldata predict` predicts for, from which ledger rows, with which features."""

    model: str | None = param(
        None,
        help="The policy: a Hugging Face model directory or a hub id in the local cache (default: the bundled "
        "tiny-arith model). Its ledger rows are what the fit learns from; its prefill gives the prefill "
        "and logprob features.",
    )
    where: str | None = param(
        None,
        check=sql_predicate("where"),
        help="SQL predicate over tasks: the tasks to predict (default: all).",
    )
    params_hash: str | None = param(
        None, help="Ledger slice to learn from: sampling params hash (default: the only one)."
    )
    verifier_key: str | None = param(
        None, help="Ledger slice: verifier name@version (default: the only one)."
    )
    run: str | None = param(
        None,
        help="Predict for this training run's policy at --version: seen tasks from the run's live posterior "
        "(its groups, discounted by policy version), unseen ones from the cross-task prior.",
    )
    version: int | None = param(
        None, check=at_least(0), help="With --run: the policy version (default: its last)."
    )
    features: str = param(
        DEFAULT_FEATURES,
        check=_families,
        help="Feature families of the cross-task prior, comma-separated: text (hashed character and word "
        "n-grams), meta (source, category, metadata, length), prefill (the policy's mean-pooled prefill "
        "hidden state), logprob (the prompt's log-probability under the policy).",
    )
    seed: int = param(0, check=at_least(0), help="Seed of the folds and the backtest split.")
    folds: int = param(
        5, check=at_least(2), help="Cross-validation folds (the held-out fits measure calibration)."
    )
    level: float = param(0.9, check=finite_between(0.5, 0.999), help="Level of the interval p_low..p_high.")
    band: str = param("0.1,0.9", check=_band, help="The band whose in/out the backtest's AUC scores, LO,HI.")
    backtest: bool = param(
        False,
        help="Backtest instead: fit on part of the tasks and score the held-out ones, and score a fit at a "
        "training run's policy version on its later versions; against baselines (global mean, per-source "
        "mean, prompt length). Prints and stores the metrics (runs, metrics).",
    )
    holdout: float = param(
        0.2, check=finite_between(0.05, 0.95), help="--backtest: share of the tasks held out."
    )
    refit: bool = param(False, help="Fit again even when predictions of the same fit and cutoff are stored.")
    dry_run: bool = param(False, help="Predict and print, write nothing.")
    batch_size: int = param(32, check=at_least(1), help="Prompts per forward pass of the prefill features.")

    def __post_init__(self):
        validate(self)

    @validator
    def predict_rules(self):
        if self.version is not None and self.run is None:
            raise ConfigError("version: give --run too (a training run's policy version)", field="version")
