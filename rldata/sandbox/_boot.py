"""Sandbox bootstrap: run as ``python -I -S -B _boot.py`` by :mod:`rldata.sandbox`.

Only the standard library may be imported here: this file runs before any isolation exists and
must not pull the host's site-packages into the sandboxed interpreter.

Process tree (each process is disposable; the caller is never a parent of untrusted code)::

    host (caller) ── boot (this script, new session) ── init (pid 1 of a new pid namespace)
                                                           └── worker (drops to a fresh uid, runs main.py)

``boot`` reads one JSON payload on stdin, creates the namespaces, forks ``init`` and waits.
``init`` builds a minimal read-only root (tmpfs + bind mounts of the system and Python prefixes),
pivots into it, forks ``worker`` and reports the worker's exit status as one JSON line on the
status fd.  When ``init`` exits, the kernel kills every process left in the pid namespace, which
is what cleans up fork bombs and daemonized children.

Without namespaces (no root and no user namespaces), the fallback ("rlimits" mode) keeps the
resource limits, the scrubbed environment and a private temp dir, and adds a best-effort audit
hook (network, process spawning, writes outside the work dir, signals, ctypes).
"""

import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
EXIT_MEMORY = 121  # worker: uncaught MemoryError (RLIMIT_AS hit)
EXIT_SETUP = 122  # init/boot: the sandbox could not be built
SANDBOX_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = ("null", "zero", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, dst, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    _check(_libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {dst}")


def _prctl(option, value):
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl {option}")


def _write(fd, obj):
    data = (json.dumps(obj) + "\n").encode()
    try:
        os.write(fd, data)
    except OSError:
        pass


# ---- boot: namespaces --------------------------------------------------------------------------
def _unshare(mode):
    """Create the namespaces; return what was achieved (the fallback order is root, userns, none)."""
    if mode == "rlimits":
        return {"mode": "rlimits", "reason": "requested"}
    base = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    errors = []
    if os.geteuid() == 0:
        if _libc.unshare(base) == 0:
            return {"mode": "namespaces", "userns": False}
        errors.append(f"unshare as root: {os.strerror(ctypes.get_errno())}")
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(base | CLONE_NEWUSER) == 0:
        try:
            with open("/proc/self/setgroups", "w") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w") as f:
                f.write(f"0 {uid} 1")
            with open("/proc/self/gid_map", "w") as f:
                f.write(f"0 {gid} 1")
            return {"mode": "namespaces", "userns": True}
        except OSError as e:
            errors.append(f"user namespace maps: {e}")
    else:
        errors.append(f"unshare with a user namespace: {os.strerror(ctypes.get_errno())}")
    return {"mode": "rlimits", "reason": "; ".join(errors)}


# ---- init: the root filesystem -----------------------------------------------------------------
def _bind(src, dst, *, readonly=True):
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    _mount(src, dst, None, MS_BIND | MS_REC)
    if readonly:
        try:  # a user namespace may refuse the remount (locked flags): the uid map still protects
            _mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
        except OSError:
            pass


def _build_root(payload):
    """Make a fresh tmpfs root with only the system and Python prefixes in it; pivot into it."""
    new = "/tmp"  # any existing dir works as a mount point; the mount is private to this namespace
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    opts = f"size={payload['limits']['disk_mb']}m,nr_inodes=4096,mode=755"  # inodes too: kernel memory
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, opts)
    for d in SANDBOX_DIRS:
        if os.path.islink(d):
            os.symlink(os.readlink(d), new + d)
        elif os.path.isdir(d):
            _bind(d, new + d)
    for p in payload["python_dirs"]:  # the interpreter's prefix may live under a private dir (/root)
        if os.path.isdir(p) and not any(p == d or p.startswith(d + "/") for d in SANDBOX_DIRS):
            _bind(p, new + p)
    os.makedirs(new + "/etc", mode=0o755)
    for f in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.isfile(f):
            _bind(os.path.realpath(f), new + f)
    with open(new + "/etc/hosts", "w") as f:
        f.write("127.0.0.1 localhost\n")
    os.makedirs(new + "/dev", mode=0o755)
    for d in DEVICES:
        _bind("/dev/" + d, new + "/dev/" + d, readonly=False)
    os.symlink("/proc/self/fd", new + "/dev/fd")
    os.makedirs(new + "/proc", mode=0o555)
    try:  # a fresh /proc shows only this pid namespace; some containers refuse it: then no /proc
        _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:
        pass
    os.makedirs(new + "/tmp", mode=0o1777)
    os.chmod(new + "/tmp", 0o1777)
    os.chdir(new)
    nr = SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is not None and _libc.syscall(nr, b".", b".") == 0:
        _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    else:  # unknown arch or pivot refused: chroot is enough once the worker has no capabilities
        os.chroot(".")
    os.chdir("/")
    return "/tmp"


# ---- worker ------------------------------------------------------------------------------------
def _limits(lim, drop_uid):
    mb = 1 << 20
    cpu = max(1, int(lim["cpu_s"] + 0.999))
    pairs = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),  # soft: SIGXCPU; hard: SIGKILL a second later
        (resource.RLIMIT_AS, lim["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, lim["file_size_mb"] * mb),
        (resource.RLIMIT_NOFILE, lim["nofile"]),
    ]
    if drop_uid or os.geteuid() != 0:  # root ignores RLIMIT_NPROC; a fresh uid makes it bind
        pairs.append((resource.RLIMIT_NPROC, lim["nproc"]))
    for which, value in pairs:
        soft, hard = value if isinstance(value, tuple) else (value, value)
        resource.setrlimit(which, (soft, hard))


def _under(path, prefixes, exceptions=()):
    hit = lambda p: path == p or path.startswith(p.rstrip("/") + "/")
    return any(hit(p) for p in prefixes) and not any(hit(p) for p in exceptions)


def _audit_hook(workdir, python_dirs):
    """Fallback mode only: best-effort refusal of what namespaces would otherwise contain.

    Audit hooks see Python-level calls only; C extensions and the interpreter itself bypass them.
    """
    me = os.getpid()
    blocked = (
        "socket.",
        "subprocess.",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.system",
        "os.fork",
        "os.forkpty",
        "ctypes.",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
    )
    secret = ("/etc/passwd", "/etc/shadow", "/etc/gshadow", "/etc/group", "/root", "/home", "/proc")
    allowed = tuple(python_dirs)  # the stdlib may live under /root (pyenv)
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def hook(event, args):
        if event.startswith(blocked):
            if event == "os.kill" and args and args[0] == me:
                return
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open" and args:
            path, mode, flags = (list(args) + [None, None])[:3]
            if isinstance(path, (str, bytes)) and _under(
                os.path.realpath(os.fsdecode(path)), secret, allowed
            ):
                raise PermissionError(f"sandbox: reading {os.fsdecode(path)} is not allowed")
            wants = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags > 0 and flags & writing
            )
            if wants and isinstance(path, (str, bytes)):
                real = os.path.realpath(os.fsdecode(path))
                if real != workdir and not real.startswith(workdir + "/") and real != "/dev/null":
                    raise PermissionError(f"sandbox: writing outside the work dir ({real})")

    sys.addaudithook(hook)


