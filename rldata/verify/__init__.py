"""Verifiers: math (math-verify), exact match, regex, code (sandboxed tests), reasoning-gym; one registry."""

from rldata.verify.base import REGISTRY, Verdict, Verifier, for_domain, get_verifier, register

__all__ = ["Verdict", "Verifier", "register", "get_verifier", "for_domain", "REGISTRY"]

_BUILTIN = ("rldata.verify.math", "rldata.verify.exact", "rldata.verify.code", "rldata.verify.reasoning_gym")


def _load_builtin() -> None:
    """Import the built-in verifier modules (each registers itself); missing ones are skipped."""
    import importlib

    for mod in _BUILTIN:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
