"""Training configuration: one frozen dataclass, loaded from YAML (or built in code).

Each field is declared once, beside its help and its check.  The shared parts are nested, not
restated: the rollout's sampling is a :class:`~rldata.configs.sampling.SamplingSpec` (``rollout``,
its ``n`` the group size G, under the :func:`on_policy` rule), the engines an
:class:`~rldata.configs.sampling.EngineConfig` (``engine``) and the held-out evaluation an
:class:`~rldata.configs.sampling.EvalConfig` whose sampling follows the rollout's.  The rules
between fields are :meth:`TrainConfig.train_rules` (the batch must split evenly over learners and
micro-batches...); ``from_yaml`` turns any problem into an ``InputError`` naming the file and the field.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rldata.configs.fields import (
    at_least,
    build,
    config,
    load,
    nested,
    one_of,
    param,
    sql_predicate,
    validate,
    validator,
)
from rldata.configs.sampling import ENVIRONMENTS, EngineConfig, EvalConfig, SamplingSpec, VerifyConfig
from rldata.curriculum import DEFAULT_TRAIN_STEPS
from rldata.curriculum.live import LiveConfig
from rldata.curriculum.sampler import SAMPLERS
from rldata.errors import ConfigError, RldataError
from rldata.names import check_name
from rldata.runs.trackers import TRACKERS, check_tracker
from rldata.trainer.advantages import ESTIMATORS

__all__ = [
    "AGGREGATIONS",
    "LORA_DEFAULTS",
    "MODES",
    "ON_POLICY_FREE",
    "PRECISIONS",
    "STRATEGIES",
    "ConfigError",
    "TrainCommand",
    "TrainConfig",
    "TrainRun",
    "check_lora",
    "on_policy",
]  # ConfigError: rldata.errors'

MODES = ("sync", "async")
# agg values (trainer/loss.py applies them); declared here so that reading a config (every CLI
# command does) does not import torch
AGGREGATIONS = ("token", "sequence")
STRATEGIES = ("ddp", "fsdp")
PRECISIONS = ("fp32", "bf16")
# lora: {...} keys and their defaults; "all-linear" is peft's every linear layer but the output head
LORA_DEFAULTS = {"r": 8, "alpha": 16.0, "dropout": 0.0, "target_modules": "all-linear"}
# the micro-batch when none is given: this many sequences, or a learner's whole share when smaller
MICRO_BATCH = 16


def _need(ok: bool, name: str, reason: str) -> None:
    if not ok:
        raise ConfigError.of(name, reason)


def _positive(v):
    return None if v is None or v > 0 else f"must be > 0, got {v}"


def _name(field: str):
    def check(v):
        try:
            check_name(v, field=field) if v is not None else None
        except ConfigError as e:
            return str(e).partition(": ")[2]
        return None

    return check


def _tracker(v):
    try:
        check_tracker(v)  # an unknown tracker or a missing extra fails before anything starts
    except RldataError as e:
        return str(e)
    return None


def _betas(v):
    ok = len(v) == 2 and all(isinstance(b, int | float) and 0 <= b < 1 for b in v)
    return None if ok else f"must be two numbers in [0, 1), got {list(v)}"


# What a rollout's sampling may set: how many samples, how hot, how long, where they stop, the seed,
# and how a plain prompt is shown (chat_template: the prompt, not the distribution over completions).
# Every other field shapes the distribution (a nucleus, top-k, min-p, penalties...) and must stay
# at its default (off): the learner scores the full softmax at the rollout's temperature, and the
# engine's log-probs under a truncated or reshaped distribution would not be its.
ON_POLICY_FREE = ("n", "temperature", "max_tokens", "stop", "seed", "chat_template")


@validator
def on_policy(spec: SamplingSpec) -> None:
    """The rollout's sampling rules of policy-gradient training (``rollout``, where TrainConfig
    nests its SamplingSpec): advantages are relative within a group of at least 2; the learner
    scores the full softmax at the same temperature, so the engine must sample from it (every field
    but :data:`ON_POLICY_FREE` at its default, off: a sampling parameter added later is refused
    here until it is known to keep the distribution); the seed seeds the run."""
    if spec.n < 2:
        raise ConfigError.of("n", f"must be >= 2 (advantages are group-relative), got {spec.n}")
    if spec.temperature <= 0:
        raise ConfigError.of(
            "temperature", f"must be > 0 for policy-gradient training, got {spec.temperature}"
        )
    off = type(spec)()
    for f in dataclasses.fields(spec):
        value, default = getattr(spec, f.name), getattr(off, f.name)
        if f.name not in ON_POLICY_FREE and value != default:
            raise ConfigError.of(
                f.name,
                f"must be {default!r} for training (the learner scores the full softmax; the engine's "
                f"log-probs under {f.name} would be renormalised over a truncated nucleus), got {value!r}",
            )
    if spec.seed is None:
        raise ConfigError.of("seed", "must be a number for training (it seeds the run)")


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


@config
class TrainConfig:
    """Training configuration (GRPO, rollouts, learners, checkpoints, eval)."""

    # --- model, engines and run ---------------------------------------------------------------
    engine: EngineConfig = nested(
        EngineConfig,
        defaults={"engines": 1},
        deprecated={"engines": ("num_engines",)},
        help="The starting model and the vLLM engines the rollouts and evaluations run on.",
    )
    run_id: str | None = param(
        None,
        check=_name("run_id"),  # names a directory under output_dir: no separators, no ".."
        help="Run id (default: a fresh one); 1-128 letters, digits, '.', '_', ':', '-' (a directory name).",
    )
    output_dir: str = param(
        "runs", flag="--out", help="Output dir; checkpoints go to OUT/RUN_ID/checkpoints/step-NNNNNN."
    )
    # --- schedule -----------------------------------------------------------------------------
    steps: int = param(
        DEFAULT_TRAIN_STEPS, check=_ONE, help="Optimizer steps (= policy versions after the initial one)."
    )
    prompts_per_step: int = param(16, check=_ONE, help="Prompts (groups) in one rollout batch.")
    # --- rollout ------------------------------------------------------------------------------
    # n is G, the samples per prompt (its old name group_size warns); the seed also seeds python,
    # numpy, torch and the sampler
    rollout: SamplingSpec = nested(
        SamplingSpec,
        defaults={"n": 8},
        deprecated={"n": ("group_size", "--group-size")},
        rule=on_policy,
        help="The rollouts' sampling: n = G samples per prompt; the seed is the run's.",
    )
    dynamic_sampling: bool = param(True, help="Drop groups whose rewards are all equal, and replace them.")
    max_resample: int = param(
        3, check=_ZERO, help="Extra generation rounds per step to replace dropped groups."
    )
    # --- loss ---------------------------------------------------------------------------------
    advantage: str = param(
        "grpo",
        choices=ESTIMATORS,
        help="Advantage estimator (grpo: (r - mean) / (std + eps); drgrpo: r - mean).",
    )
    adv_eps: float = param(1e-6, check=_ZERO, help="eps in the grpo denominator.")
    eps_low: float = param(
        0.2,
        check=lambda v: None if 0 <= v < 1 else f"must be in [0, 1), got {v}",
        help="The ratio is clipped below at 1 - eps_low, in [0, 1).",
    )
    eps_high: float = param(
        0.28, check=_ZERO, help="The ratio is clipped above at 1 + eps_high (DAPO clip-higher)."
    )
    kl_coef: float = param(
        0.0, check=_ZERO, help="Weight of the k3 KL to the initial model; 0 = no reference model loaded."
    )
    agg: str = param(
        "token",
        check=one_of(*AGGREGATIONS),
        help="token: mean over all tokens of the batch (DAPO); sequence: mean of per-sequence means.",
    )
    behav_weight_cap: float = param(
        2.0,
        check=at_least(1),
        help="C: behaviour weight min(pi_prox / pi_behav, C) (truncated importance sampling), >= 1.",
    )
    behav_weight: bool = param(True, help="Off: no behaviour correction, weight 1 (ablation only).")
    # --- sync / async -------------------------------------------------------------------------
    mode: str = param(
        "sync",
        flag="--async/--sync",
        cli_type=bool,
        to_field=lambda on: "async" if on else "sync",
        from_field=lambda mode: mode == "async",
        check=one_of(*MODES),
        help="Async: engines generate the next batches while the learners update (mode: sync or async).",
    )
    max_staleness: int = param(
        1,
        check=lambda v: None if v >= 1 else f"must be >= 1 (0 is sync mode), got {v}",
        help="Async: generation runs at most K policy versions ahead of the learners (>= 1).",
    )
    # --- optimizer and learners ---------------------------------------------------------------
    lr: float = param(1e-5, check=_positive, help="AdamW learning rate (constant), > 0.")
    weight_decay: float = param(0.0, check=_ZERO, help="AdamW weight decay.")
    adam_betas: tuple[float, float] = param(
        (0.9, 0.999), cli=False, check=_betas, help="AdamW betas, two numbers in [0, 1)."
    )
    max_grad_norm: float = param(1.0, check=_ZERO, help="Gradient clipping; 0 = off.")
    num_learners: int = param(
        1, flag="--learners", check=_ONE, help="W: DDP learner actors (gloo on CPU, NCCL on GPU)."
    )
    micro_batch: int | None = param(
        None,
        check=_ONE,
        help=f"Sequences per forward/backward on one learner (gradients accumulate). Default: "
        f"{MICRO_BATCH}, or a learner's whole share of the batch when smaller.",
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
        choices=ENVIRONMENTS,
        strict=False,  # an environment registered in the store is found when the run binds its tasks
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
    live: LiveConfig = nested(
        LiveConfig, help="Live pass-rate posteriors, the live:* and gaussian samplers, re-profiling."
    )
    extra: dict[str, Any] = param(
        default_factory=dict, compare=False, cli=False, help="Free-form notes, stored with the run."
    )

    def __post_init__(self):
        if isinstance(self.adam_betas, list):
            object.__setattr__(self, "adam_betas", tuple(self.adam_betas))
        validate(self)  # each field's type and its own check, declared with it; then train_rules
        if self.lora is not None:  # the mapping completed with its defaults
            object.__setattr__(self, "lora", check_lora(self.lora))

    @validator
    def train_rules(self) -> None:
        """The rules between fields: engines to train on, the batch's split over learners and
        micro-batches, what LoRA and CPU offload need."""
        _need(self.engine.engines is not None, "engines", "training needs a number of engines, got None")
        # Derived sizes: equal shards per learner, and whole micro-batches within a shard.
        _need(
            self.batch_size % self.num_learners == 0,
            "num_learners",
            f"prompts_per_step * n = {self.batch_size} must divide evenly over {self.num_learners} learners",
        )
        _need(
            not self.cpu_offload or self.strategy == "fsdp",
            "cpu_offload",
            "needs strategy: fsdp (FSDP2's offload policy), got strategy: ddp",
        )
        # No second model is kept under LoRA: the KL term would have no reference to score.
        _need(
            self.lora is None or self.kl_coef == 0,
            "lora",
            f"lora with kl_coef > 0 needs a reference model, and LoRA runs keep none: set kl_coef: 0 "
            f"(got kl_coef: {self.kl_coef})",
        )
        share, micro = self.per_learner_batch, self.micro_batch_rows
        if self.micro_batch_tokens == 0 and share % micro:
            fits = [d for d in range(min(micro, share), 0, -1) if share % d == 0][:3]
            raise ConfigError.of(
                "micro_batch",
                f"each learner's {share} sequences must split into micro-batches of {micro}: set "
                f"micro_batch to a divisor of {share} ({', '.join(map(str, fits))}), or leave it unset",
            )

    # --- derived ------------------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        """Sequences per optimizer step (global, over all learners)."""
        return self.prompts_per_step * self.rollout.n

    @property
    def staleness_bound(self) -> int:
        """How many policy versions generation may run ahead of the learners: 0 in sync mode."""
        return self.max_staleness if self.mode == "async" else 0

    @property
    def per_learner_batch(self) -> int:
        return self.batch_size // self.num_learners

    @property
    def micro_batch_rows(self) -> int:
        """Sequences per micro-batch: ``micro_batch``, or by default 16 capped at a learner's share."""
        if self.micro_batch is not None:
            return self.micro_batch
        return max(1, min(MICRO_BATCH, self.per_learner_batch))

    @property
    def grad_accum_steps(self) -> int:
        return self.per_learner_batch // self.micro_batch_rows

    def eval_spec(self) -> SamplingSpec:
        """The held-out evaluation's sampling: its own n and temperature, the rest the rollout's
        (chat_template included: an evaluation sees prompts as the rollouts do)."""
        return self.eval.spec(self.rollout)

    # --- I/O ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["adam_betas"] = list(self.adam_betas)
        return d

    def replace(self, **changes) -> TrainConfig:
        """A copy with ``changes``, by field or by a section's field (``n=4`` changes ``rollout.n``)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Fields by name, nested (``rollout: {n: 8}``, ``eval: {n: 8}``) or flat; an old name warns
        and still works (``group_size`` for ``n``, ``num_engines`` for ``engines``, the flat ``eval_n``
        of a previous release's stored config)."""
        return build(cls, data)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides) -> TrainConfig:
        """Load a YAML (or TOML) mapping of fields; ``overrides`` (e.g. from CLI options) win over the
        file, None meaning not given.  A bad value in the file is an InputError naming file and field."""
        return load(cls, Path(path), **{k: v for k, v in overrides.items() if v is not None})


