"""A driver killed with SIGKILL leaves no Ray process of its local Ray behind (rldata/engine/reaper.py).

Without the watchdog, Ray's DashboardAgent and RuntimeEnvAgent outlived 5 of 6 such kills (issue 29;
here they were still there a minute later).  Real Ray, started by rldata's own ensure_ray in a
driver subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from rldata.engine.reaper import _cmdline, ray_descendants

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the watchdog reads /proc (Linux)")

DRIVER = """
import time, ray
from rldata.engine.actors import ensure_ray
ensure_ray(None, num_cpus=1)
ray.get(ray.remote(lambda: 1).remote())
print("READY", flush=True)
time.sleep(600)
"""


def _alive(pids: dict[int, str]) -> dict[int, str]:
    from rldata.engine.reaper import _alive as alive

    return {p: s for p, s in pids.items() if alive(p, s)}


@pytest.mark.slow
def test_a_killed_driver_leaves_no_ray_processes(tmp_path):
    env = {**os.environ, "RAY_ADDRESS": "", "RAY_DEDUP_LOGS": "0"}
    env.pop("RLDATA_NO_REAPER", None)
    drv = subprocess.Popen(
        [sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert drv.stdout.readline().strip() == "READY"
        time.sleep(3)  # the agents start after the raylet
        ray_procs = ray_descendants(drv.pid)
        names = " ".join(_cmdline(p) for p in ray_procs)
        assert "raylet" in names and "gcs_server" in names, names
    finally:
        drv.send_signal(signal.SIGKILL)
        drv.wait()
    deadline = time.monotonic() + 60
    while _alive(ray_procs) and time.monotonic() < deadline:
        time.sleep(1)
    left = {p: _cmdline(p)[:80] for p in _alive(ray_procs)}
    assert not left, left
