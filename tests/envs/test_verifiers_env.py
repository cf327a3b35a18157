"""verifiers environments (0.1.x line) as rldata environments: the real ``verifiers`` package, with
a small environment package written here (a single-turn, a multi-turn and a ``ToolEnv``), driven
through the same functions ``run_episodes`` uses for each engine turn (hand-built model turns).
Skipped when verifiers is not installed (it is an optional extra: docs/environments.md)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("verifiers")

from rldata.engine.core import Sample
from rldata.envs import EnvSpec
from rldata.envs.verifiers_env import dataset_tasks
from rldata.rollout import EnvBinding, Renderer
from rldata.rollout.episodes import _advance, _Episode, _open

PACKAGE = '''
import verifiers as vf
from datasets import Dataset

ROWS = [{"question": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(3, 4), (9, 2), (6, 6)]]


def exact(completion, answer, **kw):
    return 1.0 if completion[-1]["content"].strip() == answer else 0.0


class Guess(vf.MultiTurnEnv):
    """Two tries: after a miss the environment says 'again'."""

    async def env_response(self, messages, state, **kw):
        return [{"role": "user", "content": "again"}]

    @vf.stop
    async def solved(self, state, **kw):
        t = state["trajectory"]
        return bool(t) and t[-1]["completion"][-1]["content"].strip() == state["answer"]


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: numbers with + - * /
    """
    return str(eval(expression, {"__builtins__": {}}))


def load_environment(kind="single"):
    ds = Dataset.from_list(ROWS)
    rubric = vf.Rubric(funcs=[exact])
    if kind == "single":
        return vf.SingleTurnEnv(dataset=ds, rubric=rubric)
    if kind == "multi":
        return Guess(dataset=ds, rubric=rubric, max_turns=2)
    return vf.ToolEnv(dataset=ds, rubric=rubric, tools=[calculate], max_turns=3)
'''


@pytest.fixture(scope="module")
def vf_package(tmp_path_factory):
    d = tmp_path_factory.mktemp("vf-pkg")
    (d / "rldata_vf_test_env.py").write_text(PACKAGE)
    import sys

    sys.path.insert(0, str(d))
    yield "rldata_vf_test_env"
    sys.path.remove(str(d))


@pytest.fixture(scope="module")
def renderer(qwen_model):
    return Renderer.for_model(str(qwen_model))


def _spec(module, kind, **kw):
    return EnvSpec(env="verifiers", config={"module": module, "env_args": {"kind": kind}}, **kw)


def _turn(renderer, text: str) -> Sample:
    tok = renderer.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
    return Sample(text, tuple(ids), 0, len(ids), None, None, "stop")


def _episode(renderer, spec, task, *texts):
    b = EnvBinding("v", "1", spec)
    ep = _Episode(task=task, seed=0, sample_idx=0)
    _open(ep, b, renderer, 4000)
    for text in texts:
        assert ep.finish is None
        _advance(ep, _turn(renderer, text), spec, renderer, 4000)
    return ep.result()


def test_the_dataset_becomes_tasks_with_the_rows_in_metadata(vf_package):
    rows = dataset_tasks(_spec(vf_package, "single"), n=5)
    assert [r["prompt"] for r in rows] == ["3+4=", "9+2=", "6+6="]
    assert [r["answer"] for r in rows] == ["7", "11", "12"]
    meta = json.loads(rows[0]["metadata"])["verifiers"]
    assert meta["prompt"][-1] == {"role": "user", "content": "3+4="} and meta["answer"] == "7"


@pytest.mark.parametrize(("answer", "reward"), [("7", 1.0), ("8", 0.0)])
def test_a_single_turn_env_ends_after_one_turn_scored_by_its_rubric(vf_package, renderer, answer, reward):
    spec = _spec(vf_package, "single")
    task = dataset_tasks(spec, n=1)[0]
    r = _episode(renderer, spec, task, answer)
    assert r.finish_reason == "env_done" and r.num_turns == 1
    assert r.env_info["env_reward"] == reward and r.env_info["pass_reward"] == 1.0


def test_a_multi_turn_env_answers_between_turns_and_stops_on_its_condition(vf_package, renderer):
    spec = _spec(vf_package, "multi", max_turns=4)
    task = dataset_tasks(spec, n=1)[0]
    r = _episode(renderer, spec, task, "8", "7")
    assert r.finish_reason == "env_done" and r.num_turns == 2
    assert [m["role"] for m in r.messages] == ["user", "assistant", "user", "assistant"]
    assert r.messages[2]["content"] == "again" and r.env_info["env_reward"] == 1.0
    # the observation's template tokens are masked, the model's turns are not
    assert sum(r.mask) == r.completion_tokens < len(r.token_ids)


def test_a_tool_env_lays_out_its_tools_and_runs_the_parsed_call(vf_package, renderer):
    spec = _spec(vf_package, "tool", max_turns=4)
    task = dataset_tasks(spec, n=1)[0]
    call = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "3+4"}}\n</tool_call>'
    r = _episode(renderer, spec, task, call, "7")
    assert '"name": "calculate"' in renderer.tokenizer.decode(r.prompt_ids)
    assert r.finish_reason == "env_done" and r.num_turns == 2 and r.num_tool_calls == 1
    tool = r.messages[2]
    assert (
        tool["role"] == "tool"
        and tool["content"] == "7"
        and tool["tool_call_id"] == r.messages[1]["tool_calls"][0]["id"]
    )
    assert r.env_info["env_reward"] == 1.0 and r.env_info["tool_parse_fail"] == 0


def test_cli_register_and_ingest(vf_package, tmp_path, capsys):
    from rldata import open_store
    from rldata.cli import main

    st = str(tmp_path / "store")
    assert main(["--store", st, "env", "register", "add", "--verifiers", vf_package, "--max-turns", "2"]) == 0
    assert main(["--store", st, "ingest", "--env", "add", "--n", "2"]) == 0
    store = open_store(st)
    (spec,) = store.sql("SELECT spec FROM environments WHERE env_id = 'add'").fetchall()[0]
    assert json.loads(spec)["config"] == {"module": vf_package, "pass_reward": 1.0}
    rows = store.sql("SELECT prompt, answer, env_id FROM tasks ORDER BY prompt").fetchall()
    assert rows == [("3+4=", "7", "add"), ("9+2=", "11", "add")]
    capsys.readouterr()
    assert main(["--store", st, "env", "register", "bad", "--verifiers", "no_such_vf_module"]) != 0
    assert "does not load" in capsys.readouterr().err
