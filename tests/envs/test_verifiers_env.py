"""verifiers v1 environments (verifiers >= 0.4) as rldata environments: the real ``verifiers`` package
with the environment package of tests/envs/vf1_sums.py (a taskset, a harness, one MCP tool, a
rubric), driven through the functions ``run_episodes`` uses for each engine turn (hand-built model
turns in the Qwen2 fixture's ChatML with Hermes tool calls).  Skipped without verifiers."""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1")

from rldata.engine.core import Sample
from rldata.envs import EnvSpec, base, make_env
from rldata.envs import verifiers_env as ve
from rldata.errors import RldataError
from rldata.rollout import EnvBinding, Renderer
from rldata.rollout.episodes import _advance, _Episode, _open
from rldata.verify.env_reward import reward_verdicts

HERE = str(Path(__file__).parent)


@pytest.fixture(autouse=True)
def vf_path(monkeypatch):
    """tests/envs on sys.path, so ``vf1_sums`` imports as an installed environment package would."""
    monkeypatch.syspath_prepend(HERE)


@pytest.fixture(scope="module")
def renderer(qwen_model):
    return Renderer.for_model(str(qwen_model))


def _spec(env_config=None, ident="vf1_sums", **kw):
    config = {"id": ident, **({"env_config": env_config} if env_config else {})}
    return EnvSpec(env="verifiers", config=config, tool_parser="hermes", **kw)


def _turn(renderer, text: str) -> Sample:
    tok = renderer.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
    return Sample(text, tuple(ids), 0, len(ids), None, None, "stop")


def _call(name, **args):
    return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(args)}}}\n</tool_call>'


def _episode(renderer, spec, task, *texts):
    b = EnvBinding("v", "2", spec)
    ep = _Episode(task=task, seed=0, sample_idx=0)
    _open(ep, b, renderer, 4000)
    for text in texts:
        assert ep.finish is None, ep.info
        _advance(ep, _turn(renderer, text), spec, renderer, 4000)
    return ep.result()


def test_the_taskset_becomes_tasks_keyed_by_task_key_with_data_and_schema():
    import verifiers.v1 as vf

    spec = _spec({"taskset": {"size": 5}})
    rows = ve.task_rows(spec, n=3, seed=1)
    assert [r["prompt"] for r in rows] == ["2+8=", "3+15=", "4+1="]
    assert [r["answer"] for r in rows] == ["10", "18", "5"]
    meta = json.loads(rows[0]["metadata"])["verifiers"]
    got = ve.load("vf1_sums", {"taskset": {"size": 5}})
    (task,) = list(got.taskset.skip(1).take(1))
    assert meta["key"] == task.key and meta["type"] == "SumTask"  # Task.key: the external id
    assert meta["data"]["answer"] == "10" and meta["data"]["prompt"] == "2+8=" and meta["data"]["idx"] == 1
    assert meta["schema"]["title"] == "SumData" and meta["schema"]["required"] == ["answer"]
    assert set(meta["schema"]["properties"]) == {"answer", "raise_in_reward"}
    # the stored data rebuilds the same task (same key) through the taskset's TaskData class
    assert got.task_cls(got.data_cls.model_validate(meta["data"]), vf.TaskConfig()).key == task.key
    assert len(ve.task_rows(spec, n=10, seed=3)) == 2  # a finite taskset ends where it ends


def test_hub_ids_load_the_module_and_a_version_must_be_the_installed_one():
    assert ve.load("someone/vf1-sums").taskset.__class__.__name__ == "Sums"
    with pytest.raises(RldataError, match="asks for version 9.9, installed: module 'vf1_sums' from no"):
        ve.load("someone/vf1-sums@9.9")
    with pytest.raises(RldataError, match="does not load: .*not found"):
        ve.load("someone/no-such-vf-env")
    with pytest.raises(RldataError, match="not a module or hub id"):
        ve.load("a b/c")


