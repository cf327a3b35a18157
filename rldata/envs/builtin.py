"""Importing this module registers the built-in environments (:data:`rldata.envs.base.REGISTRY` does,
on its first lookup): add a built-in environment's module here."""

from rldata.envs import calculator, code_feedback, openenv, reasoning_gym, single_turn  # noqa: F401
