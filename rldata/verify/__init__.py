"""Verifiers: math (math-verify), exact match, regex, code (sandboxed tests), reasoning-gym; one registry.

Built-ins are listed once, in :data:`rldata.verify.base.BUILTIN`, and imported on first lookup.
Others come from ``@register`` in code, a ``module:Class`` path, or an installed package's
``rldata.verifiers`` entry point (see docs/contributing.md, "Add a verifier")."""

from rldata.verify.base import (
    BUILTIN,
    REGISTRY,
    UnknownVerifier,
    Verdict,
    Verifier,
    for_domain,
    get_verifier,
    known_verifiers,
    register,
    resolve_name,
)

__all__ = [
    "BUILTIN",
    "REGISTRY",
    "UnknownVerifier",
    "Verdict",
    "Verifier",
    "for_domain",
    "get_verifier",
    "known_verifiers",
    "register",
    "resolve_name",
]
