"""Run untrusted Python in a separate, limited, isolated process.

>>> res = run_python("print(sum(map(int, input().split())))", stdin="2 3\\n")
>>> res.ok, res.stdout, res.reason
(True, '5\\n', 'ok')

What contains the program (see ``_boot.py`` for the process tree):

- resource limits: CPU seconds, address space, file size, open files, processes (RLIMIT_*),
  plus a wall-clock limit enforced here by killing the whole process group;
- namespaces when the kernel allows them (root, or unprivileged user namespaces): no network
  (an empty network namespace), its own pid namespace (it sees and signals only itself; its
  exit kills every leftover process), a fresh read-only root with only the system and Python
  prefixes, a fresh size-limited tmpfs as working directory, and a fresh uid with no
  capabilities (so RLIMIT_NPROC binds and nothing on the host is writable);
- a scrubbed environment (PATH, HOME, TMPDIR, LANG only) in every mode.

Fallback ("rlimits" mode, when no namespace can be created): the same limits and environment,
a private temp dir, and an audit hook that refuses sockets, process creation, signals, ctypes and
writes outside the work dir.  An audit hook is best effort (C extensions bypass it), so the
result's ``isolation`` says which mode ran and callers that need the real thing pass
``isolation="namespaces"`` to make a missing namespace an error.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rldata.errors import ConfigError

__all__ = ["BOOT_SCRIPT", "HARNESS", "SandboxLimits", "SandboxResult", "probe_isolation", "run_python"]

BOOT_SCRIPT = Path(__file__).with_name("_boot.py")
# the code verifier's test runner, copied into the sandbox as main.py (standard library only)
HARNESS = Path(__file__).with_name("_harness.py")
UID_BASE = 100_000  # sandbox uids are UID_BASE + the boot process's pid: unique while it runs
_EXIT_MEMORY, _EXIT_SETUP = 121, 122  # keep in sync with _boot.py
_ISOLATION = ("auto", "namespaces", "rlimits")
_GRACE_S = 0.25  # how long to wait for pipes to close after the program's status arrived


@dataclass(frozen=True)
class SandboxLimits:
    cpu_s: float = 5.0  # CPU seconds of the program (RLIMIT_CPU, per process)
    wall_s: float = 10.0  # wall-clock seconds for the whole run, set-up included
    memory_mb: int = 512  # address space (RLIMIT_AS)
    file_size_mb: int = 8  # largest file the program may write (RLIMIT_FSIZE)
    disk_mb: int = 32  # size of the sandbox's tmpfs (namespaces mode)
    nproc: int = 16  # processes of the sandbox uid (binds only with a fresh uid or as non-root)
    nofile: int = 64  # open file descriptors
    output_bytes: int = 1 << 20  # stdout and stderr are each cut here; more kills the run
    isolation: str = "auto"  # auto | namespaces (required) | rlimits (fallback only)

    def __post_init__(self):
        for name in (
            "cpu_s",
            "wall_s",
            "memory_mb",
            "file_size_mb",
            "disk_mb",
            "nproc",
            "nofile",
            "output_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"SandboxLimits.{name} must be > 0, got {getattr(self, name)}", field=name)
        if self.memory_mb < 64:
            raise ConfigError(
                f"SandboxLimits.memory_mb must be >= 64 (Python itself needs it), got {self.memory_mb}",
                field="memory_mb",
            )
        if self.isolation not in _ISOLATION:
            raise ConfigError(
                f"SandboxLimits.isolation must be one of {_ISOLATION}, got {self.isolation!r}",
                field="isolation",
            )


@dataclass(frozen=True)
class SandboxResult:
    ok: bool  # exited with status 0 within every limit
    reason: str  # ok | exit:N | timeout | cpu_limit | memory_limit | file_size_limit | disk_limit
    #              | process_limit | output_limit | signal:NAME | setup_error
    stdout: str
    stderr: str
    exit_code: int | None = None
    signal: int | None = None
    wall_s: float = 0.0
    cpu_s: float | None = None
    isolation: dict[str, Any] = field(default_factory=dict)
    uid: int | None = None  # the fresh uid the program runs as (namespaces mode as root)

    @property
    def error_line(self) -> str:
        """The last line of stderr (usually ``ExcType: message``), for short failure reports."""
        lines = [ln for ln in self.stderr.strip().splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""


def _python_dirs() -> list[str]:
    dirs = {sys.base_prefix, sys.base_exec_prefix}
    dirs |= {os.path.realpath(d) for d in dirs}
    return sorted(d for d in dirs if d and d != "/")


def _payload(code, stdin, files, argv, limits, workdir, status_fd, uid) -> bytes:
    all_files = dict(files or {})
    if "main.py" in all_files:
        raise ConfigError("files may not contain 'main.py': pass the program as `code`", field="files")
    for name in all_files:
        if "/" in name or name.startswith(".") or not name:
            raise ConfigError(f"file names must be plain names, got {name!r}", field="files")
    all_files["main.py"] = code
    return json.dumps(
        {
            "files": all_files,
            "stdin": stdin,
            "argv": list(argv),
            "limits": asdict(limits),
            "isolation": limits.isolation,
            "workdir": workdir,
            "status_fd": status_fd,
            "uid": uid,
            "python_dirs": _python_dirs(),
        }
    ).encode()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # boot leads its own session: this reaches every descendant
    except (ProcessLookupError, PermissionError):
        pass


def _wait_uid_gone(uid: int, timeout_s: float = 5.0) -> None:
    """Wait until no process runs as the sandbox's fresh ``uid``.  Killing the pid namespace's leader
    makes the kernel kill the rest, but they exit a moment later: return only once they have."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = False
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    if os.stat(f"/proc/{name}").st_uid == uid:
                        alive = True
                        os.kill(int(name), signal.SIGKILL)
                except OSError:
                    pass
        if not alive:
            return
        time.sleep(0.01)


