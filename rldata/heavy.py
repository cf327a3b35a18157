"""The heavy third-party packages, torch, Ray and vLLM, each loaded at one boundary: here.

Importing torch takes about 1.5 s here, Ray about 1 s and vLLM about 13 s, while `rldata tables` starts
in about 1.2 s.  So a module that uses one of them imports its stand-in from this module at its top::

    from rldata.heavy import ray

and the package itself is imported the first time an attribute is read (``ray.get``,
``torch.zeros``, ``vllm.SamplingParams``).  A submodule that the package does not import itself
gets a stand-in of its own (``Lazy("torch.distributed.checkpoint")``); a stand-in also imports its own
direct submodules when they are first read.  No other module imports these packages inside a function, and only the learner's own
modules (trainer/learner.py and the modules it runs: they run where torch and Ray are loaded anyway)
import them at their top: ``tests/test_heavy.py`` holds both rules.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["HEAVY", "Lazy", "ray", "torch", "vllm"]


class Lazy:
    """A stand-in for the package (or submodule) ``name``, imported when an attribute is first read."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def _load(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # copy, pickle and inspect ask for these: they never load the package
        module = self._load()
        try:
            return getattr(module, attr)
        except AttributeError:
            sub = f"{self._name}.{attr}"  # a submodule the package does not import itself
            try:
                return importlib.import_module(sub)
            except ModuleNotFoundError as exc:
                if exc.name != sub:
                    raise  # the submodule exists and needs something missing: say that
            raise

    def __reduce__(self) -> tuple:
        return _stand_in, (self._name,)  # pickled by name (Ray ships closures that read these)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<rldata.heavy.Lazy {self._name!r}, {state}>"


def _stand_in(name: str) -> Lazy:
    return _STAND_INS.get(name) or Lazy(name)


ray = Lazy("ray")
torch = Lazy("torch")
vllm = Lazy("vllm")
_STAND_INS = {s._name: s for s in (ray, torch, vllm)}
HEAVY = tuple(_STAND_INS)  # the packages this module defers