@pytest.mark.parametrize(("answer", "reward"), [("10", 1.0), ("11", 0.0)])
def test_an_answer_turn_ends_the_episode_scored_by_the_rubric_per_function(renderer, answer, reward):
    spec = _spec(max_turns=4)
    task = ve.task_rows(spec, n=1, seed=1)[0]
    r = _episode(renderer, spec, task, answer)
    assert r.finish_reason == "env_done" and r.num_turns == 1
    info = r.env_info
    assert info["env_reward"] == reward and info["scored"] is True
    assert info["rewards"] == {
        "correct": {"score": reward, "weight": 1.0},
        "used_tool": {"score": 0.0, "weight": 0.0},
    }
    assert info["metrics"] == {"turns": 1.0}
    assert info["task_key"] == json.loads(task["metadata"])["verifiers"]["key"]
    (v,) = reward_verdicts(info)
    assert v.passed is (reward == 1.0) and v.score == reward


def test_the_mcp_tool_is_in_the_template_and_its_result_and_errors_come_back(renderer):
    spec = _spec(max_turns=4)
    task = ve.task_rows(spec, n=1, seed=1)[0]
    r = _episode(renderer, spec, task, _call("add", a=2, b=8), "10")
    prompt = renderer.tokenizer.decode(r.prompt_ids)
    assert '"name": "add"' in prompt and "Add two non-negative integers." in prompt  # the template's tools=
    assert r.finish_reason == "env_done" and r.num_turns == 2 and r.num_tool_calls == 1
    tool = r.messages[2]
    assert tool == {"role": "tool", "content": "10", "tool_call_id": r.messages[1]["tool_calls"][0]["id"]}
    assert r.env_info["rewards"]["used_tool"]["score"] == 1.0 and r.env_info["env_reward"] == 1.0
    assert sum(r.mask) == r.completion_tokens < len(r.token_ids)  # tool results are context, not targets

    # a tool that raises answers an error and the episode goes on; a name the toolset lacks never
    # reaches it (rldata's parser answers); then the trace stop (two tool results) ends the episode
    r = _episode(
        renderer, spec, task, _call("add", a=-1, b=2), _call("mul", a=1, b=2), _call("add", a=1, b=1)
    )
    msgs = r.messages
    assert msgs[2]["content"].startswith("error: ") and "non-negative" in msgs[2]["content"]
    assert msgs[4]["content"].startswith("error: ") and "mul" in msgs[4]["content"]
    assert msgs[6]["content"] == "2" and r.finish_reason == "env_done"
    info = r.env_info
    assert info["tool_errors"] == 1 and info["tool_parse_fail"] == 1 and info["tool_calls"] == 2
    assert info["scored"] is True and info["env_reward"] == 0.0  # stopped by the taskset, not an answer


def test_a_rubric_that_raises_is_an_error_verdict_never_above_a_wrong_answer(renderer):
    spec = _spec({"taskset": {"raise_in_reward": True}})
    task = ve.task_rows(spec, n=1, seed=1)[0]
    r = _episode(renderer, spec, task, "10")  # the right answer, but the rubric breaks
    assert r.finish_reason == "env_done" and r.env_info["env_reward"] is None
    assert (
        "the rubric raised" in r.env_info["reward_error"] and "the rubric broke" in r.env_info["reward_error"]
    )
    (err,) = reward_verdicts(r.env_info)
    assert err.passed is None and err.score == 0.0 and "the rubric broke" in err.error
    wrong = _episode(renderer, _spec(), ve.task_rows(_spec(), n=1, seed=1)[0], "11")
    (w,) = reward_verdicts(wrong.env_info)
    assert w.passed is False and err.score <= w.score


def test_an_episode_cut_short_keeps_reward_zero_wrong(renderer):
    spec = _spec(max_turns=1)
    task = ve.task_rows(spec, n=1, seed=1)[0]
    r = _episode(renderer, spec, task, _call("add", a=2, b=8))
    assert (
        r.finish_reason == "max_turns" and r.env_info["env_reward"] == 0.0 and r.env_info["scored"] is False
    )
    (v,) = reward_verdicts(r.env_info)
    assert v.passed is False


