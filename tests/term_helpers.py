"""Run a command as a person would see it: its stderr on a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import time


def run_in_terminal(argv: list[str], env: dict | None = None, timeout: float = 120) -> tuple[str, str, int]:
    """Run ``argv`` with its stderr on a pseudo-terminal (what a person sees) and its stdout on a
    pipe; returns (stdout, the terminal's bytes as text, exit code)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = p.stdout.read().decode()
    return out, seen.decode(errors="replace"), p.wait(timeout=30)
