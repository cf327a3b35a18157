"""`rldata sample` on a two-node Ray cluster (ray.cluster_utils.Cluster) into an s3:// store; the driver
is killed with SIGKILL and the worker node removed mid-job, a fresh node joins, the same command resumes:
no lost and no duplicate rows.  Runs in a subprocess: a process holds one Ray connection, and the test
session's is local."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

SCRIPT = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    import ray
    from ray.cluster_utils import Cluster
    from rldata import open_store
    from rldata.sample_data.arith import generate

    uri = sys.argv[1]
    store = open_store(uri)   # endpoint and credentials: the AWS_* variables
    store.append("tasks", [
        {"task_id": f"c{i:03d}", "source": "arith", "domain": "math", "prompt": r["prompt"], "answer": r["answer"]}
        for i, r in enumerate(generate(48, seed=13))
    ])
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    worker = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    env = {**os.environ, "RLDATA_STORE": uri, "RAY_ADDRESS": cluster.address}
    args = [sys.executable, "-m", "rldata", "sample", "--n", "4", "--max-tokens", "8", "--batch-tasks", "4",
            "--seed", "1", "--engines", "2"]
    p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 400
    # the store opened above: reopening it every poll costs requests for every table to the S3 server
    while time.monotonic() < deadline and p.poll() is None and store.version("trajectories") < 3:
        time.sleep(0.5)
    if p.poll() is not None:
        sys.exit("job ended before it could be killed: " + p.stderr.read()[-2000:])
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    cluster.remove_node(worker)          # and a node dies with it
    cluster.add_node(num_cpus=2)         # a replacement joins
    cluster.wait_for_nodes()
    partial = open_store(uri).sql("SELECT count(*) FROM trajectories").fetchall()[0][0]
    p2 = subprocess.run(args, env=env, capture_output=True, text=True, timeout=500)
    if p2.returncode != 0:
        sys.exit("resume failed: " + p2.stderr[-3000:])
    print(json.dumps({"partial": partial}))
    cluster.shutdown()
""")


def test_two_node_job_into_s3_killed_and_resumed(s3_server, s3_uri):
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, s3_uri],
        capture_output=True,
        text=True,
        check=False,
        env=s3_server.env(),
        timeout=1000,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    partial = json.loads(p.stdout.strip().splitlines()[-1])["partial"]
    assert 0 < partial < 48 * 4
    from rldata import open_store

    store = open_store(s3_uri, storage_options=s3_server.options)
    assert store.sql(
        "SELECT count(*), count(DISTINCT traj_id), count(DISTINCT task_id) FROM trajectories"
    ).fetchall() == [(192, 192, 48)]
    assert store.sql("SELECT DISTINCT count(*) FROM trajectories GROUP BY task_id").fetchall() == [(4,)]
    assert store.sql("SELECT count(*), count(DISTINCT traj_id) FROM verifications").fetchall() == [(192, 192)]
    assert store.sql("SELECT count(*), min(n), max(n) FROM passrates").fetchall() == [(48, 4, 4)]
