"""Rollouts: plain completions and multi-turn episodes against the engine actors, their
verification and their trajectory columns; shared by ``rldata sample`` and the trainer."""

from rldata.rollout.bind import EnvBinding, bind_envs, env_binding
from rldata.rollout.episodes import EpisodeStats, Rollout, generate, run_episodes, turn_seed
from rldata.rollout.plain import plain_mode, plain_rollouts, submit_plain
from rldata.rollout.render import (
    DEFAULT_TEMPLATE,
    Renderer,
    plain_messages,
    renderer_for,
    resolve_chat_template,
)
from rldata.rollout.score import episode_columns, unverifiable, verify_rollouts

__all__ = [
    "DEFAULT_TEMPLATE",
    "EnvBinding",
    "EpisodeStats",
    "Renderer",
    "Rollout",
    "bind_envs",
    "env_binding",
    "episode_columns",
    "generate",
    "plain_messages",
    "plain_mode",
    "plain_rollouts",
    "renderer_for",
    "resolve_chat_template",
    "run_episodes",
    "submit_plain",
    "turn_seed",
    "unverifiable",
    "verify_rollouts",
]
