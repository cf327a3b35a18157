"""verify_many: dedup, guarded calls, and the killable verifier process (rldata.verify.isolate)."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rldata.verify.base import Verdict, register
from rldata.verify.isolate import kill_after_s, shared_isolate
from rldata.verify.run import VerifyStats, resolve_verifier, run_verifier, verify_many

START_BUDGET_S = 30.0  # starting a fresh verifier process (imports) on a loaded 2-core machine


def _spin_forever():
    while True:
        pass


@register("test-count")
class CountingVerifier:
    """Appends one line per check to the file named by ``task["tests"]``: counts real work."""

    name, version = "test-count", "1"

    def extract(self, completion, task):
        return (completion or "").strip() or None

    def check(self, extracted, task):
        with open(task["tests"], "a") as f:
            f.write(f"{extracted}\n")
        ok = extracted == task["answer"]
        return [Verdict(ok, float(ok), extracted)]


@register("test-misbehave")
class MisbehavingVerifier:
    """Does what the completion says: raise, return junk, die, or hang where no signal reaches."""

    name, version = "test-misbehave", "1"

    def extract(self, completion, task):
        return completion

    def check(self, extracted, task):
        if extracted == "raise":
            raise RuntimeError("verifier bug")
        if extracted == "junk":
            return "not a list"
        if extracted == "exit":
            os._exit(13)
        if extracted == "hang":
            # SIGALRM blocked: the soft timeout cannot fire, only the kill of the process works
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            _spin_forever()
        if extracted == "print":
            print("noise on stdout must not corrupt the result stream")
        return [Verdict(True, 1.0, extracted)]


@register("test-spin")
class SpinVerifier:
    """Only ``verify`` (no two-phase split): deduplicated on the whole completion."""

    name, version = "test-spin", "1"
    in_process = True

    def verify(self, completion, task):
        if completion == "spin":
            _spin_forever()
        return [Verdict(True, 1.0, None)]


def test_identical_pairs_are_verified_once(tmp_path):
    log = tmp_path / "calls.txt"
    task = {"answer": "42", "tests": str(log)}
    completions = ["42", " 42 ", "41", "42", "41", "", "7", "42\n"] * 4  # 32 items, 3 distinct + no answer
    stats = VerifyStats()
    out = verify_many([("test-count", c, task) for c in completions], timeout_s=5.0, stats=stats)
    assert [vs[0].passed for vs in out] == [c.strip() == "42" for c in completions]
    calls = Path(log).read_text().splitlines()
    assert sorted(calls) == sorted(["42", "41", "None", "7"])  # each distinct extracted answer once
    assert stats.items == 32 and stats.unique == 4 and stats.computed == 4 and stats.errors == 0
    # A different gold is different work.
    verify_many([("test-count", "42", {"answer": "43", "tests": str(log)})], timeout_s=5.0)
    assert len(Path(log).read_text().splitlines()) == 5


def test_math_dedup_merges_equal_extractions():
    stats = VerifyStats()
    items = [
        ("math", c, {"answer": "1,234"})
        for c in ["#### 1234", "The answer is 1,234.", "\\boxed{1234}", "so 1,234.", "#### 1235", "no idea"]
    ]
    out = verify_many(items, timeout_s=5.0, stats=stats)
    assert [vs[0].passed for vs in out] == [True, True, True, True, False, False]
    assert stats.unique == 3  # "1234", "1235", no answer


def test_misbehaving_verifier_gives_error_verdicts_and_the_rest_pass():
    iso = shared_isolate()
    verify_many([("test-misbehave", "ok", {"answer": "x"})], timeout_s=5.0)  # process up, not timed
    restarts = iso.restarts
    t0 = time.monotonic()
    stats = VerifyStats()
    names = ["ok", "raise", "junk", "exit", "ok2", "hang", "print", "ok3"]
    out = verify_many([("test-misbehave", c, {"answer": "x"}) for c in names], timeout_s=1.0, stats=stats)
    elapsed = time.monotonic() - t0
    got = dict(zip(names, (vs[0] for vs in out)))
    for ok in ("ok", "ok2", "ok3", "print"):
        assert got[ok].passed is True, got[ok]
    assert got["raise"].passed is None and "RuntimeError: verifier bug" in got["raise"].error
    assert got["junk"].passed is None and "not a list" in got["junk"].error
    assert got["exit"].passed is None and "died (exit code 13)" in got["exit"].error
    assert got["hang"].passed is None and got["hang"].error.startswith("timeout")
    assert "killed" in got["hang"].error
    assert stats.errors == 4
    assert iso.restarts == restarts + 2  # the exit and the hang each cost one process
    assert elapsed < kill_after_s(1.0) + 2 * START_BUDGET_S


def test_verify_many_from_threads():
    def job(i):
        assert threading.current_thread() is not threading.main_thread()
        return verify_many(
            [
                ("math", f"The answer is {i}", {"answer": str(i)}),
                ("test-misbehave", "hang" if i == 0 else "ok", {"answer": "x"}),
            ],
            timeout_s=1.0,
        )

    with ThreadPoolExecutor(3) as ex:
        results = list(ex.map(job, range(3)))
    assert all(r[0][0].passed is True for r in results)
    assert results[0][1][0].error.startswith("timeout")
    assert results[1][1][0].passed is True and results[2][1][0].passed is True
    # The pool's threads are gone; the verifier process (parent-death signal) must not be.
    time.sleep(0.5)
    proc = shared_isolate()._proc
    assert proc is not None and proc.poll() is None


def test_in_process_verifier_without_extract_is_guarded_in_a_thread():
    def job():
        return run_verifier(SpinVerifier(), "spin", {"answer": None}, timeout_s=0.3)

    t0 = time.monotonic()
    with ThreadPoolExecutor(1) as ex:
        (v,) = ex.submit(job).result()
    assert v.passed is None and v.error == "timeout after 0.3s"
    assert time.monotonic() - t0 < 3.0
    stats = VerifyStats()
    out = verify_many([("test-spin", c, {"answer": None}) for c in ["a", "a", "b"]], stats=stats)
    assert all(vs[0].passed for vs in out) and stats.unique == 2


def test_resolve_verifier():
    assert resolve_verifier("math") == "math"
    assert resolve_verifier("arith") == "math"
    assert resolve_verifier("text") == "exact"
    with pytest.raises(KeyError, match="no verifier named 'nope'"):
        resolve_verifier("nope")
    with pytest.raises(KeyError):
        verify_many([("nope", "1", {"answer": "1"})])


@pytest.mark.slow
def test_verifier_process_dies_with_its_parent(tmp_path):
    """A parent killed while its verifier process hangs must not leave the hang running."""
    import subprocess
    import sys

    script = (
        "import os, signal, threading, time\n"
        "from rldata.verify.base import Verdict, register\n"
        "from rldata.verify.isolate import shared_isolate\n"
        "from rldata.verify.run import verify_many\n"
        "@register('test-forever')\n"
        "class Forever:\n"
        "    name, version = 'test-forever', '1'\n"
        "    def verify(self, completion, task):\n"
        "        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
        "        while True:\n"
        "            pass\n"
        "def killer():\n"
        "    while shared_isolate()._proc is None:\n"
        "        time.sleep(0.05)\n"
        "    print(shared_isolate()._proc.pid, flush=True)\n"
        "    time.sleep(6)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "threading.Thread(target=killer, daemon=True).start()\n"
        "verify_many([('test-forever', 'x', {'answer': None})], timeout_s=600)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    err = tmp_path / "stderr.txt"
    with open(err, "w") as f:  # not a pipe: the verifier process inherits it
        res = subprocess.run(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=f,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
    assert res.returncode == -signal.SIGKILL, err.read_text()[-2000:]
    child = int(res.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)  # clean up before failing
    pytest.fail("the verifier process outlived its parent")
