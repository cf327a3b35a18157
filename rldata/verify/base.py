"""The verifier contract and registry.

A verifier checks one completion against one task and returns one :class:`Verdict` per layer
(single-layer verifiers return one, with ``layer="answer"``).  Verifiers are pure functions of
(completion, task) plus a version string that is stored with every result, so results of
different verifier versions never mix in the pass-rate ledger.

A verifier must not raise on bad completions; :func:`run_verifier` still guards every call, and
turns a crash or timeout into an error verdict (``passed=None``), never a silent 0.

The registry: built-in verifiers are listed once, in :data:`BUILTIN`, and imported when their
name is first looked up.  A verifier can also be registered in code (:func:`register`), named by
an importable ``module:Class`` path, or come from an installed package's ``rldata.verifiers``
entry point (:mod:`rldata.plugins`); :func:`resolve_name` tries them in that order.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rldata.errors import RldataError, UnknownNameError
from rldata.plugins import PluginError, entry_point_names, load_entry_point
from rldata.registry import Registry, import_path

__all__ = [
    "BUILTIN",
    "DOMAIN_DEFAULTS",
    "REGISTRY",
    "UnknownVerifier",
    "Verdict",
    "Verifier",
    "all_passed",
    "for_domain",
    "get_verifier",
    "known_verifiers",
    "load_all",
    "no_answer",
    "register",
    "resolve_name",
    "verdict_rows",
]


@dataclass(frozen=True)
class Verdict:
    passed: bool | None  # None = the verifier errored (crash, timeout): not a pass, not a fail
    score: float = 0.0  # reward in [0, 1] for this layer
    extracted: str | None = None  # the answer pulled out of the completion
    error: str | None = None
    detail: Mapping[str, Any] | None = None
    layer: str = "answer"  # answer | rule | public | hidden | judge

    def __post_init__(self):
        # a NaN or infinite score (a plugin's bug, a judge's parse) is a verifier error: it would rank
        # above every real reward, and the store refuses it (schemas: finite)
        try:
            finite = math.isfinite(float(self.score))
        except (TypeError, ValueError, OverflowError):
            finite = False
        if not finite:
            object.__setattr__(
                self, "error", f"non-finite score {self.score!r}" + (f"; {self.error}" if self.error else "")
            )
            object.__setattr__(self, "passed", None)
            object.__setattr__(self, "score", 0.0)

    @classmethod
    def failure(cls, error: str, *, layer: str = "answer", extracted: str | None = None) -> Verdict:
        return cls(passed=None, score=0.0, extracted=extracted, error=error, layer=layer)


def all_passed(verdicts: Sequence[Verdict]) -> bool | None:
    """A sample's outcome over its layers: None (an error) if any layer errored, else whether all
    passed.  The one rule the ledger, ``rldata sample`` and the trainer share."""
    if any(v.passed is None for v in verdicts):
        return None
    return all(v.passed for v in verdicts)


def no_answer(verdicts: Sequence[Verdict]) -> bool:
    """A parse failure: the verifier ran (no error) but found no answer (or code) to check in the
    completion: every non-judge layer has ``extracted`` None.  Counted apart from wrong answers."""
    own = [v for v in verdicts if v.layer != "judge"]
    return bool(own) and all_passed(own) is not None and all(v.extracted is None for v in own)


def verdict_rows(
    task_id: str, traj_id: str, verifier: str, version: str, verdicts: Sequence[Verdict]
) -> list[dict]:
    """``verifications`` rows, one per layer, for one sample's verdicts."""
    return [
        {
            "traj_id": traj_id,
            "task_id": task_id,
            "verifier": verifier,
            "verifier_version": version,
            "layer": v.layer,
            "passed": v.passed,
            "score": float(v.score),
            "extracted": v.extracted,
            "error": v.error,
            "detail": json.dumps(dict(v.detail), default=str) if v.detail else None,
        }
        for v in verdicts
    ]


class Verifier(Protocol):
    name: str
    version: str

    def verify(self, completion: str, task: Mapping[str, Any]) -> list[Verdict]:
        """``task`` carries at least ``answer`` (and ``tests`` for code tasks)."""
        ...


# The one list of built-in verifiers: registry name -> ("module:Class", task domains it is the default
# for).  Adding a built-in verifier is one line here; its module is imported on the name's first lookup.
BUILTIN: dict[str, tuple[str, tuple[str, ...]]] = {
    "math": ("rldata.verify.math:MathVerifier", ("math", "arith")),
    "exact": ("rldata.verify.exact:ExactVerifier", ("text",)),
    "regex": ("rldata.verify.exact:RegexVerifier", ()),
    "code": ("rldata.verify.code:CodeVerifier", ("code",)),
    "reasoning-gym": ("rldata.verify.reasoning_gym:ReasoningGymVerifier", ("reasoning-gym",)),
    "env-reward": ("rldata.verify.env_reward:EnvRewardVerifier", ("env-reward",)),
}