def _worker(payload, workdir, iso, stdin_path):
    lim = payload["limits"]
    fd = os.open(stdin_path, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    os.unlink(stdin_path)
    os.closerange(3, 1 << 16)
    os.chdir(workdir)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a closed stdout ends the program, as in a shell
    uid = payload["uid"] if iso["mode"] == "namespaces" and not iso.get("userns") else None
    _limits(lim, uid is not None)
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)  # setuid binaries cannot raise privileges back
    except OSError:
        pass
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # drops every capability: no remount, no chroot escape
    os.environ.clear()
    os.environ.update(
        {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8",
        }
    )
    os.umask(0o077)
    import builtins
    import runpy
    import traceback

    builtins.exit = builtins.quit = sys.exit  # `python -S` skips site, which defines these
    sys.argv = ["main.py", *payload["argv"]]
    sys.path.insert(0, workdir)
    if iso["mode"] != "namespaces":
        _audit_hook(workdir, payload["python_dirs"])
    code = 0
    try:
        runpy.run_path(os.path.join(workdir, "main.py"), run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except MemoryError:
        os.write(2, b"MemoryError\n")  # no allocation: the limit may still be exhausted
        os._exit(EXIT_MEMORY)
    except BaseException:  # noqa: BLE001 - untrusted code: report any exception as its failure
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001, S110 - the program may have closed them
        pass
    os._exit(code & 0xFF)


def _init(payload, iso, status_fd):
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # boot killed (wall timeout) -> init dies -> pid ns dies
    os.umask(0o022)
    if iso["mode"] == "namespaces":
        workdir = _build_root(payload)
    else:
        workdir = payload["workdir"]
    for name, text in payload["files"].items():
        path = os.path.join(workdir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    stdin_path = os.path.join(workdir, ".stdin")
    with open(stdin_path, "w", encoding="utf-8") as f:
        f.write(payload["stdin"])
    pid = os.fork()
    if pid == 0:
        try:
            _worker(payload, workdir, iso, stdin_path)
        except BaseException as e:  # noqa: BLE001 - setup failed before user code ran
            os.write(2, f"sandbox setup failed: {e!r}\n".encode())
            os._exit(EXIT_SETUP)
    _, status, ru = os.wait4(pid, 0)
    if iso["mode"] == "namespaces" and not iso.get("userns"):
        iso = {**iso, "uid": payload["uid"]}
    out = {"isolation": iso, "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss_kb": ru.ru_maxrss}
    if os.WIFSIGNALED(status):
        out["signal"] = os.WTERMSIG(status)
    else:
        out["exit"] = os.WEXITSTATUS(status)
    _write(status_fd, out)
    os._exit(0)


def main():
    payload = json.loads(sys.stdin.buffer.read())
    status_fd = payload["status_fd"]
    os.close(0)
    os.open("/dev/null", os.O_RDONLY)
    try:
        iso = _unshare(payload["isolation"])
        if payload["isolation"] == "namespaces" and iso["mode"] != "namespaces":
            raise OSError(f"namespaces required but unavailable: {iso.get('reason')}")
    except Exception as e:  # noqa: BLE001
        _write(status_fd, {"setup_error": str(e)})
        os._exit(EXIT_SETUP)
    pid = os.fork()
    if pid == 0:
        try:
            _init(payload, iso, status_fd)
        except BaseException as e:  # noqa: BLE001
            _write(status_fd, {"setup_error": f"{type(e).__name__}: {e}", "isolation": iso})
            os._exit(EXIT_SETUP)
    _, status = os.waitpid(pid, 0)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main()
