"""``rldata env validate``: OpenEnv 0.10's own validation pipeline (``openenv.validation``) of a
registered OpenEnv environment, its runtime level played against the real registered server
(tests/envs/openenv_server.py), recorded in ``env_validations`` with the environment's version."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openenv.validation")

from rldata import open_store
from rldata.cli import main
from rldata.envs.catalog import openenv_spec, register_env
from rldata.envs.validation import validate_env
from rldata.errors import RldataError

MANIFEST = """\
spec_version: 1
name: guess
version: 0.1.0
type: space
runtime: fastapi
app: server.app:app
port: 8000
validation:
  reward: {range: [0.0, 1.0], oracle_tolerance: 0.0, floor_margin: 0.1}
  resources: {cpu: 1.0, memory_mb: 1024, disk_mb: 512, episode_timeout_s: 60.0}
  capabilities: {verifier: {kind: reward_channel}}
  types: {tags: [demo]}
  execution: {kind: openenv_ws, probe_path: validation/runtime.json, dockerfile: Dockerfile, context: .}
"""
PLAN = {"plan_schema_version": "1", "reset": {"episode_id": "v-1", "seed": 3}, "actions": [{"message": "2"}]}


@pytest.fixture(scope="module")
def guess_url():
    from tests.envs.openenv_server import serve

    proc, url = serve("guess")
    yield url
    proc.kill()
    proc.wait()


def _package(root, manifest=MANIFEST):
    (root / "validation").mkdir(parents=True)
    (root / "openenv.yaml").write_text(manifest)
    (root / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (root / "validation" / "runtime.json").write_text(json.dumps(PLAN))
    return root


def _checks(row):
    return {c["check_id"]: c["status"] for c in json.loads(row["checks"])}


def test_the_local_levels_run_against_the_registered_server_and_are_recorded(tmp_path, guess_url):
    store = open_store(tmp_path / "s")
    env, _ = register_env(store, openenv_spec("guess", guess_url, max_turns=2))
    pkg = _package(tmp_path / "pkg")
    row = validate_env(store, "guess", package=str(pkg))
    assert (row["env_id"], row["env_version"], row["max_level"]) == ("guess", env["version"], "semantic")
    assert row["levels_run"] == ["static", "runtime"] and row["verdict"] in ("pass", "warn")
    got = _checks(row)
    for check in (
        "static.manifest",
        "runtime.startup",
        "runtime.observation_schema",
        "runtime.reward_well_formed",
    ):
        assert got[check] == "pass", (check, row["checks"])
    assert got["runtime.state_contract"] == "pass"
    assert got["runtime.network_policy"] == "skip"  # no sandbox here to enforce a network policy
    assert got["semantic.oracle_max"] == "skip"  # OpenEnv 0.10 ships no local semantic grader
    assert (
        json.loads(row["report"])["source_digest"] == row["source_digest"]
        and row["openenv_version"] >= "0.10"
    )
    # recorded once per (version, package digest, level, policy): again adds nothing; static is another row
    validate_env(store, "guess", package=str(pkg))
    assert store.count("env_validations") == 1
    static = validate_env(store, "guess", package=str(pkg), level="static")
    assert static["levels_run"] == ["static"] and set(_checks(static)) == {"static.manifest"}
    assert store.sql("SELECT count(*), count(DISTINCT env_version) FROM env_validations").fetchall() == [
        (2, 1)
    ]


def test_a_bad_manifest_fails_and_the_cli_exits_1(tmp_path, guess_url, capsys):
    root = tmp_path / "s"
    register_env(open_store(root), openenv_spec("guess", guess_url, max_turns=2))
    bad = MANIFEST.replace("range: [0.0, 1.0]", "range: [1.0, 0.0]")
    pkg = _package(tmp_path / "pkg", bad)
    code = main(
        ["--store", str(root), "env", "validate", "guess", "--package", str(pkg), "--level", "static"]
    )
    _, err = capsys.readouterr()
    assert code == 1 and "guess@" in err and ": fail" in err and "fail  static.manifest" in err
    assert open_store(root).sql("SELECT verdict FROM env_validations").fetchall() == [("fail",)]


def test_a_down_server_fails_the_runtime_level(tmp_path):
    from tests.envs.openenv_server import free_port

    store = open_store(tmp_path / "s")
    row = {"name": "gone", "env": "openenv", "config": {"url": f"http://127.0.0.1:{free_port()}"}}
    store.append(
        "environments", [{"env_id": "gone", "kind": "openenv", "spec": json.dumps(row), "version": "1+x"}]
    )
    pkg = _package(tmp_path / "pkg", MANIFEST.replace("episode_timeout_s: 60.0", "episode_timeout_s: 2.0"))
    got = validate_env(store, "gone", package=str(pkg), level="runtime")
    assert got["verdict"] == "fail" and _checks(got)["runtime.startup"] in ("fail", "error")
    # an already-running server gets 10 s to answer, not the 30 s of a container just started
    assert (
        "does not answer /health after 10 s" in got["checks"]
        and "start it, then validate again" in got["checks"]
    )


def test_what_it_refuses_in_one_line(tmp_path, capsys):
    root = tmp_path / "s"
    register_env(open_store(root), {"name": "calc", "env": "calculator"})
    assert main(["--store", str(root), "env", "validate", "calc", "--package", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "'calculator' environment" in err and "--openenv" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(RldataError, match="unknown environment .nope."):
        validate_env(open_store(root), "nope@1", package=str(tmp_path))
    assert main(["--store", str(root), "env", "validate", "calc"]) != 0
    assert "package" in capsys.readouterr().err