def _pump(proc, status_r, limits, deadline) -> tuple[bytes, bytes, bytes, str | None]:
    """Read stdout, stderr and the status pipe until all close; enforce the wall and output caps."""
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray(), status_r: bytearray()}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    killed: str | None = None
    grace_until = None
    while sel.get_map():
        now = time.monotonic()
        if now >= deadline:
            killed = "timeout"
            break
        if grace_until is None and proc.poll() is not None:
            grace_until = now + _GRACE_S  # boot is gone: only stray holders of the pipes remain
        if grace_until is not None and now >= grace_until:
            break
        limit = min(deadline, grace_until or deadline) - now
        for key, _ in sel.select(timeout=max(0.0, min(limit, 0.5))):
            fd = key.fd
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(fd)
                continue
            buf = bufs[fd]
            room = limits.output_bytes - len(buf)
            buf += chunk[: max(room, 0)]
            if fd != status_r and len(chunk) > room:
                killed = "output_limit"
        if killed:
            break
    sel.close()
    return bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()]), bytes(bufs[status_r]), killed


def _classify(
    status: dict, killed: str | None, stderr: str, limits: SandboxLimits, returncode: int | None
) -> tuple[bool, str]:
    if killed:
        return False, killed
    if "setup_error" in status:
        return False, "setup_error"
    sig, code = status.get("signal"), status.get("exit")
    cpu = status.get("cpu_s") or 0.0
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= int(limits.cpu_s + 0.999) - 0.05):
        return False, "cpu_limit"
    if code == _EXIT_MEMORY or (code and "MemoryError" in stderr[-2000:]):
        return False, "memory_limit"
    if code and "File too large" in stderr[-2000:]:
        return False, "file_size_limit"
    if code and "No space left on device" in stderr[-2000:]:
        return False, "disk_limit"  # the sandbox's tmpfs (size or inodes) is full
    if code and "BlockingIOError: [Errno 11]" in stderr[-2000:]:
        return False, "process_limit"  # fork() refused by RLIMIT_NPROC
    if code == _EXIT_SETUP:
        return False, "setup_error"
    if sig is not None:
        try:
            return False, f"signal:{signal.Signals(sig).name}"
        except ValueError:
            return False, f"signal:{sig}"
    if code is None:  # no status: the program killed its own supervisors (fallback mode only)
        return (
            False,
            f"signal:{signal.Signals(-returncode).name}" if returncode and returncode < 0 else "setup_error",
        )
    return code == 0, "ok" if code == 0 else f"exit:{code}"


def run_python(
    code: str,
    *,
    stdin: str = "",
    files: dict[str, str] | None = None,
    argv: tuple[str, ...] | list[str] = (),
    limits: SandboxLimits | None = None,
    on_start: Callable[[subprocess.Popen], None] | None = None,
) -> SandboxResult:
    """Run ``code`` as ``main.py`` in a fresh sandbox (``files`` are written next to it).

    ``on_start(proc)``, when given, is called once the sandbox's boot process exists, so a caller
    in another thread can end the run early by killing its process group
    (``os.killpg(proc.pid, SIGKILL)``); clean-up here still happens in this call.
    """
    limits = limits or SandboxLimits()
    t0 = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="rldata-sbx-")  # used only by the rlimits fallback
    status_r, status_w = os.pipe()
    proc, returncode, uid = None, None, None
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(BOOT_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(status_w,),
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            start_new_session=True,
            close_fds=True,
        )
        child_fd, status_w = status_w, -1  # pass_fds keeps the number in the child
        os.close(child_fd)
        if on_start is not None:
            on_start(proc)
        uid = UID_BASE + proc.pid if os.geteuid() == 0 and limits.isolation != "rlimits" else None
        try:
            proc.stdin.write(
                _payload(code, stdin, files, argv, limits, workdir, child_fd, UID_BASE + proc.pid)
            )
            proc.stdin.close()
        except BrokenPipeError:
            pass
        out, err, status_raw, killed = _pump(proc, status_r, limits, t0 + limits.wall_s)
    finally:
        if proc is not None:
            _kill_group(proc)  # also reaps what a finished program left behind without a pid ns
            returncode = proc.wait()
            if uid is not None:
                _wait_uid_gone(uid)
            for f in (proc.stdout, proc.stderr):
                f.close()
        os.close(status_r)
        if status_w >= 0:
            os.close(status_w)
        shutil.rmtree(workdir, ignore_errors=True)
    status = _parse_status(status_raw)
    iso = status.get("isolation", {})
    if iso and "uid" not in iso:  # the run reported that it kept the caller's uid
        uid = None
    stderr = err.decode("utf-8", "replace")
    if "setup_error" in status:
        stderr = (stderr + f"\nsandbox: {status['setup_error']}").strip()
    ok, reason = _classify(status, killed, stderr, limits, returncode)
    return SandboxResult(
        ok=ok,
        reason=reason,
        stdout=out.decode("utf-8", "replace"),
        stderr=stderr,
        exit_code=status.get("exit"),
        signal=status.get("signal"),
        wall_s=time.monotonic() - t0,
        cpu_s=status.get("cpu_s"),
        isolation=status.get("isolation", {}),
        uid=uid,
    )


def _parse_status(raw: bytes) -> dict:
    for line in reversed(raw.decode("utf-8", "replace").splitlines()):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return {}


def probe_isolation() -> dict[str, Any]:
    """Which mode ``isolation="auto"`` gets on this machine (runs one trivial sandbox)."""
    res = run_python("pass", limits=SandboxLimits(wall_s=10))
    return {"ok": res.ok, "reason": res.reason, **res.isolation}