def test_building_in_a_worker_thread_neither_crashes_nor_replaces_the_signal_handlers():
    """The bug: verifiers (0.1.x) installed signal handlers when an environment was built, and
    rldata builds environments in worker threads: ``signal only works in main thread``."""
    ve._LOADED.clear()  # the taskset is built (and its handler installed) in the worker thread
    mine = signal.getsignal(signal.SIGTERM)
    out = {}

    def build():
        try:
            out["env"] = make_env(_spec({"taskset": {"size": 2}}))
        except BaseException as e:  # noqa: BLE001
            out["error"] = e

    t = threading.Thread(target=build)
    t.start()
    t.join()
    assert "error" not in out, out.get("error")
    out["env"].close()
    ve._LOADED.clear()
    make_env(_spec({"taskset": {"size": 3}})).close()  # in the main thread: the handler stays rldata's
    assert (
        signal.getsignal(signal.SIGTERM) is mine and signal.signal is base._REAL_SIGNAL
    )  # the guard is gone


def test_what_rldata_cannot_run_is_refused_in_one_line(tmp_path, monkeypatch):
    with pytest.raises(RldataError, match="harness 'bash' runs its own agent program.*null"):
        ve.load("vf1_sums", {"agent": {"harness": {"id": "bash"}}})
    with pytest.raises(RldataError, match="registered for verifiers 0.1.x.*verifiers>=0.4"):
        make_env(EnvSpec(env="verifiers", config={"module": "wordle_env"}))
    with pytest.raises(RldataError, match="registered for verifiers 0.1.x"):
        ve.VerifiersEnv.preflight({"module": "wordle_env"})
    # a task with a runtime hook
    (tmp_path / "vf1_needs_runtime.py").write_text(
        Path(HERE, "vf1_sums.py")
        .read_text()
        .replace(
            "class Sums(vf.Taskset",
            "class Hooked(SumTask):\n    async def setup(self, trace, runtime):\n"
            "        pass\n\n\nclass Sums(vf.Taskset",
        )
        .replace("vf.Taskset[SumTask,", "vf.Taskset[Hooked,")
        .replace("yield SumTask(", "yield Hooked(")
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RldataError, match="has a setup\\(\\) hook, which needs a runtime"):
        ve.load("vf1_needs_runtime")


def test_cli_register_with_env_config_and_ingest(tmp_path, capsys):
    from rldata import open_store
    from rldata.cli import main

    st = str(tmp_path / "store")
    argv = ["--store", st, "env", "register", "sums", "--verifiers", "someone/vf1-sums", "--config"]
    assert main([*argv, '{"taskset": {"size": 4}}', "--tool-parser", "hermes", "--max-turns", "2"]) == 0
    assert main(["--store", st, "ingest", "--env", "sums", "--n", "10"]) == 0
    store = open_store(st)
    ((spec,),) = store.sql("SELECT spec FROM environments WHERE env_id = 'sums'").fetchall()
    spec = json.loads(spec)
    assert spec["config"] == {
        "id": "someone/vf1-sums",
        "env_config": {"taskset": {"size": 4}},
        "pass_reward": 1.0,
        "package": None,  # a loose module: no distribution to pin
        "harness": "someone/vf1-sums",  # the taskset's bundled chat-loop harness
    }
    assert spec["tool_parser"] == "hermes" and spec["max_turns"] == 2
    assert store.sql("SELECT count(*), count(DISTINCT env_id) FROM tasks").fetchall() == [(4, 1)]
    capsys.readouterr()
    assert main(["--store", st, "env", "register", "bad", "--verifiers", "vf1_sums", "--config", "[1]"]) != 0
    err = capsys.readouterr().err
    assert "env_config" in err and len(err.strip().splitlines()) == 1
    assert main(["--store", st, "env", "register", "bad", "--verifiers", "no_such_vf_module"]) != 0
    err = capsys.readouterr().err
    assert "does not load" in err and len(err.strip().splitlines()) == 1
    assert "vf1_sums" in sys.modules
