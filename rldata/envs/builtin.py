"""Importing this module registers the built-in environments (:data:`rldata.envs.base.REGISTRY` does,
on its first lookup): add a built-in environment's module here."""

from rldata.envs import (  # noqa: F401
    calculator,
    code_feedback,
    openenv,
    openenv_mcp,
    reasoning_gym,
    single_turn,
    verifiers_env,
)
