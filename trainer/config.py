"""Training configuration: one frozen dataclass, loaded from YAML (or built in code).

Each field is documented once, beside it.  ``__post_init__`` checks ranges and the derived sizes
(the rollout batch must split evenly over learners and micro-batches); ``from_yaml`` turns any
problem into an ``InputError`` naming the file and the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rldata.configs.fields import at_least, build, load, nested, one_of, param, sql_predicate, validate
from rldata.configs.sampling import EvalConfig, SamplingSpec, VerifyConfig, VllmConfig, check_sampling
from rldata.curriculum import DEFAULT_TRAIN_STEPS
from rldata.curriculum.live import LiveConfig
from rldata.errors import ConfigError
from rldata.names import check_name
from rldata.trainer.advantages import ESTIMATORS

__all__ = [
    "AGGREGATIONS",
    "LORA_DEFAULTS",
    "MODES",
    "PRECISIONS",
    "STRATEGIES",
    "ConfigError",
    "TrainCommand",
    "TrainConfig",
    "TrainRun",
    "check_lora",
]  # ConfigError: rldata.errors'

MODES = ("sync", "async")
# agg values (trainer/loss.py applies them); declared here so that reading a config (every CLI
# command does) does not import torch
AGGREGATIONS = ("token", "sequence")
STRATEGIES = ("ddp", "fsdp")
PRECISIONS = ("fp32", "bf16")
# lora: {...} keys and their defaults; "all-linear" is peft's every linear layer but the output head
LORA_DEFAULTS = {"r": 8, "alpha": 16.0, "dropout": 0.0, "target_modules": "all-linear"}
# SamplingSpec field -> the TrainConfig field that sets it, for the rollout (the eval: EvalConfig.spec)
_ROLLOUT_PARAMS = {
    "n": "group_size",
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_tokens",
    "seed": "seed",
}


def _need(ok: bool, name: str, reason: str) -> None:
    if not ok:
        raise ConfigError.of(name, reason)


def _positive(v):
    return None if v is None or v > 0 else f"must be > 0, got {v}"


_ONE = at_least(1)
_ZERO = at_least(0)


def check_lora(spec: dict) -> dict:
    """The lora mapping with defaults filled in; a ConfigError naming ``lora.<key>`` otherwise."""
    unknown = sorted(set(spec) - set(LORA_DEFAULTS))
    _need(
        not unknown,
        f"lora.{unknown[0] if unknown else ''}",
        f"unknown key; known: {', '.join(LORA_DEFAULTS)}",
    )
    out = {**LORA_DEFAULTS, **spec}
    r, alpha, dropout, targets = out["r"], out["alpha"], out["dropout"], out["target_modules"]
    _need(
        isinstance(r, int) and not isinstance(r, bool) and r >= 1, "lora.r", f"must be an int >= 1, got {r!r}"
    )
    ok = isinstance(alpha, int | float) and not isinstance(alpha, bool) and alpha > 0
    _need(ok, "lora.alpha", f"must be a number > 0, got {alpha!r}")
    ok = isinstance(dropout, int | float) and not isinstance(dropout, bool) and 0 <= dropout < 1
    _need(ok, "lora.dropout", f"must be in [0, 1), got {dropout!r}")
    ok = targets == "all-linear" or (
        isinstance(targets, list | tuple) and targets and all(isinstance(t, str) and t for t in targets)
    )
    _need(ok, "lora.target_modules", f'must be "all-linear" or a list of module names, got {targets!r}')
    return {
        "r": r,
        "alpha": float(alpha),
        "dropout": float(dropout),
        "target_modules": targets if isinstance(targets, str) else list(targets),
    }


def _parse_lora(text: str | None) -> dict | None:
    """``--lora r=16,alpha=32,target_modules=q_proj+v_proj`` -> the lora mapping (checked later)."""
    if text is None:
        return None
    out: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, value = item.partition("=")
        _need(bool(sep), "lora", f"expected key=value items separated by ',', got {item!r}")
        if key == "target_modules":
            out[key] = value if value == "all-linear" else value.split("+")
        else:
            try:
                out[key] = int(value) if key == "r" else float(value)
            except ValueError:
                raise ConfigError.of(f"lora.{key}", f"not a number: {value!r}") from None
    return out


def _format_lora(spec: dict | None) -> str | None:
    if spec is None:
        return None
    t = spec.get("target_modules", "all-linear")
    return ",".join(
        f"{k}={'+'.join(v) if k == 'target_modules' and not isinstance(v, str) else v}"
        for k, v in {**spec, "target_modules": t}.items()
    )


@dataclass(frozen=True)
class TrainConfig:
    """Training configuration (GRPO, rollouts, learners, checkpoints, eval)."""

    # --- model and run -----------------------------------------------------------------------
    model: str | None = param(
        None,
        help="Starting model: a Hugging Face model directory, or a hub id (ORG/NAME) found in the local "
        "Hugging Face cache (docs/model.md). Default: the bundled tiny-arith model.",
    )
    run_id: str | None = param(
        None,
        help="Run id (default: a fresh one); 1-128 letters, digits, '.', '_', ':', '-' (a directory name).",
    )
    output_dir: str = param(
        "runs", flag="--out", help="Output dir; checkpoints go to OUT/RUN_ID/checkpoints/step-NNNNNN."
    )
    seed: int = param(
        0, help="Run seed: python, numpy, torch, the sampler and the engines' per-request seeds."
    )
    # --- schedule -----------------------------------------------------------------------------
    steps: int = param(
        DEFAULT_TRAIN_STEPS, check=_ONE, help="Optimizer steps (= policy versions after the initial one)."
    )
    prompts_per_step: int = param(16, check=_ONE, help="Prompts (groups) in one rollout batch.")
    group_size: int = param(8, help="G: samples per prompt (>= 2: advantages are group-relative).")
    # --- rollout ------------------------------------------------------------------------------
    max_tokens: int = param(16, check=_ONE, help="Completion length cap, in tokens.")
    temperature: float = param(
        1.0, help="Sampling temperature (> 0; the learner scores tokens at the same one)."
    )
    top_p: float = param(
        1.0, help="Must be 1: the engine's nucleus log-probs and the learner's softmax would disagree."
    )
    engines: int = param(1, check=_ONE, deprecated=("num_engines",), help="K: vLLM engine actors.")
    dynamic_sampling: bool = param(True, help="Drop groups whose rewards are all equal, and replace them.")
    max_resample: int = param(
        3, check=_ZERO, help="Extra generation rounds per step to replace dropped groups."
    )
    # --- loss ---------------------------------------------------------------------------------
    advantage: str = param("grpo", help="grpo: (r - mean) / (std + eps); drgrpo: r - mean.")
    adv_eps: float = param(1e-6, check=_ZERO, help="eps in the grpo denominator.")
    eps_low: float = param(0.2, help="The ratio is clipped below at 1 - eps_low, in [0, 1).")
    eps_high: float = param(
        0.28, check=_ZERO, help="The ratio is clipped above at 1 + eps_high (DAPO clip-higher)."
    )
    kl_coef: float = param(
        0.0, check=_ZERO, help="Weight of the k3 KL to the initial model; 0 = no reference model loaded."
    )
    agg: str = param(
        "token", help="token: mean over all tokens of the batch (DAPO); sequence: mean of per-sequence means."
    )
    behav_weight_cap: float = param(
        2.0, help="C: behaviour weight min(pi_prox / pi_behav, C) (truncated importance sampling), >= 1."
    )
    behav_weight: bool = param(True, help="Off: no behaviour correction, weight 1 (ablation only).")
    # --- sync / async -------------------------------------------------------------------------
    mode: str = param(
        "sync",
        flag="--async/--sync",
        cli_type=bool,
        to_field=lambda on: "async" if on else "sync",
        from_field=lambda mode: mode == "async",
        help="Async: engines generate the next batches while the learners update (mode: sync or async).",
    )
    max_staleness: int = param(
        1, help="Async: generation runs at most K policy versions ahead of the learners (>= 1)."
    )
    # --- optimizer and learners ---------------------------------------------------------------
    lr: float = param(1e-5, help="AdamW learning rate (constant), > 0.")
    weight_decay: float = param(0.0, check=_ZERO, help="AdamW weight decay.")
    adam_betas: tuple[float, float] = param(
        (0.9, 0.999), cli=False, help="AdamW betas, two numbers in [0, 1)."
    )
    max_grad_norm: float = param(1.0, check=_ZERO, help="Gradient clipping; 0 = off.")
    num_learners: int = param(
        1, flag="--learners", check=_ONE, help="W: DDP learner actors (gloo on CPU, NCCL on GPU)."
    )
    micro_batch: int = param(
        16, check=_ONE, help="Sequences per forward/backward on one learner (gradients accumulate)."
    )
    cpus_per_learner: float = param(
        1.0, check=_positive, help="CPU cores reserved per learner in its placement group bundle."
    )
    # 0: cpus_per_learner, except in sync mode, where the engines wait during the update and the
    # learners share all of their node's cores
    learner_threads: int = param(
        0,
        check=_ZERO,
        help="Torch threads per learner on CPU; 0 = cpus_per_learner (sync mode: the node's cores).",
    )
    # --- sharding, precision, memory (docs/trainer.md "Real-size models") ---------------------
    strategy: str = param(
        "ddp",
        check=one_of(*STRATEGIES),
        help="ddp: full replicas; fsdp: FSDP2 fully_shard per decoder layer and the root.",
    )
    mixed_precision: str = param(
        "fp32",
        check=one_of(*PRECISIONS),
        help="bf16: bf16 compute; fp32 master weights, optimizer state and gradient reduction.",
    )
    gradient_checkpointing: bool = param(
        False, help="Recompute each decoder layer's activations in the backward (less memory)."
    )
    micro_batch_tokens: int = param(
        0,
        check=_ZERO,
        help="Micro-batches by a token budget (rows x padded length, similar lengths grouped); 0 = micro_batch rows.",
    )
    cpu_offload: bool = param(
        False, help="strategy fsdp on GPU: FSDP2 CPUOffloadPolicy (a no-op on CPU learners)."
    )
    lora: dict[str, Any] | None = param(
        None,
        cli_type=str,
        to_field=_parse_lora,
        from_field=_format_lora,
        help="Train LoRA adapters only (peft): r=8,alpha=16,dropout=0,target_modules=all-linear "
        "(modules joined by '+'; a mapping in a config file).",
    )
    # --- checkpoints, curriculum, eval --------------------------------------------------------
    checkpoint_every: int = param(
        0, check=_ZERO, help="Checkpoint every K steps; 0 = only at the end (always saved at the end)."
    )
    curriculum: str | None = param(
        None,
        short="-c",
        help="buckets.yaml (rldata stratify). Without it, tasks are drawn uniformly from the tasks table.",
    )
    env: str | None = param(
        None,
        help="Train every task as an episode in this environment (NAME or NAME@VERSION). "
        "Default: each task's own environment, else single-turn.",
    )
    reward_spec: str | None = param(
        None,
        help="YAML reward spec (judge mix, length penalty, per-domain z-scores). Default: the verifier's 1/0.",
    )
    # the verifier of the rollouts and the evals (default: each domain's) and its per-check timeout
    verify: VerifyConfig = nested(VerifyConfig)
    # the held-out evaluation: --eval-n, eval: {n: ..} in a file (the flat eval_n: deprecated)
    eval: EvalConfig = nested(EvalConfig, prefixed=True)
    live: LiveConfig = nested(LiveConfig, help="Live pass-rate posteriors and the live:* samplers.")
    extra: dict[str, Any] = param(
        default_factory=dict, compare=False, cli=False, help="Free-form notes, stored with the run."
    )

    def __post_init__(self):
        if self.strategy == "fsdp" and isinstance(self.num_learners, int) and self.num_learners < 1:
            raise ConfigError.of(
                "num_learners",
                f"strategy: fsdp shards the model over the learners; num_learners must be >= 1, got {self.num_learners}",
            )
        validate(self, error=ConfigError)  # each field's type and its own check, declared with it
        if self.run_id is not None:  # names a directory under output_dir: no separators, no ".."
            try:
                check_name(self.run_id, field="run_id")
            except ConfigError as e:
                raise ConfigError.of("run_id", str(e).partition(": ")[2]) from None
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))
        _need(
            self.group_size >= 2,
            "group_size",
            f"must be >= 2 (advantages are group-relative), got {self.group_size}",
        )
        _need(self.lr > 0, "lr", f"must be > 0, got {self.lr}")
        _need(0 <= self.eps_low < 1, "eps_low", f"must be in [0, 1), got {self.eps_low}")
        _need(
            self.temperature > 0,
            "temperature",
            f"must be > 0 for policy-gradient training, got {self.temperature}",
        )
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
        # The rollout's sampling parameters, under the bounds `rldata sample` has (EvalConfig checks
        # the eval's n and temperature; max_tokens and seed are these)
        try:
            check_sampling(**{k: getattr(self, v) for k, v in _ROLLOUT_PARAMS.items()})
        except ConfigError as e:
            field = _ROLLOUT_PARAMS[e.field]
            raise ConfigError.of(field, str(e).removeprefix(f"{e.field} ")) from None
        # Derived sizes: equal shards per learner, and whole micro-batches within a shard.
        _need(
            self.batch_size % self.num_learners == 0,
            "num_learners",
            f"prompts_per_step * group_size = {self.batch_size} must divide evenly over "
            f"{self.num_learners} learners",
        )
        _need(
            not self.cpu_offload or self.strategy == "fsdp",
            "cpu_offload",
            "needs strategy: fsdp (FSDP2's offload policy), got strategy: ddp",
        )
        if self.lora is not None:
            object.__setattr__(self, "lora", check_lora(self.lora))
            # No second model is kept under LoRA: the KL term would have no reference to score.
            _need(
                self.kl_coef == 0,
                "lora",
                f"lora with kl_coef > 0 needs a reference model, and LoRA runs keep none: set kl_coef: 0 "
                f"(got kl_coef: {self.kl_coef})",
            )
        _need(
            self.micro_batch_tokens > 0 or self.per_learner_batch % self.micro_batch == 0,
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
        """The held-out eval's sampling params (eval.n, eval.temperature; the run's cap and seed)."""
        return self.eval.spec(max_tokens=self.max_tokens, seed=self.seed)

    # --- I/O ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["adam_betas"] = list(self.adam_betas)
        return d

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    @property
    def num_engines(self) -> int:
        """Deprecated name of ``engines`` (one release)."""
        return self.engines

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Fields by name, nested (``eval: {n: 8}``) or flat; an old name warns and still works
        (``num_engines`` for ``engines``, the flat ``eval_n`` of a previous release's stored config)."""
        return build(cls, data)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides) -> TrainConfig:
        """Load a YAML (or TOML) mapping of fields; ``overrides`` (e.g. from CLI options) win over the
        file, None meaning not given.  A bad value in the file is an InputError naming file and field."""
        return load(cls, Path(path), **{k: v for k, v in overrides.items() if v is not None})


