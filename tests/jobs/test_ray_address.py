"""Which Ray a job runs on: ``auto`` only by explicit opt-in, the cluster attached to is named, and a
token-authenticated cluster (Ray 2.60: ``RAY_AUTH_MODE=token``) refused for want of the token says
what to set.  Real Ray: a token-auth cluster from ray.cluster_utils.Cluster in a subprocess (stopped
by its own handle; no ``ray stop``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RLDATA = str(Path(sys.executable).parent / "rldata")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RLDATA_RAY"))}
    env.update({"RAY_ADDRESS": "", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", **extra})
    return env


def _ingested(tmp_path):
    from rldata import open_store
    from rldata.ingest import ingest, sample_path

    root = tmp_path / "s"
    lines = sample_path("arith").read_text().splitlines()[:4]
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    ingest(open_store(root), tmp_path / "t.jsonl")
    return root


def _runs(root, kind):
    from rldata import open_store

    return [r for r in open_store(root).read("runs").to_dicts() if r["kind"] == kind]


@pytest.mark.parametrize("how", ["option", "RAY_ADDRESS"])
def test_address_auto_needs_an_explicit_opt_in(tmp_path, how):
    root = _ingested(tmp_path)
    argv = [RLDATA, "--store", str(root), "sample", "--n", "1"]
    env = _env()
    if how == "option":
        argv += ["--address", "auto"]
    else:
        env["RAY_ADDRESS"] = "auto"
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "address 'auto' attaches to whichever Ray cluster started last on this machine" in last
    assert "set RLDATA_RAY_AUTO=1 to attach to it anyway" in last
    assert "Started a local Ray" not in p.stderr  # refused before any Ray started
    assert _runs(root, "sample") == []  # a refused command records no run


CLUSTER = r"""
import json, os, secrets, subprocess, sys
tok = sys.argv[1]
open(tok, "w").write(secrets.token_hex(32))
os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=tok, RAY_raylet_start_wait_time_s="180")
import signal, time
from ray.cluster_utils import Cluster
from rldata.engine.reaper import ray_descendants
for attempt in range(3):  # Ray gives a raylet a fixed 30 s to register: a loaded machine can miss it
    c = Cluster()
    try:
        c.add_node(num_cpus=1, include_dashboard=False)
        break
    except Exception:
        c.shutdown()
        for pid in ray_descendants(os.getpid()):  # what the failed start left: ours only
            os.kill(pid, signal.SIGKILL)
        if attempt == 2:
            raise
        time.sleep(5)
try:
    print(json.dumps({"address": c.address}), flush=True)
    sys.stdin.readline()  # the test runs its commands, then lets the cluster go
finally:
    c.shutdown()
"""


@pytest.mark.slow
def test_a_token_auth_cluster_says_what_to_set_and_attaches_with_it(tmp_path):
    root = _ingested(tmp_path)
    tok = tmp_path / "token"
    head = subprocess.Popen(
        [sys.executable, "-c", CLUSTER, str(tok)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "head.err").open("w"),
        text=True,
        env=_env(),
    )
    try:
        line = head.stdout.readline()
        if not line:  # Ray's fixed 30 s for a raylet to register, missed 3 times: an overloaded host
            pytest.skip("Ray could not start a cluster here: " + (tmp_path / "head.err").read_text()[-300:])
        address = json.loads(line)["address"]
        # without the token: one line saying what to set (after Ray's own warnings), no run recorded
        argv = [RLDATA, "--store", str(root), "sample", "--n", "1", "--address", address]
        p = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=600, check=False)
        last = p.stderr.strip().splitlines()[-1]
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
        assert last.startswith(f"rldata: error: --address: cannot connect to the Ray cluster at {address}")
        assert "set RAY_AUTH_MODE=token here too" in last and "RAY_AUTH_TOKEN_PATH" in last
        assert _runs(root, "sample") == []
        # with it: attached, and the cluster is named on stderr
        code = f"from rldata.engine.actors import ensure_ray; print(ensure_ray({address!r})['CPU'])"
        env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(tok))
        p = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert p.returncode == 0 and p.stdout.strip() == "1.0", p.stderr[-3000:]
        assert f"attached to the Ray cluster at {address} (1 node(s), 1 CPUs)" in p.stderr
    finally:
        head.stdin.close()
        head.wait(timeout=120)