@config
class TrainRun:
    """How a run of a TrainConfig starts: which tasks, Ray, tracking."""

    where: str | None = param(
        None, check=sql_predicate("where"), help="Without --curriculum: SQL predicate over tasks to train on."
    )
    selection: str | None = param(
        None,
        help="Without --curriculum: train on this selection's kept tasks (rldata filter --name), drawn uniformly.",
    )
    sampler: str | None = param(
        None,
        choices=SAMPLERS,
        help="Override the curriculum's sampler (live:* samplers: live pass-rate posteriors, set by the "
        "--live-* options; gaussian: a Gaussian over pass rate whose mean moves from easy to hard, per "
        "domain, set by --gauss-* and --reprofile-*).",
    )
    uniform: bool = param(False, help="Shorthand for --sampler uniform (the baseline).")
    resume: bool = param(
        False, help="Continue RUN_ID (default: the newest run in OUT) from its newest checkpoint."
    )
    address: str | None = param(None, help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray).")
    tag: str | None = param(
        None,
        check=_name("tag"),
        help="A name shared by runs of one setting (e.g. its seeds): rldata report --group-by tag draws "
        "their mean and spread.",
    )
    tracker: str = param(
        "none",
        choices=TRACKERS,
        check=_tracker,
        help="Also stream every metric to a tracker (tensorboard, wandb offline, mlflow file store); none: "
        "the store only.",
    )
    tracker_dir: str | None = param(None, help="Where the tracker writes (default: OUT/RUN_ID/TRACKER).")
    include_flagged: bool = param(
        False,
        help="Also train on tasks flagged by rldata decontaminate, lint (errors) or dedup --near (default: "
        "left out when the run starts; the run's arguments record how many).",
    )

    def __post_init__(self):
        validate(self)

    @validator
    def run_rules(self) -> None:
        if self.uniform and self.sampler not in (None, "uniform"):
            raise ConfigError(f"uniform contradicts sampler {self.sampler!r}", field="uniform")

    @property
    def sampler_name(self) -> str | None:
        """The sampler that overrides the curriculum's (``uniform``: the baseline), if any."""
        return "uniform" if self.uniform else self.sampler


@config
class TrainCommand:
    """`rldata train`: a TrainConfig and how its run starts (a file may hold both, flat or nested)."""

    train: TrainConfig = nested(TrainConfig)
    run: TrainRun = nested(TrainRun)

    def __post_init__(self):
        validate(self)

    @validator
    def command_rules(self) -> None:
        if self.train.curriculum is not None and self.run.where:
            raise ConfigError(
                "where picks the tasks of a run without a curriculum; the curriculum's selection picks them",
                field="where",
            )
        if self.run.selection is not None and (self.train.curriculum is not None or self.run.where):
            raise ConfigError(
                "selection picks the tasks of a run without a curriculum: give one of curriculum, "
                "selection and where",
                field="selection",
            )
