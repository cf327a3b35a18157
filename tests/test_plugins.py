"""Plugins through real entry points: a temporary distribution (a dist-info with entry_points.txt on
sys.path, which importlib.metadata finds like any installed package) adds a verifier, an environment
and an export format, used through the registries and the real CLI."""

from __future__ import annotations

import json
import sys

import pytest

from rldata.cli import main
from rldata.envs import base as envs_base
from rldata.interop import lineage
from rldata.plugins import PluginError, entry_point_names
from rldata.verify import base as verify_base
from tests.plugin_helpers import export_registries, install_distribution, saved

MODULE = '''
import pyarrow as pa

from rldata.envs.base import BaseEnv, StepResult
from rldata.interop.formats import ExportFormat, write_jsonl
from rldata.verify.base import Verdict


class Shouting:
    """Passes an all-capitals completion."""

    name = "shouting"
    version = "1"
    in_process = True

    def verify(self, completion, task):
        ok = bool(completion) and completion.isupper()
        return [Verdict(ok, float(ok), completion)]


class Echo(BaseEnv):
    name = "echo"
    version = "1"

    def step(self, assistant_message):
        return StepResult([{"role": "user", "content": assistant_message["content"]}], done=True)


def _ids(frame, spec):
    return pa.table({"id": frame["task_id"].to_list(), "gold": frame["answer"].to_list()})


IDS = ExportFormat("ids", build=_ids, write=write_jsonl, help="Task ids and gold answers.")
'''

ENTRY_POINTS = """
[rldata.verifiers]
shouting = rldata_toyplug:Shouting
broken = rldata_toyplug:NoSuchClass

[rldata.envs]
echo = rldata_toyplug:Echo

[rldata.exports]
ids = rldata_toyplug:IDS
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    site = install_distribution(
        tmp_path / "site", "rldata-toyplug", {"rldata_toyplug.py": MODULE}, ENTRY_POINTS
    )
    monkeypatch.syspath_prepend(str(site))
    envs_base.REGISTRY.names(plugins=False)  # built-ins loaded before the snapshot
    restore = saved(
        [verify_base.REGISTRY, verify_base.DOMAIN_DEFAULTS, envs_base.REGISTRY, *export_registries()]
    )
    yield site
    restore()
    sys.modules.pop("rldata_toyplug", None)


def _seed(store):
    store.append(
        "tasks",
        [
            {"task_id": t, "source": "unit", "domain": "text", "prompt": f"say {a}", "answer": a}
            for t, a in (("t0", "HI"), ("t1", "yo"))
        ],
    )
    store.append(
        "trajectories",
        [
            {
                "traj_id": f"{t}/0",
                "task_id": t,
                "run_id": "r1",
                "sample_idx": 0,
                "model": "m",
                "policy_version": 0,
                "params_hash": "p",
                "completion": c,
            }
            for t, c in (("t0", "HI"), ("t1", "yo"))
        ],
    )
    store.append(
        "selections",
        [
            {
                "selection": "s",
                "task_id": t,
                "decision": "keep",
                "reason": "in_band",
                "pass_rate": 0.5,
                "n": 2,
                "n_correct": 1,
            }
            for t in ("t0", "t1")
        ],
    )


def test_names_are_listed_without_importing_the_plugin(plugin):
    assert "shouting" in entry_point_names("rldata.verifiers") and "rldata_toyplug" not in sys.modules
    assert "shouting" in verify_base.known_verifiers() and "rldata_toyplug" not in sys.modules
    with pytest.raises(ValueError, match="unknown plugin group"):
        entry_point_names("rldata.nothing")


def test_a_plugin_verifier_runs_under_rldata_verify(plugin, store, capsys):
    _seed(store)
    code = main(["--store", store.root, "verify", "--verifier", "shouting", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)[0]["verifiers"] == "shouting@1"
    rows = store.sql("SELECT traj_id, verifier, passed FROM verifications ORDER BY traj_id").fetchall()
    assert rows == [("t0/0", "shouting", True), ("t1/0", "shouting", False)]


def test_a_broken_entry_point_names_itself(plugin):
    with pytest.raises(
        PluginError, match=r"rldata.verifiers entry point 'broken' \(rldata_toyplug:NoSuchClass\)"
    ):
        verify_base.get_verifier("broken")


def test_a_plugin_environment_resolves_by_name(plugin):
    cls = envs_base.resolve("echo")
    assert cls.__module__ == "rldata_toyplug"
    env = envs_base.make_env(envs_base.EnvSpec(env="echo"))
    assert env.reset({"prompt": "2+2="}, None) == [{"role": "user", "content": "2+2="}]
    assert env.step({"role": "assistant", "content": "4"}).observations == [{"role": "user", "content": "4"}]
    with pytest.raises(Exception, match="unknown environment 'nope'; known: .*echo"):
        envs_base.resolve("nope")


def test_a_plugin_export_format_through_rldata_export(plugin, store, tmp_path, capsys):
    _seed(store)
    out = tmp_path / "ids"
    code = main(["--store", store.root, "export", "--selection", "s", "--format", "ids", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    lines = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    assert lines == [{"id": "t0", "gold": "HI"}, {"id": "t1", "gold": "yo"}]
    m = lineage.read_manifest(out)
    assert m["format"] == "ids" and m["columns"] == ["id", "gold"] and lineage.verify(out) == []
    # an unknown name is a usage error whose choices include the plugin's format
    code = main(["--store", store.root, "export", "--selection", "s", "--format", "nope", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "unknown export format 'nope'" in err and "ids" in err and "verl" in err
