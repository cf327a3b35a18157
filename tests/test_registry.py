"""rldata.registry.Registry: the one class behind every registry of rldata."""

from __future__ import annotations

import sys

import pytest

from rldata.curriculum.sampler import SAMPLERS
from rldata.envs.base import REGISTRY as ENVS
from rldata.errors import ConfigError, RldataError, UnknownNameError
from rldata.interop.readers import READERS
from rldata.registry import Registry
from rldata.runs.trackers import TRACKERS
from rldata.trainer.advantages import ESTIMATORS
from rldata.verify.base import REGISTRY as VERIFIERS
from tests.plugin_helpers import install_distribution


def test_every_registry_is_one_registry_class():
    for reg in (ENVS, VERIFIERS, ESTIMATORS, SAMPLERS, TRACKERS, READERS):
        assert isinstance(reg, Registry)


def test_register_resolve_and_the_unknown_name_error(tmp_path, monkeypatch):
    (tmp_path / "toy_builtin.py").write_text(
        "from toy_registry import REG\n\n@REG.register('b')\ndef b():\n    return 'b'\n"
    )
    (tmp_path / "toy_registry.py").write_text(
        "from rldata.registry import Registry\nREG = Registry('toy', builtin='toy_builtin', paths=True)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from toy_registry import REG

    try:
        assert "b" not in REG  # built-ins are imported on the first lookup, not before
        REG.register("a", len)
        assert REG.resolve("b")() == "b" and REG.resolve("a") is len
        assert REG.names(plugins=False) == ["a", "b"]
        assert REG.resolve("json:dumps").__name__ == "dumps"  # module:attr, not registered
        assert "json:dumps" not in REG
        with pytest.raises(UnknownNameError, match=r"^unknown toy 'c'; known: a, b$"):
            REG.resolve("c")
        with pytest.raises(RldataError, match="toy 'json:nope' does not import"):
            REG.resolve("json:nope")
    finally:
        sys.modules.pop("toy_registry", None)
        sys.modules.pop("toy_builtin", None)


def test_entry_points_are_listed_unimported_and_loaded_once(tmp_path, monkeypatch):
    site = install_distribution(
        tmp_path / "site",
        "toy-est",
        {"toy_est.py": "LOADS = []\ndef half(r, *, eps):\n    LOADS.append(1)\n    return r\n"},
        {"rldata.envs": {"half": "toy_est:half"}},
    )
    monkeypatch.syspath_prepend(str(site))
    reg = Registry("thing", group="rldata.envs", error=ConfigError, field="thing")
    assert reg.names() == ["half"] and "toy_est" not in sys.modules
    try:
        assert reg.resolve("half") is sys.modules["toy_est"].half and "half" in reg
        with pytest.raises(ConfigError, match="unknown thing 'x'; known: half") as e:
            reg.resolve("x")
        assert e.value.field == "thing"
    finally:
        sys.modules.pop("toy_est", None)


def test_the_registries_keep_their_error_types():
    with pytest.raises(ConfigError, match="unknown advantage estimator 'ppo'; known: grpo"):
        ESTIMATORS.resolve("ppo")
    with pytest.raises(UnknownNameError, match="unknown verifier 'nope'.*or give one as module:Class"):
        VERIFIERS.resolve("nope")
    with pytest.raises(RldataError, match="unknown tracker 'neptune'; known: none, tensorboard"):
        TRACKERS.resolve("neptune")


def test_threads_resolving_at_once_all_wait_for_the_builtin_import(tmp_path, monkeypatch):
    # the built-in module registers its name only after a pause: a thread that saw the import
    # started must not conclude the name is unknown
    from concurrent.futures import ThreadPoolExecutor

    reg = Registry("toy", builtin="slow_builtins_for_race")
    (tmp_path / "slow_builtins_for_race.py").write_text(
        f"import sys, time\ntime.sleep(0.3)\nsys.modules[{__name__!r}].RACE_REGISTRY.register('calc', 42)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys.modules[__name__], "RACE_REGISTRY", reg, raising=False)
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: reg.resolve("calc"), range(8)))
    assert got == [42] * 8