@dataclass(frozen=True)
class TrainRun:
    """How a run of a TrainConfig starts: which tasks, Ray, the engines' context, tracking."""

    where: str | None = param(
        None, check=sql_predicate("where"), help="Without --curriculum: SQL predicate over tasks to train on."
    )
    sampler: str | None = param(
        None,
        help="Override the curriculum's sampler: mixture, uniform, live:band, live:learnability or live:skip "
        "(live pass-rate posteriors, set by the --live-* options).",
    )
    uniform: bool = param(False, help="Shorthand for --sampler uniform (the baseline).")
    resume: bool = param(
        False, help="Continue RUN_ID (default: the newest run in OUT) from its newest checkpoint."
    )
    address: str | None = param(None, help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray).")
    max_model_len: int | None = param(
        None, check=at_least(2), help="Engine context length (prompt + completion). Default: the model's."
    )
    vllm: VllmConfig = nested(VllmConfig)  # the rollout and eval engines' dtype, parallelism, KV cache
    tag: str | None = param(
        None,
        help="A name shared by runs of one setting (e.g. its seeds): rldata report --group-by tag draws "
        "their mean and spread.",
    )
    tracker: str = param(
        "none",
        help="Also stream every metric to tensorboard, wandb (offline) or mlflow (file store); none: the "
        "store only.",
    )
    tracker_dir: str | None = param(None, help="Where the tracker writes (default: OUT/RUN_ID/TRACKER).")
    include_flagged: bool = param(
        False,
        help="Also train on tasks flagged by rldata decontaminate, lint (errors) or dedup --near (default: "
        "left out when the run starts; the run's arguments record how many).",
    )

    def __post_init__(self):
        validate(self)
        if self.uniform and self.sampler not in (None, "uniform"):
            raise ConfigError(f"uniform contradicts sampler {self.sampler!r}", field="uniform")


@dataclass(frozen=True)
class TrainCommand:
    """`rldata train`: a TrainConfig and how its run starts (a file may hold both, flat or nested)."""

    train: TrainConfig = nested(TrainConfig)
    run: TrainRun = nested(TrainRun)

    def __post_init__(self):
        if self.train.curriculum is not None and self.run.where:
            raise ConfigError(
                "where picks the tasks of a run without a curriculum; the curriculum's selection picks them",
                field="where",
            )
