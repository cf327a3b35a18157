"""``code-feedback`` against the real sandbox and the bundled code tasks: attempts, observations,
hostile programs, hidden tests that never leak, close(), the spec file and its CLI registration."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import replace
from importlib.resources import files

import pytest

from rldata import open_store
from rldata.cli import main
from rldata.envs import EnvSpec, guarded_reset, guarded_step, make_env, resolve
from rldata.envs.catalog import get_env, load_spec_file, spec_of
from rldata.envs.code_feedback import MAX_OBSERVATION_CHARS, CodeFeedbackEnv
from rldata.errors import RldataError
from rldata.verify.base import all_passed
from rldata.verify.code import CodeVerifier

TASKS = [
    json.loads(x) for x in files("rldata.sample_data").joinpath("code_tasks.jsonl").read_text().splitlines()
]
BY_NAME = {t["metadata"]["name"]: t for t in TASKS}
SUM = BY_NAME["sum_digits"]
SPEC_FILE = files("rldata.sample_data").joinpath("envs/code-feedback.yaml")


def msg(code: str) -> dict:
    return {"role": "assistant", "content": f"Here you go:\n```python\n{code}\n```\n"}


def episode(spec: EnvSpec, task, replies, timeout_s=None):
    """Drive one guarded episode; return (env, list of Guarded)."""
    env = make_env(spec)
    opened = guarded_reset(env, task, 0, timeout_s=timeout_s or spec.episode.step_timeout_s)
    assert opened.finish_reason is None, opened.error
    out = []
    for r in replies:
        g = guarded_step(env, r, timeout_s=timeout_s or spec.episode.step_timeout_s)
        out.append(g)
        if g.done:
            break
    return env, out


SPEC = EnvSpec("code-feedback")  # defaults: 3 attempts, step_timeout_s 10 -> sandbox wall 5 s
# For episodes whose subject is what a program that passes gets: a 30 s sandbox wall, so a machine
# starved by the rest of the suite (a 0.04 s run once hit the 5 s wall under CI's load) is not
# mistaken for a slow program.  The limits themselves are tested with SPEC.
ROOMY = EnvSpec("code-feedback", step_timeout_s=60)
WRONG_SUM = "def sum_digits(n):\n    return n % 10"


# ---- construction and config -------------------------------------------------------------------
def test_registered_and_sized_by_the_spec():
    assert resolve("code-feedback") is CodeFeedbackEnv
    env = make_env(EnvSpec("code-feedback", step_timeout_s=20, max_turns=4, config={"max_attempts": 4}))
    assert (env.max_attempts, env.limits.wall_s, env.limits.cpu_s) == (4, 10.0, 10.0)
    assert env.limits.memory_mb == CodeVerifier().limits.memory_mb  # the final verdict's memory limit
    assert make_env(EnvSpec("code-feedback", config={"sandbox_wall_s": 2})).limits.wall_s == 2.0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"config": {"sandbox_wall_s": 6}},
            "sandbox_wall_s 6 exceeds 0.5 x the spec's step_timeout_s (10 s)",
        ),
        ({"step_timeout_s": 1.5}, "the sandbox needs at least 1 s"),
        ({"config": {"sandbox_wall_s": 0.5}}, "the sandbox needs at least 1 s"),
        ({"config": {"sandbox_wall_s": "5"}}, "'sandbox_wall_s' must be a number"),
        ({"config": {"max_attempts": 0}}, "'max_attempts' must be an integer in 1..20, got 0"),
        ({"config": {"max_attempts": True}}, "'max_attempts' must be an integer"),
        ({"config": {"max_attempts": 21}, "max_turns": 30}, "'max_attempts' must be an integer in 1..20"),
        ({"config": {"max_attempts": 5}, "max_turns": 4}, "max_attempts 5 exceeds the spec's max_turns 4"),
        ({"config": {"max_failures_shown": 6}}, "'max_failures_shown' must be an integer in 1..5"),
        ({"config": {"rules": "yes"}}, "'rules' must be true or false"),
        ({"config": {"hidden": True}}, "takes no config keys, got: hidden"),
        ({"config": {"step_timeout_s": 100}}, "config key 'step_timeout_s' is a spec field"),
    ],
)
def test_bad_config_is_refused_when_built(spec, message):
    with pytest.raises(
        RldataError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
    ):
        make_env(EnvSpec.from_dict({"env": "code-feedback", **spec}))


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        (None, "field 'tests': the task has no tests"),
        ('{"style": "function", "public": [', "field 'tests': Expecting value"),
        ("[1, 2]", "field 'tests': tests must be a JSON object"),
        (
            {"style": "function", "entry_point": "f", "public": [{"input": [1]}]},
            "must be an object with 'input' and 'output'",
        ),
        (
            {"style": "function", "entry_point": "f", "hidden": [{"input": [1], "output": 2}]},
            "no public tests",
        ),
        ('{"style": "function", "public": [], "hidden": [{"input": [1], "output": 2}]}', "no public tests"),
        (
            {"style": "function", "public": [{"input": [1], "output": 1}], "secret": 1},
            "unknown tests field(s): secret",
        ),
    ],
)
def test_a_task_without_usable_public_tests_is_an_env_error(tests, message):
    env = make_env(SPEC)
    g = guarded_reset(env, {"task_id": "t9", "prompt": "p", "tests": tests}, 0, timeout_s=5)
    assert g.finish_reason == "env_error" and env.closed
    assert (
        g.error.startswith("reset(): RldataError: code-feedback: task t9: field 'tests'")
        and message in g.error
    )


def test_step_before_reset_is_an_env_error_and_closes():
    env = make_env(SPEC)
    g = guarded_step(env, msg(WRONG_SUM), timeout_s=5)
    assert g.finish_reason == "env_error" and "step() before reset()" in g.error and env.closed


# ---- episodes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS, ids=[t["metadata"]["name"] for t in TASKS])
def test_a_correct_submission_ends_in_one_step(task):
    env, steps = episode(ROOMY, task, [msg(task["metadata"]["reference_solution"])] * 3)
    assert len(steps) == 1 and steps[0].finish_reason == "env_done" and steps[0].messages == []
    info = steps[0].info
    assert info["status"] == "passed" and info["attempt"] == 1 and info["rules_ok"] is True
    assert info["public_passed"] == info["public_total"] == len(task["tests"]["public"])
    assert env.closed and json.dumps(info)


def test_wrong_then_correct_ends_in_two_steps_with_the_failures_shown():
    _, steps = episode(ROOMY, SUM, [msg(WRONG_SUM), msg(SUM["metadata"]["reference_solution"])])
    assert [s.done for s in steps] == [False, True] and steps[1].finish_reason == "env_done"
    assert steps[0].messages == [
        {
            "role": "user",
            "content": (
                "Attempt 1 of 3: 1 of 3 public tests passed.\n"
                "Failed test 1 of 3:\n  input: [1234]\n  expected: 10\n  got: 4\n"
                "Failed test 2 of 3:\n  input: [-907]\n  expected: 16\n  got: 3\n"
                "Reply with the complete, corrected program in one ```python block. Attempts left: 2."
            ),
        }
    ]
    assert steps[0].info == {
        "attempt": 1,
        "max_attempts": 3,
        "public_passed": 1,
        "public_total": 3,
        "rules_ok": True,
        "sandbox": "ok",
        "sandbox_error": False,
        "status": "failed",
    }
    assert steps[1].info["attempt"] == 2 and steps[1].info["status"] == "passed"
    # deterministic: the same code gets the same message
    _, again = episode(SPEC, SUM, [msg(WRONG_SUM)])
    assert again[0].messages == steps[0].messages


@pytest.mark.parametrize("k", [1, 2, 4])
def test_k_wrong_attempts_end_the_episode_at_k(k):
    spec = EnvSpec("code-feedback", config={"max_attempts": k})
    env, steps = episode(spec, SUM, [msg(WRONG_SUM)] * (k + 2))
    assert len(steps) == k and [s.done for s in steps] == [False] * (k - 1) + [True]
    assert steps[-1].finish_reason == "env_done" and steps[-1].messages == []  # nothing after the last try
    assert steps[-1].info["attempt"] == k and steps[-1].info["status"] == "failed" and env.closed
    for i, s in enumerate(steps[:-1], 1):
        assert s.messages[0]["content"].startswith(f"Attempt {i} of {k}: 1 of 3 public tests passed.")
        assert s.messages[0]["content"].endswith(f"Attempts left: {k - i}.")


@pytest.mark.parametrize(
    "content",
    [
        "I am not sure how to solve this.",
        "",
        "```js\nfunction sum_digits(n) { return 0 }\n```",
    ],
)
def test_no_code_is_an_observation_and_counts_as_an_attempt(content):
    env, steps = episode(SPEC, SUM, [{"role": "assistant", "content": content}])
    g = steps[0]
    assert g.finish_reason is None and g.info["status"] == "no_code" and g.info["attempt"] == 1
    assert g.info["sandbox"] is None and env.last_sandbox_pid is None  # nothing ran
    assert g.messages[0]["content"] == (
        "Attempt 1 of 3: no Python code found in your reply.\n"
        "Reply with the complete, corrected program in one ```python block. Attempts left: 2."
    )


def test_a_syntax_error_is_reported_without_running():
    env, steps = episode(SPEC, SUM, [msg("def sum_digits(n)\n    return 1")])
    assert steps[0].info["status"] == "not_runnable" and env.last_sandbox_pid is None
    assert "the code does not run: syntax error: line 1" in steps[0].messages[0]["content"]


def test_rule_problems_are_feedback_and_block_the_pass():
    """Code that passes the public tests but breaks a rule would fail the final verdict: say so."""
    code = "import os\ndef sum_digits(n):\n    return sum(int(c) for c in str(abs(n)))"
    _, steps = episode(SPEC, SUM, [msg(code)])
    assert steps[0].info["public_passed"] == 3 and steps[0].info["rules_ok"] is False and not steps[0].done
    assert "Rule broken: forbidden: line 1: import os" in steps[0].messages[0]["content"]
    _, off = episode(EnvSpec("code-feedback", config={"rules": False}), SUM, [msg(code)])
    assert off[0].info["status"] == "passed" and off[0].info["rules_ok"] is None


def test_forged_results_on_the_harness_fd_do_not_pass_with_rules_on():
    """The solution shares the harness's process and can write fake result lines to its fd; the rule
    layer (here and in the final verdict) is what refuses such code."""
    code = (
        "import os, json\nfor fd in range(3, 12):\n    try:\n"
        "        [os.write(fd, (json.dumps({'i': i, 'out': v}) + '\\n').encode()) for i, v in enumerate([10, 16, 5])]\n"
        "    except OSError:\n        pass\nos._exit(0)\ndef sum_digits(n):\n    return 0"
    )
    _, steps = episode(SPEC, SUM, [msg(code)])
    assert not steps[0].done and steps[0].info["rules_ok"] is False
    assert all_passed(CodeVerifier().verify(msg(code)["content"], SUM)) is False


def test_a_sandbox_that_cannot_start_ends_the_episode_as_a_sandbox_error():
    env = make_env(SPEC)
    env.reset(SUM, 0)
    env.limits = replace(env.limits, nofile=3)  # too few descriptors for the sandbox's own set-up
    res = env.step(msg(SUM["metadata"]["reference_solution"]))
    assert res.done and res.observations == [] and res.info["sandbox_error"] is True
    assert res.info["status"] == "sandbox_error" and "sandbox could not start" in res.info["error"]


# ---- hostile programs ----------------------------------------------------------------------------
HOSTILE = {
    "infinite-loop": "def sum_digits(n):\n    while True:\n        pass",
    "loop-at-import": "while True:\n    pass",
    "fork-bomb": "import os\nwhile True:\n    os.fork()",
    "huge-stdout": "def sum_digits(n):\n    print('x' * 10**8)\n    return 0",
    "huge-stderr": "import os\ndef sum_digits(n):\n    while True:\n        os.write(2, b'y' * 65536)",
    "huge-return": "def sum_digits(n):\n    return 'z' * 10**7",
    "read-files": "def sum_digits(n):\n    return open('/etc/shadow').read() + open('cases.json').read()",
    "os-system": "import os\ndef sum_digits(n):\n    return os.system('cat /etc/passwd; sleep 100')",
    "sleep": "import time\ndef sum_digits(n):\n    time.sleep(100)",
    "sleep-no-alarm": (
        "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
        "def sum_digits(n):\n    time.sleep(100)"
    ),
    "kill-parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef sum_digits(n):\n    return 0",
    "memory": "x = bytearray(10**10)\ndef sum_digits(n):\n    return 0",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_programs_get_a_failure_observation_within_the_step_timeout(name, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the sandbox's temp dirs land here
    spec = EnvSpec("code-feedback", step_timeout_s=4, config={"rules": False})  # sandbox wall 2 s
    t0 = time.monotonic()
    env, steps = episode(spec, SUM, [msg(HOSTILE[name])])
    took = time.monotonic() - t0
    g = steps[0]
    assert g.finish_reason is None, g.error  # not an env error, not a hang
    assert took < spec.episode.step_timeout_s, took
    assert g.info["status"] == "failed" and g.info["public_passed"] == 0 and not g.info["sandbox_error"]
    text = g.messages[0]["content"]
    assert (
        text.startswith("Attempt 1 of 3: 0 of 3 public tests passed.") and len(text) <= MAX_OBSERVATION_CHARS
    )
    assert any(x in text for x in ("Failed test 1 of 3", "failed while loading", "Tests 1 to 3 did not run"))
    env.close()
    assert not os.path.exists(f"/proc/{env.last_sandbox_pid}")
    assert list(tmp_path.iterdir()) == []  # the run's temp dir is gone


@pytest.mark.slow
def test_a_guarded_step_that_times_out_still_closes_and_kills_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    env = make_env(SPEC)  # the sandbox may run 5 s; the caller gives up after 1 s
    assert guarded_reset(env, SUM, 0, timeout_s=5).finish_reason is None
    t0 = time.monotonic()
    g = guarded_step(env, msg(HOSTILE["infinite-loop"]), timeout_s=1.0)
    assert g.finish_reason == "env_error" and "no answer within 1 s" in g.error
    assert env.closed and "close_error" not in g.info
    assert time.monotonic() - t0 < 2.5  # close() killed the run instead of waiting out its 5 s
    assert env.last_sandbox_pid and not os.path.exists(f"/proc/{env.last_sandbox_pid}")
    assert list(tmp_path.iterdir()) == []
    env.close()  # twice is harmless


def test_close_after_success_and_step_after_close():
    env, steps = episode(ROOMY, SUM, [msg(SUM["metadata"]["reference_solution"])])
    assert steps[0].finish_reason == "env_done" and env.closed
    assert not os.path.exists(f"/proc/{env.last_sandbox_pid}")
    with pytest.raises(RldataError, match="after the episode ended"):
        env.step(msg(WRONG_SUM))
    with pytest.raises(RldataError, match="reset\\(\\) after close\\(\\)"):
        env.reset(SUM, 0)


# ---- hidden tests ------------------------------------------------------------------------------
def _echo(task) -> list[str]:
    t = task["tests"]
    if t["style"] == "stdio":
        return ["import sys\nsys.stdout.write(sys.stdin.read())", "print(open('cases.json').read())"]
    ep = t["entry_point"]
    return [
        f"def {ep}(*a, **k):\n    return [list(a), k]",
        f"def {ep}(*a, **k):\n    return open('cases.json').read()",
        f"def {ep}(*a, **k):\n    return None",
    ]


def _markers(value) -> set[str]:
    """Ways a hidden value could show in a message: as JSON, as JSON inside a JSON string, raw."""
    out = {json.dumps(value), json.dumps(json.dumps(value))[1:-1]}
    for v in value if isinstance(value, list) else []:
        out |= {json.dumps(v), json.dumps(json.dumps(v))[1:-1]}
    if isinstance(value, str):
        out |= {value.strip(), json.dumps(value)[1:-1]}
    return {m for m in out if len(m) >= 4}


def _leaks(task, observations: str, codes) -> set[str]:
    t = task["tests"]
    allowed = task["prompt"] + json.dumps(t["public"]) + json.dumps(json.dumps(t["public"])) + "".join(codes)
    marks = set()
    for case in t["hidden"]:
        marks |= _markers(case["input"]) | _markers(case["output"])
    marks = {m for m in marks if m not in allowed}
    return {m for m in marks if m in observations}, marks


@pytest.mark.slow
def test_hidden_tests_never_appear_in_an_observation():
    spec = EnvSpec("code-feedback", config={"rules": False, "max_failures_shown": 5})
    checked = 0
    for task in TASKS:
        codes = _echo(task)
        seen = ""
        for code in codes:
            _, steps = episode(spec, task, [msg(code)])
            assert steps[0].finish_reason is None and steps[0].info["status"] == "failed", task["metadata"][
                "name"
            ]
            seen += steps[0].messages[0]["content"]
        leaked, marks = _leaks(task, seen, codes)
        assert not leaked, (task["metadata"]["name"], leaked)
        # the same check catches them when they are run and shown: make them public (first) and look
        exposed = {
            **task,
            "tests": {**task["tests"], "public": task["tests"]["hidden"] + task["tests"]["public"]},
        }
        _, steps = episode(spec, exposed, [msg(codes[0])])
        found, _ = _leaks(task, steps[0].messages[0]["content"], codes)
        checked += bool(found)
        assert found or not marks, task["metadata"]["name"]
    assert checked == len(TASKS)  # in every task the check had something to find


def test_the_final_message_gets_the_hidden_verdict_from_the_code_verifier():
    """The environment ends on the public tests; the reward is the verifier's, hidden tests included."""
    public_only = "def sum_digits(n):\n    return sum(int(c) for c in str(abs(n))) if n else 7"  # 0 -> 7
    _, steps = episode(ROOMY, SUM, [msg(public_only)])
    assert steps[0].info["status"] == "passed"
    rule, pub, hid = CodeVerifier().verify(msg(public_only)["content"], SUM)
    assert (rule.passed, pub.passed, hid.passed) == (True, True, False)
    good = msg(SUM["metadata"]["reference_solution"])["content"]
    assert all_passed(CodeVerifier().verify(good, SUM)) is True


# ---- the spec file --------------------------------------------------------------------------------
def test_the_bundled_spec_registers_with_the_cli(tmp_path, capsys):
    root = str(tmp_path / "s")
    code = main(["--store", root, "env", "register", str(SPEC_FILE), "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    row = json.loads(out)[0]
    assert (row["env_id"], row["kind"], row["version"][:2]) == ("code-feedback", "code-feedback", "1+")
    spec = spec_of(get_env(open_store(root), "code-feedback").to_dicts()[0])
    assert spec.episode.step_timeout_s == 20 and spec.config["max_attempts"] == 3
    assert make_env(spec).limits.wall_s == 10.0
    # a copy asking for more sandbox time than the step allows is refused and writes nothing
    bad = load_spec_file(SPEC_FILE)
    bad["config"] = {**bad["config"], "sandbox_wall_s": 15}
    p = tmp_path / "bad.yaml"
    p.write_text(json.dumps(bad))
    before = open_store(root).versions()
    code = main(["--store", root, "env", "register", str(p)])
    _, err = capsys.readouterr()
    assert code != 0 and "sandbox_wall_s 15 exceeds 0.5 x the spec's step_timeout_s (20 s)" in err
    assert open_store(root).versions() == before
