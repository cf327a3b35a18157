"""Sampling parameters: one frozen value shared by `rldata sample`, the trainer and the ledger.

``params_hash`` identifies the distribution being sampled (temperature, top-p, max tokens, ...)
and excludes the seed, so pass rates from runs with different seeds but the same distribution
pool together in the ledger, while a different temperature never mixes with them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property

from rldata.errors import ConfigError

__all__ = ["SamplingSpec"]


@dataclass(frozen=True)
class SamplingSpec:
    n: int = 16  # samples per prompt (vLLM shares the prompt's prefill across them)
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = -1  # -1 = off
    max_tokens: int = 16  # completion length cap
    stop: tuple[str, ...] = field(default=())  # stop strings, kept out of the completion
    seed: int | None = 0  # base seed; per-request seeds derive from it and the task id

    def __post_init__(self):
        if self.n < 1:
            raise ConfigError(f"n must be >= 1, got {self.n}", field="n")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}", field="temperature")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}", field="top_p")
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {self.max_tokens}", field="max_tokens")
        object.__setattr__(self, "stop", tuple(self.stop))

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
        """Hash of everything but the seed (see module docstring)."""
        blob = json.dumps(self.to_dict(with_seed=False), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def request_seed(self, task_id: str) -> int | None:
        """A per-task seed: reproducible for (seed, task) whatever the batching or engine count."""
        if self.seed is None:
            return None
        h = hashlib.sha256(f"{self.seed}:{task_id}".encode()).digest()
        return int.from_bytes(h[:4], "little") & 0x7FFFFFFF
