"""Training configuration: one frozen dataclass, loaded from YAML (or built in code).

Each field is documented once, beside it.  ``__post_init__`` checks ranges and the derived sizes
(the rollout batch must split evenly over learners and micro-batches); ``from_yaml`` turns any
problem into an ``InputError`` naming the file and the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rldata.errors import ConfigError as _RldataConfigError
from rldata.errors import InputError
from rldata.params import SamplingSpec, check_sampling
from rldata.trainer.advantages import ESTIMATORS
from rldata.trainer.loss import AGGREGATIONS

__all__ = ["MODES", "ConfigError", "TrainConfig"]

MODES = ("sync", "async")
# SamplingSpec field -> the TrainConfig field that sets it, for the rollout and for the eval
_ROLLOUT_PARAMS = {
    "n": "group_size",
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_tokens",
    "seed": "seed",
}
_EVAL_PARAMS = {"n": "eval_n", "temperature": "eval_temperature", "max_tokens": "max_tokens", "seed": "seed"}


class ConfigError(_RldataConfigError):
    """A bad config value; ``field`` names it (an RldataError, and a ValueError for older callers)."""

    def __init__(self, field_name: str, reason: str):
        self.reason = reason
        super().__init__(f"{field_name}: {reason}", field=field_name)


def _need(ok: bool, name: str, reason: str) -> None:
    if not ok:
        raise ConfigError(name, reason)


# Annotation (as a string, see `from __future__`) -> accepted Python types.  YAML gives ints for
# whole floats ("lr: 1" is fine) but a bool is never taken for a number.
_TYPES = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "tuple[float, float]": (tuple, list),
    "dict[str, Any]": (dict,),
}


def _check_types(cfg) -> None:
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        ann = f.type.replace(" | None", "")
        if value is None and f.type.endswith("| None"):
            continue
        ok = isinstance(value, _TYPES[ann]) and not (ann in ("int", "float") and isinstance(value, bool))
        _need(ok, f.name, f"expected {ann}, got {type(value).__name__} {value!r}")


@dataclass(frozen=True)
class TrainConfig:
    # --- model and run -----------------------------------------------------------------------
    model: str | None = None  # HF model dir; None = the embedded tiny model
    run_id: str | None = None  # None = a fresh id per run
    output_dir: str = "runs"  # checkpoints go to <output_dir>/<run_id>/checkpoints/step-NNNNNN
    seed: int = 0  # seeds python, numpy, torch and the engines' per-request seeds
    # --- schedule -----------------------------------------------------------------------------
    steps: int = 100  # optimizer steps (= policy versions after the initial one)
    prompts_per_step: int = 16  # prompts (groups) in one rollout batch
    group_size: int = 8  # G: samples per prompt
    # --- rollout ------------------------------------------------------------------------------
    max_tokens: int = 16  # completion length cap
    temperature: float = 1.0  # sampling temperature (the learner scores tokens at the same one)
    top_p: float = 1.0  # must be 1: the engine's nucleus log-probs and the learner's softmax would disagree
    num_engines: int = 1  # vLLM engine actors
    dynamic_sampling: bool = True  # drop groups whose rewards are all equal, and replace them
    max_resample: int = 3  # extra generation rounds per step to replace dropped groups
    # --- loss ---------------------------------------------------------------------------------
    advantage: str = "grpo"  # "grpo": (r - mean) / (std + eps); "drgrpo": r - mean
    adv_eps: float = 1e-6  # eps in the grpo denominator
    eps_low: float = 0.2  # ratio clipped below at 1 - eps_low
    eps_high: float = 0.28  # ratio clipped above at 1 + eps_high (DAPO clip-higher)
    kl_coef: float = 0.0  # weight of the k3 KL to the initial model; 0 = no reference model loaded
    agg: str = (
        "token"  # "token": mean over all tokens of the batch (DAPO); "sequence": mean of per-sequence means
    )
    behav_weight_cap: float = (
        2.0  # C: behaviour weight min(pi_prox / pi_behav, C) (truncated importance sampling)
    )
    behav_weight: bool = True  # False: no behaviour correction, weight 1 (ablation only)
    # --- sync / async -------------------------------------------------------------------------
    mode: str = "sync"  # "sync": generate, then update; "async": engines generate ahead while learners update
    max_staleness: int = 1  # async: K, generation runs at most K policy versions ahead of the learners
    # --- optimizer and learners ---------------------------------------------------------------
    lr: float = 1e-5  # AdamW learning rate (constant)
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.999)
    max_grad_norm: float = 1.0  # gradient clipping; 0 = off
    num_learners: int = 1  # W: DDP ranks, one Ray actor each (gloo on CPU, NCCL on GPU)
    micro_batch: int = 16  # sequences per forward/backward on one learner (gradients accumulate)
    cpus_per_learner: float = 1.0  # CPU cores reserved per learner in its placement group bundle
    # torch threads per learner on CPU; 0 = cpus_per_learner, except in sync mode, where the engines
    # wait during the update: there the learners share all of their node's cores
    learner_threads: int = 0
    # --- checkpoints, curriculum, eval --------------------------------------------------------
    checkpoint_every: int = 0  # save every K steps; 0 = only at the end (always saved at the end)
    curriculum: str | None = None  # buckets.yaml; None = tasks drawn uniformly
    env: str | None = None  # environment (NAME or NAME@VERSION) every task runs in; None = each task's own
    reward_spec: str | None = (
        None  # YAML reward spec (judge mix, length penalty, z-scores); None = verifier 1/0
    )
    eval_every: int = 0  # held-out eval every K steps; 0 = only before the first and after the last step
    eval_selection: str | None = None  # selection (in the store) holding the held-out tasks; None = no eval
    eval_size: int = 200  # held-out tasks per eval (the first ones, in task_id order)
    eval_n: int = 16  # samples per held-out task
    eval_temperature: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # free-form notes, stored with the run

    def __post_init__(self):
        _check_types(self)
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))
        for name in (
            "steps",
            "prompts_per_step",
            "num_engines",
            "num_learners",
            "micro_batch",
            "max_tokens",
            "eval_size",
            "eval_n",
        ):
            _need(int(getattr(self, name)) >= 1, name, f"must be >= 1, got {getattr(self, name)}")
        _need(
            self.group_size >= 2,
            "group_size",
            f"must be >= 2 (advantages are group-relative), got {self.group_size}",
        )
        for name in (
            "max_resample",
            "checkpoint_every",
            "eval_every",
            "kl_coef",
            "weight_decay",
            "max_grad_norm",
            "adv_eps",
        ):
            _need(getattr(self, name) >= 0, name, f"must be >= 0, got {getattr(self, name)}")
        _need(self.lr > 0, "lr", f"must be > 0, got {self.lr}")
        _need(0 <= self.eps_low < 1, "eps_low", f"must be in [0, 1), got {self.eps_low}")
        _need(self.eps_high >= 0, "eps_high", f"must be >= 0, got {self.eps_high}")
        _need(
            self.temperature > 0,
            "temperature",
            f"must be > 0 for policy-gradient training, got {self.temperature}",
        )
        _need(self.eval_temperature >= 0, "eval_temperature", f"must be >= 0, got {self.eval_temperature}")
        # The engine's log-probs under top_p < 1 are renormalised over the nucleus while the learner
        # scores the full softmax: every behaviour weight would be biased.  Refused rather than guessed.
        _need(
            self.top_p == 1.0,
            "top_p",
            f"must be 1.0 for training (the learner scores the full softmax, "
            f"the engine's log-probs under top_p < 1 would be nucleus-renormalised), got {self.top_p}",
        )
        _need(self.behav_weight_cap >= 1, "behav_weight_cap", f"must be >= 1, got {self.behav_weight_cap}")
        _need(self.mode in MODES, "mode", f"must be one of {', '.join(MODES)}, got {self.mode!r}")
        _need(
            self.max_staleness >= 1,
            "max_staleness",
            f"must be >= 1 (0 is sync mode), got {self.max_staleness}",
        )
        _need(self.cpus_per_learner > 0, "cpus_per_learner", f"must be > 0, got {self.cpus_per_learner}")
        _need(self.learner_threads >= 0, "learner_threads", f"must be >= 0, got {self.learner_threads}")
        _need(
            len(self.adam_betas) == 2 and all(0 <= b < 1 for b in self.adam_betas),
            "adam_betas",
            f"must be two numbers in [0, 1), got {list(self.adam_betas)}",
        )
        _need(self.agg in AGGREGATIONS, "agg", f"must be one of {', '.join(AGGREGATIONS)}, got {self.agg!r}")
        _need(
            self.advantage in ESTIMATORS,
            "advantage",
            f"must be one of {', '.join(ESTIMATORS)}, got {self.advantage!r}",
        )
        # The rollout's and the eval's sampling parameters, under the bounds `rldata sample` has
        for names in (_ROLLOUT_PARAMS, _EVAL_PARAMS):
            try:
                check_sampling(**{k: getattr(self, v) for k, v in names.items()})
            except _RldataConfigError as e:
                raise ConfigError(names[e.field], str(e).removeprefix(f"{e.field} ")) from None
        # Derived sizes: equal shards per learner, and whole micro-batches within a shard.
        _need(
            self.batch_size % self.num_learners == 0,
            "num_learners",
            f"prompts_per_step * group_size = {self.batch_size} must divide evenly over "
            f"{self.num_learners} learners",
        )
        _need(
            self.per_learner_batch % self.micro_batch == 0,
            "micro_batch",
            f"each learner's {self.per_learner_batch} sequences must split into micro-batches of "
            f"{self.micro_batch}",
        )

    # --- derived ------------------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        """Sequences per optimizer step (global, over all learners)."""
        return self.prompts_per_step * self.group_size

    @property
    def staleness_bound(self) -> int:
        """How many policy versions generation may run ahead of the learners: 0 in sync mode."""
        return self.max_staleness if self.mode == "async" else 0

    @property
    def per_learner_batch(self) -> int:
        return self.batch_size // self.num_learners

    @property
    def grad_accum_steps(self) -> int:
        return self.per_learner_batch // self.micro_batch

    def sampling_spec(self) -> SamplingSpec:
        """The rollout sampling params (n = G), as the engine and the ledger see them."""
        return SamplingSpec(
            n=self.group_size,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            seed=self.seed,
        )

    def eval_spec(self) -> SamplingSpec:
        return SamplingSpec(
            n=self.eval_n, temperature=self.eval_temperature, max_tokens=self.max_tokens, seed=self.seed
        )

    # --- I/O ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["adam_betas"] = list(self.adam_betas)
        return d

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(unknown[0], f"unknown field; known fields: {', '.join(sorted(known))}")
        return cls(**data)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides) -> TrainConfig:
        """Load a YAML mapping of fields; ``overrides`` (e.g. from CLI options) win over the file."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except OSError as e:
            raise InputError(str(path), None, f"cannot read: {e.strerror or e}") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark is not None else None
            raise InputError(str(path), where, f"not valid YAML: {getattr(e, 'problem', e)}") from None
        if not isinstance(data, dict):
            raise InputError(
                str(path), None, f"expected a mapping of config fields, got {type(data).__name__}"
            )
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.from_dict(data)
        except ConfigError as e:
            raise InputError(str(path), None, e.reason, field=e.field) from None
