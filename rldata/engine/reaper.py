"""Ends the Ray processes a killed driver leaves behind (Linux; started by rldata.engine.actors.ensure_ray).

A driver that starts a local Ray owns its GCS, raylet and workers; they end when the driver does.
Two do not: Ray's DashboardAgent and RuntimeEnvAgent, children of the raylet, outlived 5 of 6
``kill -9``s of a driver (issue 29), because on the raylet's death they try to report it to a GCS
that is gone as well.  This watchdog runs beside the driver in its own session.  While the driver
lives it notes the Ray processes below it (pid and start time, so a reused pid is never hit); when
the driver is gone it gives Ray a few seconds to exit by itself, then sends what is left SIGTERM,
and SIGKILL after a grace period.  It only ever signals processes that were the driver's
descendants with "ray" in their command line: another user's Ray on the host is never touched.

Run as a script, not ``-m rldata.engine.reaper``: importing rldata would cost the watchdog seconds and
hundreds of MB.  Usage: ``python reaper.py DRIVER_PID DRIVER_START``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

POLL_S = 2.0  # how often the tree is noted while the driver lives
SETTLE_S = 5.0  # after the driver is gone: Ray's own clean-up first
GRACE_S = 5.0  # SIGTERM -> SIGKILL


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time in clock ticks) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), fields[19]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def ray_descendants(root: int) -> dict[int, str]:
    """pid -> start time of every process below ``root`` whose command line names Ray."""
    parent: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))) is not None:
            parent[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in parent.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        if pid != os.getpid() and "ray" in _cmdline(pid):
            out[pid] = parent[pid][1]
    return out


def _alive(pid: int, start: str) -> bool:
    st = _stat(pid)
    return st is not None and st[1] == start


def _signal(procs: dict[int, str], sig: int) -> None:
    for pid, start in procs.items():
        if _alive(pid, start):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def watch(driver: int, driver_start: str) -> None:
    seen: dict[int, str] = {}
    while _alive(driver, driver_start):
        seen.update(ray_descendants(driver))
        seen = {p: s for p, s in seen.items() if _alive(p, s)}
        time.sleep(POLL_S)
    time.sleep(SETTLE_S)
    left = {p: s for p, s in seen.items() if _alive(p, s)}
    if not left:
        return
    _signal(left, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(_alive(p, s) for p, s in left.items()):
        time.sleep(0.2)
    _signal(left, signal.SIGKILL)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2])
