"""verify_on_ray on a real local Ray: dedup, order, crashed workers, hangs, and the local fallback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rldata.errors import RldataError
from rldata.verify.base import Verdict, register
from rldata.verify.parallel import verify_on_ray
from rldata.verify.run import VerifyStats

pytestmark = [pytest.mark.slow, pytest.mark.ray]


@register("test-ray-count")
class RayCountingVerifier:
    """Appends one line per check to ``task["tests"]`` (a file): counts the checks really run."""

    name, version = "test-ray-count", "1"

    def extract(self, completion, task):
        return (completion or "").strip() or None

    def check(self, extracted, task):
        with open(task["tests"], "a") as f:
            f.write(f"{os.getpid()} {extracted}\n")
        ok = extracted == task["answer"]
        return [Verdict(ok, float(ok), extracted)]


@register("test-ray-crash")
class RayCrashingVerifier:
    """Runs inside the Ray worker (in_process) and kills it on the answer "die"."""

    name, version = "test-ray-crash", "1"
    in_process = True

    def extract(self, completion, task):
        return completion

    def check(self, extracted, task):
        if extracted == "die":
            os._exit(7)  # the Ray worker process dies mid-chunk
        ok = extracted == task["answer"]
        return [Verdict(ok, float(ok), extracted)]


def _item(key, completion, answer, *, verifier=None, domain="math", tests=None):
    return {
        "key": key,
        "verifier": verifier,
        "domain": domain,
        "completion": completion,
        "answer": answer,
        "tests": tests,
    }


def test_results_by_key_and_dedup(ray_session, tmp_path):
    log = tmp_path / "calls.txt"
    answers = ["12", "12", "13", "12", "", "14", "12", "13"]
    items = [
        _item(("t1", i), a, "12", verifier="test-ray-count", tests=str(log))
        for i, a in enumerate(answers * 8)
    ]
    stats = VerifyStats()
    out = verify_on_ray(items, num_tasks=4, timeout_s=5.0, stats=stats)
    assert set(out) == {it["key"] for it in items}
    for it in items:
        (v,) = out[it["key"]]
        assert v.passed is (it["completion"] == "12")
    lines = log.read_text().splitlines()
    assert sorted(line.split()[1] for line in lines) == ["12", "13", "14", "None"]  # 64 items, 4 checks
    assert stats.items == 64 and stats.unique == 4 and stats.computed == 4 and stats.errors == 0
    assert all(int(line.split()[0]) != os.getpid() for line in lines)  # checked away from the driver


@pytest.mark.parametrize("where", ["auto", "driver", "ray"])
def test_math_on_ray(ray_session, where):
    comps = ["The answer is 18.", "#### 18", "\\boxed{18}", "So 17.", "", "\\boxed{\\frac{36}{2}}"]
    items = [_item(f"k{i}", comps[i % len(comps)], "18", domain="math") for i in range(96)]
    stats = VerifyStats()
    out = verify_on_ray(items, timeout_s=5.0, stats=stats, where=where)
    assert [out[f"k{i}"][0].passed for i in range(96)] == [
        comps[i % len(comps)] not in ("So 17.", "") for i in range(96)
    ]
    assert stats.unique == 4  # 18, 17, no answer, \frac{36}{2}
    # math is cheap: auto checks it in the driver's verifier child, with no Ray task
    local = where != "ray"
    assert (stats.in_driver, stats.chunks > 0) == ((4, False) if local else (0, True))


def test_auto_sends_verifiers_that_are_not_cheap_to_ray(ray_session, tmp_path):
    log = tmp_path / "calls.txt"
    items = [_item(i, a, "12", verifier="test-ray-count", tests=str(log)) for i, a in enumerate("1213")]
    stats = VerifyStats()
    verify_on_ray(items, timeout_s=5.0, stats=stats)
    assert stats.in_driver == 0 and stats.chunks >= 1
    stats = VerifyStats()
    verify_on_ray(items, timeout_s=5.0, stats=stats, where="driver")
    assert stats.in_driver == 3 and stats.chunks == 0
    with pytest.raises(RldataError, match="where must be one of"):
        verify_on_ray(items, where="gpu")


def test_dead_worker_chunk_is_split_and_only_the_culprit_errors(ray_session):
    answers = ["a", "b", "die", "c", "d", "e", "f", "g"]
    items = [_item(i, a, a, verifier="test-ray-crash") for i, a in enumerate(answers)]
    stats = VerifyStats()
    out = verify_on_ray(items, num_tasks=1, timeout_s=5.0, max_retries=0, stats=stats)
    for i, a in enumerate(answers):
        (v,) = out[i]
        if a == "die":
            assert v.passed is None and "worker" in v.error and v.extracted == "die"
        else:
            assert v.passed is True, v
    # 8 -> 4 + 4 -> 2 + 2 -> 1 + 1: three failed chunks on the culprit's path, then it fails alone
    assert stats.worker_failures == 4 and stats.errors == 1 and stats.computed == 7


@pytest.mark.parametrize("where", ["driver", "ray"])
def test_hang_and_process_death_inside_a_worker_are_error_verdicts(ray_session, where):
    items = [
        _item("hang", "\\boxed{9^{9^{9^{9}}}}", "5"),
        _item("ok", "The answer is 5", "5"),
        _item("ok2", "#### 4", "5"),
    ]
    out = verify_on_ray(items, timeout_s=1.0, where=where)
    assert out["hang"][0].passed is None and out["hang"][0].error.startswith("timeout")
    assert out["ok"][0].passed is True and out["ok2"][0].passed is False


def test_bad_items_are_refused_before_any_work(ray_session):
    with pytest.raises(RldataError, match="duplicate key"):
        verify_on_ray([_item(1, "1", "1"), _item(1, "2", "2")])
    with pytest.raises(RldataError, match="no verifier"):
        verify_on_ray([_item(1, "1", "1", domain="astrology")])
    with pytest.raises(RldataError, match="missing 'key'"):
        verify_on_ray([{"domain": "math", "completion": "1", "answer": "1"}])
    assert verify_on_ray([]) == {}


def test_local_fallback_without_ray(tmp_path):
    """Ray not initialized in the calling process: same results, computed locally."""
    script = (
        "import json, ray\n"
        "from rldata.verify.parallel import verify_on_ray\n"
        "from rldata.verify.run import VerifyStats\n"
        "st = VerifyStats()\n"
        "items = [{'key': i, 'domain': 'math', 'completion': c, 'answer': '0.5'}\n"
        "         for i, c in enumerate(['\\\\boxed{1/2}', 'The answer is 0.5', 'no', '\\\\boxed{1/2}'])]\n"
        "out = verify_on_ray(items, stats=st)\n"
        "print(json.dumps({'init': ray.is_initialized(), 'passed': [out[i][0].passed for i in range(4)],\n"
        "                  'unique': st.unique, 'chunks': st.chunks}))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"init": False, "passed": [True, True, False, True], "unique": 3, "chunks": 0}
