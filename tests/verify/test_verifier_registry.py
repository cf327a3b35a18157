"""The verifier registry: built-ins listed once and imported on first lookup, unknown names as an
RldataError (and KeyError), and a user's verifier given as module:Class through the real CLI."""

from __future__ import annotations

import importlib
import json

import pytest

from rldata import gym
from rldata.cli import main
from rldata.errors import RldataError
from rldata.verify import base
from rldata.verify.base import BUILTIN, DOMAIN_DEFAULTS, REGISTRY, UnknownVerifier, Verdict
from rldata.verify.run import resolve_verifier


class ToyVerifier:
    """Passes a completion that contains the gold answer spelled backwards."""

    name = "toy-backwards"
    version = "1"

    def verify(self, completion, task):
        ok = str(task["answer"])[::-1] in (completion or "")
        return [Verdict(ok, float(ok), completion)]


class Nameless:
    version = "1"

    def verify(self, completion, task):
        return []


@pytest.fixture
def registry():
    """The registry as it was before the test (lookups in a test register what they find)."""
    saved, domains, specs = dict(REGISTRY), dict(DOMAIN_DEFAULTS), dict(base._SPECS)
    yield REGISTRY
    for d, s in ((REGISTRY, saved), (DOMAIN_DEFAULTS, domains), (base._SPECS, specs)):
        d.clear()
        d.update(s)


def test_every_builtin_is_one_entry_whose_class_carries_its_name(registry):
    for name, (spec, domains) in BUILTIN.items():
        mod, _, attr = spec.partition(":")
        cls = getattr(importlib.import_module(mod), attr)
        assert cls.name == name and isinstance(cls.version, str)
        assert base.get_verifier(name).name == name
        for d in domains:
            assert base.for_domain(d).name == name
    assert DOMAIN_DEFAULTS[gym.DOMAIN] == "reasoning-gym"  # the gym ingest's domain picks its verifier


def test_a_lookup_imports_only_the_verifier_it_names(registry):
    REGISTRY.clear()
    assert resolve_verifier("exact") == "exact" and set(REGISTRY) == {"exact"}
    assert resolve_verifier("arith") == "math" and set(REGISTRY) == {"exact", "math"}


def test_unknown_names_are_rldata_errors_that_list_the_choices(registry):
    registry.clear()  # the built-ins only: test modules of a full session register their own
    with pytest.raises(UnknownVerifier) as e:
        base.get_verifier("nope")
    assert isinstance(e.value, RldataError) and isinstance(e.value, KeyError)
    assert str(e.value).startswith(
        "unknown verifier 'nope'; known: code, env-reward, exact, math, reasoning-gym, regex"
    )
    try:  # callers that caught KeyError still do, and read the message from args[0]
        base.get_verifier("nope")
    except KeyError as k:
        assert "unknown verifier 'nope'" in k.args[0]
    with pytest.raises(UnknownVerifier, match="no verifier for domain 'poetry'"):
        base.for_domain("poetry")
    with pytest.raises(UnknownVerifier, match="no verifier named 'nope' and no verifier for a domain"):
        resolve_verifier("nope")


def test_module_class_specs_are_imported_and_checked(registry):
    assert resolve_verifier(f"{__name__}:ToyVerifier") == "toy-backwards"
    assert REGISTRY["toy-backwards"] is ToyVerifier and base.get_verifier("toy-backwards").version == "1"
    with pytest.raises(RldataError, match="does not import"):
        base.get_verifier("no_such_module_xyz:Thing")
    with pytest.raises(RldataError, match="does not import"):
        base.get_verifier(f"{__name__}:Missing")
    with pytest.raises(RldataError, match="no usable 'name'"):
        base.get_verifier(f"{__name__}:Nameless")
    with pytest.raises(RldataError, match="the name of another verifier"):
        base.get_verifier(f"{__name__}:MathImpostor")


class MathImpostor(ToyVerifier):
    name = "math"  # a user's class may not take a built-in's name: its rows would mix with math's


def _seed(store):
    store.append(
        "tasks",
        [
            {"task_id": t, "source": "unit", "domain": "math", "prompt": f"q {t}", "answer": a}
            for t, a in (("t0", "12"), ("t1", "34"))
        ],
    )
    comps = {"t0": ["21", "12", "it is 21"], "t1": ["43", "34", ""]}
    store.append(
        "trajectories",
        [
            {
                "traj_id": f"{t}/{i}",
                "task_id": t,
                "run_id": "r1",
                "sample_idx": i,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
                "completion": c,
                "completion_tokens": 2,
            }
            for t, cs in comps.items()
            for i, c in enumerate(cs)
        ],
    )


def test_rldata_verify_takes_a_module_class_verifier(store, registry, capsys):
    """The toy class runs in rldata's verifier child process (shipped by value) through `rldata verify`."""
    _seed(store)
    code = main(
        ["--store", store.root, "verify", "--verifier", f"{__name__}:ToyVerifier", "--format", "json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)[0]
    assert summary["verifiers"] == "toy-backwards@1" and summary["verified"] == 6 and summary["correct"] == 3
    rows = store.sql(
        "SELECT traj_id, verifier, verifier_version, passed FROM verifications ORDER BY traj_id"
    ).fetchall()
    assert rows == [
        ("t0/0", "toy-backwards", "1", True),
        ("t0/1", "toy-backwards", "1", False),
        ("t0/2", "toy-backwards", "1", True),
        ("t1/0", "toy-backwards", "1", True),
        ("t1/1", "toy-backwards", "1", False),
        ("t1/2", "toy-backwards", "1", False),
    ]
    ledger = store.sql("SELECT task_id, n, n_correct FROM passrates ORDER BY task_id").fetchall()
    assert ledger == [("t0", 3, 2), ("t1", 3, 1)]
    # a second run finds everything verified under the toy's version: nothing to do
    assert (
        main(["--store", store.root, "verify", "--verifier", f"{__name__}:ToyVerifier", "--format", "json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)[0]["noop"] is True

    code = main(["--store", store.root, "verify", "--verifier", "nope"])
    err = capsys.readouterr().err
    assert code == 1 and "no verifier named 'nope'" in err and "module:Class" in err