class UnknownVerifier(UnknownNameError):
    """No verifier of that name, or none for that domain; the message lists the known ones.

    An UnknownNameError, so also a ``KeyError``: callers written when ``get_verifier`` raised one keep
    working."""

    field = "verifier"


# What has been looked up or registered so far; built-ins are imported on their name's first lookup.
REGISTRY: Registry = Registry(
    "verifier",
    group="rldata.verifiers",
    builtin={name: spec for name, (spec, _) in BUILTIN.items()},
    error=UnknownVerifier,
    field="verifier",
    hint=" (or give one as module:Class)",
)
DOMAIN_DEFAULTS: dict[str, str] = {d: name for name, (_, domains) in BUILTIN.items() for d in domains}
_SPECS: dict[str, str] = {}  # "module:Class" -> the name it was registered under


def register(name: str, *, domains: tuple[str, ...] = ()):
    """Class decorator: ``@register("yesno", domains=("yesno",))``."""

    def deco(factory):
        REGISTRY.register(name, factory)
        for d in domains:
            DOMAIN_DEFAULTS[d] = name
        return factory

    return deco


def _add_class(obj: Any, what: str) -> str:
    """Register a verifier class found by ``module:Class`` or an entry point under its own ``name``
    (what its verdict rows record); its ``domains``, if it names any, default to it."""
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name or ":" in name or "@" in name:
        raise RldataError(
            f"verifier {what} has no usable 'name' string (a plain name, stored with its results)"
        )
    if not isinstance(getattr(obj, "version", None), str):
        raise RldataError(f"verifier {what} has no 'version' string")
    if not callable(obj) or not callable(getattr(obj, "verify", None)):
        raise RldataError(f"verifier {what} has no verify() method")
    have = REGISTRY.get(name)
    if have is None and name in BUILTIN:
        have = import_path(BUILTIN[name][0], kind="verifier")
    if have is not None and have is not obj:
        raise RldataError(
            f"verifier {what} is named {name!r}, the name of another verifier "
            f"({have.__module__}.{have.__qualname__})"
        )
    REGISTRY[name] = obj
    for d in getattr(obj, "domains", ()) or ():
        DOMAIN_DEFAULTS.setdefault(d, name)
    return name


def known_verifiers() -> list[str]:
    """Every name :func:`get_verifier` takes (entry points listed from metadata, not imported)."""
    return sorted(REGISTRY.names())


def resolve_name(name: str, *, plugins: bool = True) -> str:
    """The registry name of a verifier given by name or as ``module:Class``, loading it on first use.

    Looks in order at: what is registered, ``module:Class`` (imported; registered under the class's
    ``name``), the built-ins, then (``plugins``) the ``rldata.verifiers`` entry points of installed
    packages.  Raises :class:`UnknownVerifier`.
    """
    if name in REGISTRY:
        return name
    if ":" in name:
        if name not in _SPECS or _SPECS[name] not in REGISTRY:
            _SPECS[name] = _add_class(import_path(name, kind="verifier"), repr(name))
        return _SPECS[name]
    if name in BUILTIN:
        REGISTRY.load_builtin(name)
        return name
    if plugins:
        obj = load_entry_point(REGISTRY.group, name)
        if obj is not None:
            got = _add_class(obj, f"{name!r} (entry point {REGISTRY.group})")
            if got != name:
                raise PluginError(f"{REGISTRY.group} entry point {name!r} gives a verifier named {got!r}")
            return name
    raise REGISTRY.unknown(name)


def load_all() -> None:
    """Import every built-in verifier (and, with them, their domains); one whose module is missing is skipped."""
    for name, (spec, _) in BUILTIN.items():
        try:
            resolve_name(name, plugins=False)
        except RldataError:
            if importlib.util.find_spec(spec.partition(":")[0]) is not None:
                raise


def get_verifier(name: str) -> Verifier:
    """A new instance of the verifier ``name`` (a registered or built-in name, an entry point, or
    ``module:Class``); :class:`UnknownVerifier` if there is none."""
    return REGISTRY[resolve_name(name)]()


def for_domain(domain: str) -> Verifier:
    """The default verifier for a task domain (math -> math-verify, code -> sandboxed tests)."""
    name = DOMAIN_DEFAULTS.get(domain)
    if name is None:  # a plugin's class may name the domain: load them all, then look again
        for ep in entry_point_names(REGISTRY.group):
            resolve_name(ep)
        name = DOMAIN_DEFAULTS.get(domain)
    if name is None:
        raise UnknownVerifier(
            f"no verifier for domain {domain!r}; domains: {', '.join(sorted(DOMAIN_DEFAULTS))}"
        )
    return get_verifier(name)
