"""Environments: what a model talks to during an episode (see docs/environments.md)."""

from rldata.envs.base import (
    REGISTRY,
    BaseEnv,
    Environment,
    EnvSpec,
    Message,
    StepResult,
    env_key,
    make_env,
    register,
    resolve,
)
from rldata.envs.guard import Guarded, guarded_close, guarded_reset, guarded_step
from rldata.envs.tools import Tool, ToolEnv, tool

__all__ = [
    "REGISTRY",
    "BaseEnv",
    "EnvSpec",
    "Environment",
    "Guarded",
    "Message",
    "StepResult",
    "Tool",
    "ToolEnv",
    "env_key",
    "guarded_close",
    "guarded_reset",
    "guarded_step",
    "make_env",
    "register",
    "resolve",
    "tool",
]
