"""One sampling job on a two-node Ray cluster on this machine (ray.cluster_utils.Cluster).

Runs in a subprocess: a process can hold one Ray connection, and the test session's is local.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

SCRIPT = textwrap.dedent("""
    import json, sys
    import ray
    from ray.cluster_utils import Cluster
    from rldata import open_store
    from rldata.configs.sampling import SampleConfig
    from rldata.jobs.sample import run_sample
    from rldata.configs.sampling import SamplingSpec
    from rldata.sample_data.arith import generate

    store = open_store(sys.argv[1])
    store.append("tasks", [
        {"task_id": f"c{i}", "source": "arith", "domain": "math", "prompt": r["prompt"], "answer": r["answer"]}
        for i, r in enumerate(generate(16, seed=11))
    ])
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    s = run_sample(store, SampleConfig(sampling=SamplingSpec(n=4, max_tokens=8), engines=2, batch_tasks=4,
                                    address=cluster.address))
    print(json.dumps({"nodes": len(nodes), "samples": s.samples}))
    ray.shutdown()
    cluster.shutdown()
""")


def test_two_node_cluster_job(tmp_path):
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "RAY_ADDRESS": ""}
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {"nodes": 2, "samples": 64}
    from rldata import open_store

    store = open_store(tmp_path / "store")
    assert store.sql("SELECT count(DISTINCT traj_id), count(DISTINCT task_id) FROM trajectories").fetchall()[
        0
    ] == (64, 16)
    assert store.sql("SELECT count(*) FROM passrates").fetchall()[0][0] == 16
