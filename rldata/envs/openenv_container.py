"""An OpenEnv environment's container image, run for as long as a command needs it.

``rldata env register NAME --openenv-image IMAGE`` starts IMAGE with docker (or podman, when
docker is not on PATH), waits until the server answers ``/health``, registers NAME as the OpenEnv
server it serves (rldata.envs.openenv; the spec records the image), and stops the container at the
end, whatever happened in between.

OpenEnv's images serve on port 8000 inside the container (their Dockerfiles start uvicorn there, and
openenv's own docker provider maps ``HOST_PORT:8000``), so the container's 8000 is published
on ``127.0.0.1:PORT`` of this machine only: an environment server is not meant for the network.
The registered URL is ``http://127.0.0.1:PORT``; a later job finds the server there when the image
runs on the same port (``docker run -d -p 127.0.0.1:PORT:8000 IMAGE``; the job's preflight says so
when it does not).

The image is the last argument of ``docker run``: a reference that starts with ``-`` (it would be
read as an option) or holds anything but an image reference's characters is refused before anything
runs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Self

from rldata.envs.openenv import probe
from rldata.errors import RldataError

__all__ = ["CONTAINER_PORT", "RUNTIMES", "OpenEnvContainer", "check_image", "container_runtime"]

RUNTIMES = ("docker", "podman")
CONTAINER_PORT = 8000  # where OpenEnv images serve, inside the container
# registry[:port]/path[:tag][@digest]: letters, digits and . _ - / : @ + (digest), not starting with -
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}")
_CLI_S = 120.0  # bound on one call of the runtime's CLI (a pull inside `run` included)


def check_image(image: str) -> str:
    if not isinstance(image, str) or not _IMAGE.fullmatch(image):
        raise RldataError(
            f"--openenv-image {image!r}: expected an image reference such as "
            "registry.hf.space/openenv-echo-env:latest"
        )
    return image


def check_port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise RldataError(f"--port {port!r}: expected a TCP port, 1-65535")
    return port


def container_runtime() -> str:
    """The container runtime's executable: docker, else podman; one line when neither is on PATH."""
    for name in RUNTIMES:
        path = shutil.which(name)
        if path:
            return path
    raise RldataError(
        "--openenv-image needs a container runtime: neither docker nor podman is on PATH "
        "(start the image yourself and register its URL with --openenv http://HOST:PORT)"
    )


def _last_line(text: str) -> str:
    lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
    return lines[-1][:300] if lines else "no output"


@dataclass
class OpenEnvContainer:
    """``with OpenEnvContainer(image, port).started(timeout_s) as c:`` ... ``c.url`` ... (stopped after)."""

    image: str
    port: int = CONTAINER_PORT
    runtime: str | None = None  # the executable; None: container_runtime()
    container_id: str | None = None

    def __post_init__(self):
        check_image(self.image)
        check_port(self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _cli(self, *args: str, timeout_s: float = _CLI_S) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.runtime, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )

    def start(self) -> None:
        self.runtime = self.runtime or container_runtime()
        # --rm: the container is removed once stopped (check_image: the image cannot be an option)
        cmd = ["run", "-d", "--rm", "-p", f"127.0.0.1:{self.port}:{CONTAINER_PORT}", self.image]
        try:
            r = self._cli(*cmd)
        except subprocess.TimeoutExpired:
            raise RldataError(f"{self.runtime} run {self.image}: no answer in {_CLI_S:.0f} s") from None
        if r.returncode != 0:
            raise RldataError(
                f"{self.runtime} run {self.image} failed (exit {r.returncode}): {_last_line(r.stderr)}"
            )
        self.container_id = _last_line(r.stdout)

    def wait_healthy(self, timeout_s: float) -> dict:
        """The server's /health answer once it gives one; stops the container and says why (with
        the last line of its log) when it does not within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return probe(self.url, timeout_s=2.0)
            except RldataError as e:
                if time.monotonic() >= deadline:
                    log = self.logs()
                    self.stop()
                    raise RldataError(
                        f"the container of {self.image} did not answer {self.url}/health within "
                        f"{timeout_s:.0f} s ({e}); its log ends: {log}"
                    ) from None
            time.sleep(0.5)

    def logs(self) -> str:
        if not self.container_id:
            return "no container"
        try:
            r = self._cli("logs", "--tail", "20", self.container_id, timeout_s=20)
        except subprocess.TimeoutExpired:
            return "no answer"
        return _last_line(r.stdout + "\n" + r.stderr)

    def stop(self) -> None:
        """Stop (and so remove: --rm) the container; a container already gone is not an error."""
        cid, self.container_id = self.container_id, None
        if cid:
            try:
                self._cli("stop", "-t", "5", cid, timeout_s=60)
            except subprocess.TimeoutExpired:
                self._cli("kill", cid, timeout_s=30)

    def started(self, timeout_s: float = 120.0) -> Self:
        self.start()
        try:
            self.wait_healthy(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
