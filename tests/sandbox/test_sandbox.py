"""Real hostile programs in the real sandbox: each is contained, reported with its reason, and the
host (this test process, its files, its network, its process table) is unaffected.

Every test runs in each isolation mode this machine offers: "auto" (namespaces where the kernel
allows them) and the "rlimits" fallback.  Limits are strict so that nothing can load the shared
machine: a fork bomb gets 16 processes and 3 s at most.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from rldata.sandbox import UID_BASE, SandboxLimits, SandboxResult, probe_isolation, run_python

MODES = ["auto", "rlimits"]
STRICT = {
    "wall_s": 5.0,
    "cpu_s": 2.0,
    "memory_mb": 256,
    "nproc": 16,
    "file_size_mb": 1,
    "output_bytes": 64 * 1024,
}


@pytest.fixture(scope="module")
def auto_mode() -> str:
    return probe_isolation()["mode"]


@pytest.fixture(params=MODES)
def limits(request) -> SandboxLimits:
    return SandboxLimits(isolation=request.param, **STRICT)


@pytest.fixture
def mode(limits, auto_mode) -> str:
    """The isolation the run gets: what "auto" found here, or the requested fallback."""
    return auto_mode if limits.isolation == "auto" else "rlimits"


def _mode(res: SandboxResult) -> str:
    return res.isolation.get("mode", "")


def _uid_procs(uid: int) -> list[int]:
    """Host pids still running as ``uid`` (the sandbox's fresh uid)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:") and int(line.split()[1]) == uid:
                pids.append(int(d.name))
    return pids


def test_runs_stdlib_program_with_stdin(limits, mode):
    code = "import json, math, collections\na, b = map(int, input().split())\nprint(json.dumps([a + b, math.gcd(a, b)]))"
    res = run_python(code, stdin="12 18\n", limits=limits)
    assert res.ok and res.reason == "ok", res.stderr
    assert res.stdout == "[30, 6]\n"
    assert res.exit_code == 0
    assert _mode(res) == mode


def test_exit_code_and_exception_are_reported(limits):
    res = run_python("import sys\nsys.exit(3)", limits=limits)
    assert not res.ok and res.reason == "exit:3" and res.exit_code == 3
    res = run_python("raise ValueError('boom')", limits=limits)
    assert res.reason == "exit:1" and res.error_line == "ValueError: boom"


def test_auto_uses_namespaces_where_the_kernel_allows(auto_mode):
    res = run_python("import os\nprint(os.getpid(), os.getuid())", limits=SandboxLimits(isolation="auto"))
    assert _mode(res) == auto_mode
    if auto_mode != "namespaces":
        pytest.skip(f"no namespaces here: {probe_isolation().get('reason')}")
    pid, uid = map(int, res.stdout.split())
    assert pid == 2  # init is pid 1 of the sandbox's own pid namespace; the program comes next
    if os.geteuid() == 0:
        assert uid == res.uid == res.isolation["uid"] >= UID_BASE  # a fresh uid, not root
    required = run_python("print('x')", limits=SandboxLimits(isolation="namespaces"))
    assert required.ok and _mode(required) == "namespaces"


def test_fork_bomb_is_contained(limits, mode):
    res = run_python("import os\nwhile True:\n    os.fork()", limits=limits)
    assert not res.ok
    if mode == "namespaces":
        assert res.reason in ("process_limit", "timeout")
        assert _uid_procs(res.uid) == []  # every bomb process is gone
    else:
        assert res.reason == "exit:1" and "os.fork is not allowed" in res.error_line
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still start processes


def test_infinite_loop_hits_the_cpu_limit(limits):
    lim = SandboxLimits(**{**STRICT, "cpu_s": 1.0, "wall_s": 20.0, "isolation": limits.isolation})
    res = run_python("while True:\n    pass", limits=lim)
    assert not res.ok and res.reason == "cpu_limit"
    assert res.wall_s < 20.0


def test_sleeping_loop_hits_the_wall_limit(limits):
    lim = SandboxLimits(**{**STRICT, "wall_s": 1.5, "isolation": limits.isolation})
    res = run_python(
        "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.1)", limits=lim
    )
    assert not res.ok and res.reason == "timeout"
    assert res.stdout == "started\n"  # output before the kill is kept
    assert 1.5 <= res.wall_s < 5.0


def test_ten_gb_allocation_hits_the_memory_limit(limits):
    res = run_python("x = bytearray(10 * 1024 ** 3)\nprint('allocated')", limits=limits)
    assert not res.ok and res.reason == "memory_limit"
    assert "allocated" not in res.stdout


def test_writes_outside_the_work_dir_do_not_reach_the_host(limits, mode, tmp_path):
    target = tmp_path / "escape.txt"  # a directory outside the sandbox, private to this test
    in_tmp = Path("/tmp") / f"rldata-escape-{uuid.uuid4().hex}"
    res = run_python(f"open({str(target)!r}, 'w').write('pwned')", limits=limits)
    assert not res.ok and res.reason == "exit:1"
    assert "Error" in res.error_line  # FileNotFoundError (not in the sandbox's root) or PermissionError
    res = run_python(f"open({str(in_tmp)!r}, 'w').write('pwned')\nprint('wrote')", limits=limits)
    if mode == "namespaces":
        assert res.ok and res.stdout == "wrote\n"  # /tmp is the sandbox's own tmpfs
    else:
        assert res.reason == "exit:1" and "outside the work dir" in res.error_line
    assert not target.exists() and not in_tmp.exists()
    res = run_python("open('/work/rldata-escape', 'w').write('x')", limits=limits)
    assert not res.ok and not Path("/work/rldata-escape").exists()


def test_the_work_dir_is_fresh_each_run(limits):
    first = run_python(
        "import os\nopen('left.txt', 'w').write('x')\nprint(sorted(os.listdir('.')))", limits=limits
    )
    second = run_python("import os\nprint(sorted(os.listdir('.')))", limits=limits)
    assert first.ok and "left.txt" in first.stdout
    assert second.ok and "left.txt" not in second.stdout


def test_socket_to_a_loopback_port_is_refused(limits):
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        srv.settimeout(0.5)
        port = srv.getsockname()[1]
        code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')"
        res = run_python(code, limits=limits)
        assert not res.ok and res.reason == "exit:1"
        assert "connected" not in res.stdout
        assert "unreachable" in res.error_line or "not allowed" in res.error_line
        with pytest.raises(socket.timeout):
            srv.accept()  # the server saw no connection


def test_environment_is_scrubbed(limits, monkeypatch):
    monkeypatch.setenv("RLDATA_TEST_SECRET", "s3cret-token")
    res = run_python("import os\nprint(os.environ['RLDATA_TEST_SECRET'])", limits=limits)
    assert not res.ok and res.error_line == "KeyError: 'RLDATA_TEST_SECRET'"
    res = run_python("import os\nprint(sorted(os.environ))", limits=limits)
    assert res.ok and "s3cret" not in res.stdout
    assert set(eval(res.stdout)) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONIOENCODING"}


def test_etc_passwd_is_not_readable(limits):
    res = run_python("print(open('/etc/passwd').read())", limits=limits)
    assert not res.ok and res.reason == "exit:1"
    assert "root:" not in res.stdout
    assert res.error_line.startswith(("FileNotFoundError", "PermissionError"))


@pytest.mark.parametrize("target", ["parent", "host", "group"])
def test_killing_the_parent_leaves_the_host_alive(limits, target):
    kill = {
        "parent": "os.kill(os.getppid(), signal.SIGKILL)",
        "host": f"os.kill({os.getpid()}, signal.SIGKILL)",  # this very test process
        "group": f"os.killpg({os.getpgid(0)}, signal.SIGKILL)",  # this test's process group
    }[target]
    res = run_python(f"import os, signal\n{kill}\nprint('survived')", limits=limits)
    # still running here: had the kill reached this process, pytest would have died with it
    assert not res.ok
    assert "survived" not in res.stdout
    assert res.reason == "exit:1"
    assert res.error_line.startswith(("PermissionError", "ProcessLookupError"))
    os.kill(os.getpid(), 0)


def test_output_flood_is_cut(limits):
    res = run_python("while True:\n    print('x' * 1000)", limits=limits)
    assert not res.ok and res.reason == "output_limit"
    assert len(res.stdout) <= limits.output_bytes


def test_big_file_hits_the_file_size_limit(limits):
    res = run_python("open('big', 'w').write('x' * (4 * 1024 * 1024))", limits=limits)
    assert not res.ok and res.reason == "file_size_limit"


def test_limits_are_checked():
    with pytest.raises(ValueError, match="wall_s"):
        SandboxLimits(wall_s=0)
    with pytest.raises(ValueError, match="isolation"):
        SandboxLimits(isolation="docker")
    with pytest.raises(ValueError, match="main.py"):
        run_python("pass", files={"main.py": "x"})


def test_process_group_is_killed_on_timeout(limits, mode):
    """A child that outlives the program is killed with it (pid namespace or process group)."""
    code = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nelse:\n    time.sleep(60)"
    lim = SandboxLimits(**{**STRICT, "wall_s": 1.0, "isolation": limits.isolation})
    res = run_python(code, limits=lim)
    if mode == "namespaces":
        assert res.reason == "timeout"
        assert _uid_procs(res.uid) == []
    else:  # the fallback refuses the fork itself
        assert res.reason == "exit:1" and "os.fork is not allowed" in res.error_line


def test_many_files_fill_only_the_sandbox_tmpfs(auto_mode):
    if auto_mode != "namespaces":
        pytest.skip("the tmpfs work dir needs a mount namespace")
    code = "for i in range(100000):\n    open(f'f{i}', 'w').close()\nprint('all written')"
    res = run_python(code, limits=SandboxLimits(**{**STRICT, "disk_mb": 4}))
    assert not res.ok and res.reason == "disk_limit"
    assert "all written" not in res.stdout


def test_on_start_lets_another_thread_end_a_run_early(limits):
    """What an environment's close() does to a step it gave up on: kill the run's process group."""
    import signal
    import threading
    import time

    started = []

    def on_start(proc):
        started.append(proc)
        threading.Timer(0.5, lambda: os.killpg(proc.pid, signal.SIGKILL)).start()

    t0 = time.monotonic()
    res = run_python("import time\ntime.sleep(60)", limits=limits, on_start=on_start)
    assert len(started) == 1 and started[0].returncode is not None  # reaped by run_python
    assert not res.ok and time.monotonic() - t0 < 3.0  # well before the 5 s wall limit
    if res.uid is not None:
        assert _uid_procs(res.uid) == []
