"""Plain tasks (no environment): one engine request per task with ``n=N``, its samples sharing the
prompt's prefill; the one way ``rldata sample``, the trainer's rollouts and evaluations send them.

The job's ``chat_template`` (resolved by :func:`rldata.rollout.render.resolve_chat_template`) says
how the prompt goes: ``off``, the task's prompt as text, tokenized by the engine as every release
did; ``on``, the task's messages (or its prompt as a user turn) through the model's chat template
with the generation prompt, sent as token ids (the template writes its own bos and specials, so
nothing is added on top), and kept on each rollout as ``prompt_ids`` for the learner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rldata.configs.sampling import SamplingSpec
from rldata.errors import ConfigError
from rldata.rollout.episodes import Rollout
from rldata.rollout.render import Renderer

__all__ = ["plain_mode", "plain_rollouts", "submit_plain"]


def plain_mode(spec: SamplingSpec, renderer: Renderer | None) -> str:
    """``on`` or ``off`` for this call: a job's spec is resolved already; ``auto`` from a direct caller
    is resolved with ``renderer`` (raw without one)."""
    mode = spec.chat_template
    if mode == "auto":
        mode = "on" if renderer is not None and renderer.templates_plain else "off"
    if mode == "on" and renderer is None:
        raise ConfigError(
            "chat_template on needs the model's renderer (rldata.rollout.Renderer.for_model)",
            field="chat_template",
        )
    return mode


def submit_plain(
    engine,
    tasks: Sequence[Mapping[str, Any]],
    spec: SamplingSpec,
    seeds: Sequence[int | None],
    renderer: Renderer | None = None,
) -> tuple[Any, list[list[int]] | None]:
    """Queue one generate call of ``spec.n`` samples per task on an engine actor; returns (the Ray
    reference, the templated prompt ids or None for raw text).  Hand both to :func:`plain_rollouts`."""
    if plain_mode(spec, renderer) == "off":
        ref = engine.generate.remote([t["prompt"] for t in tasks], spec, list(seeds), True)
        return ref, None
    ids = [renderer.plain(t) for t in tasks]  # type: ignore[union-attr]
    ref = engine.generate_ids.remote(ids, spec, list(seeds), None, True, [spec.n] * len(ids))
    return ref, ids


def plain_rollouts(out: list, ids: list[list[int]] | None, n: int) -> list[list[Rollout]]:
    """The engine's answer to :func:`submit_plain` as ``n`` rollouts per task, in task order."""
    if ids is None:  # Engine.generate: one list of samples per prompt
        return [[Rollout.from_sample(s) for s in g] for g in out]
    # Engine.generate_ids: flat, n per prompt
    return [
        [Rollout.from_sample(s, prompt_ids=p) for s in out[i * n : (i + 1) * n]] for i, p in enumerate(ids)
    ]
