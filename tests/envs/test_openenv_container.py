"""``rldata env register NAME --openenv-image IMAGE`` (rldata.envs.openenv_container).

No container runtime can run on this machine, so the path that starts a real image is not tested
here.  What is: the one line when neither docker nor podman is on PATH, the argument checks, and
the whole register flow against a stand-in ``docker`` executable put first on PATH: it serves the
real OpenEnv test server (tests/envs/openenv_server.py) for ``run`` and kills it for ``stop``, and
records every command line it gets, so the test sees exactly what rldata asks a runtime to do.
"""

from __future__ import annotations

import json
import stat
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("openenv.core.env_server.http_server")

from rldata.cli import main
from rldata.envs.openenv import OpenEnvEnv
from rldata.envs.openenv_container import OpenEnvContainer, check_image
from rldata.errors import RldataError
from tests.envs.openenv_server import free_port

SERVER = Path(__file__).with_name("openenv_server.py")

# ``run ... -p 127.0.0.1:PORT:8000 IMAGE``: serve the guess env on PORT unless IMAGE is "never/healthy"
# (a container that never answers); prints the server's pid as the container id.  ``stop ID``: kill it.
STAND_IN = """#!{python}
import json, os, signal, subprocess, sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
if args[0] == "run":
    port = args[args.index("-p") + 1].split(":")[1]
    if args[-1] == "never/healthy":
        cmd = [sys.executable, "-c", "import time; time.sleep(600)"]
    else:
        cmd = [sys.executable, {server!r}, port, "guess"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    print(p.pid)
elif args[0] in ("stop", "kill"):
    os.kill(int(args[-1]), signal.SIGKILL)
elif args[0] == "logs":
    print("stand-in log line")
"""


def _cli(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out + cap.err


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """PATH holds only a stand-in ``docker``; returns the file its command lines are logged to."""
    bin_dir, log = tmp_path / "bin", tmp_path / "docker-calls.jsonl"
    bin_dir.mkdir()
    exe = bin_dir / "docker"
    exe.write_text(STAND_IN.format(python=sys.executable, log=str(log), server=str(SERVER)))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2):
            return True
    except OSError:
        return False


def test_no_container_runtime_is_one_line_and_registers_nothing(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    st = str(tmp_path / "store")
    code, out = _cli(
        capsys, "--store", st, "env", "register", "echo", "--openenv-image", "openenv/echo-env:latest"
    )
    assert code != 0
    lines = [x for x in out.splitlines() if x.strip()]
    assert len(lines) == 1 and "neither docker nor podman is on PATH" in lines[0], out
    assert "--openenv http://HOST:PORT" in lines[0]
    assert not Path(st).exists()  # nothing was created before the runtime was found missing


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--openenv-image=--privileged"], "expected an image reference"),
        (["--openenv-image", "img:latest; rm -rf /"], "expected an image reference"),
        (["--openenv-image", "img", "--port", "70000"], "expected a TCP port"),
        (["--openenv-image", "img", "--openenv", "http://127.0.0.1:1"], "give one of openenv"),
    ],
)
def test_bad_arguments_are_refused_before_any_runtime_runs(stand_in, tmp_path, capsys, args, why):
    code, out = _cli(capsys, "--store", str(tmp_path / "store"), "env", "register", "x", *args)
    assert code != 0 and why in out, out
    assert _calls(stand_in) == []  # the runtime was never asked to do anything


def test_image_references():
    for ok in ("openenv/echo-env", "registry.hf.space/openenv-echo-env:latest", "ghcr.io/a/b@sha256:ab12"):
        assert check_image(ok) == ok
    for bad in ("", "-v", "a b", "a\nb", "x" * 300):
        with pytest.raises(RldataError):
            check_image(bad)


def test_register_from_an_image_runs_it_registers_its_server_and_stops_it(stand_in, tmp_path, capsys):
    port = free_port()
    st = str(tmp_path / "store")
    image = "openenv/guess-env:1"
    code, out = _cli(
        capsys,
        "--store",
        st,
        "env",
        "register",
        "guess",
        "--openenv-image",
        image,
        "--port",
        str(port),
        "--max-turns",
        "2",
        "-f",
        "json",
    )
    assert code == 0, out
    url = f"http://127.0.0.1:{port}"
    calls = _calls(stand_in)
    assert calls[0] == ["run", "-d", "--rm", "-p", f"127.0.0.1:{port}:8000", image]
    assert [c[0] for c in calls] == ["run", "stop"] and calls[1][:3] == ["stop", "-t", "5"]
    assert not _up(url)  # stopped at the end
    from rldata import open_store

    (spec,) = open_store(st).sql("SELECT spec FROM environments WHERE env_id = 'guess'").fetchall()[0]
    config = json.loads(spec)["config"]
    assert config["url"] == url and config["image"] == image
    # a later job with the server not running: the one line says how to serve it again
    with pytest.raises(RldataError, match=rf"docker run -d -p 127.0.0.1:{port}:8000 {image}"):
        OpenEnvEnv.preflight(config, timeout_s=2)


def test_a_container_that_never_answers_is_stopped_and_said_so(stand_in, tmp_path, capsys):
    c = OpenEnvContainer("never/healthy", free_port())
    with pytest.raises(RldataError, match=r"did not answer .*/health within 1 s.*stand-in log line"):
        c.started(timeout_s=1)
    assert [x[0] for x in _calls(stand_in)] == ["run", "logs", "stop"]
    assert c.container_id is None
    code, out = _cli(
        capsys,
        "--store",
        str(tmp_path / "s"),
        "env",
        "register",
        "n",
        "--openenv-image",
        "never/healthy",
        "--port",
        str(free_port()),
        "--start-timeout-s",
        "1",
    )
    assert code != 0 and "did not answer" in out
    assert [x[0] for x in _calls(stand_in)][3:] == ["run", "logs", "stop"]
