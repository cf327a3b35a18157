"""docs/environments.md, "Bring your verifiers 0.4 / OpenEnv 0.10 environment", followed literally:
the page's minimal OpenEnv MCP server (an ``MCPEnvironment`` with one tool that sets the reward and
ends the episode) is served as written and played through rldata, and the page's verifiers v1
environment is registered, ingested and played (hand-built turns through the rollout's functions)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rldata.engine.core import Sample
from rldata.envs import EnvSpec
from rldata.envs.catalog import openenv_spec, register_env, spec_of
from rldata.rollout import EnvBinding, Renderer
from rldata.rollout.episodes import _advance, _Episode, _open

DOC = Path(__file__).parents[2] / "docs" / "environments.md"
SECTION = "## Bring your verifiers 0.4 / OpenEnv 0.10 environment"


def _block(marker: str) -> str:
    """The python block of the section that contains ``marker``."""
    body = DOC.read_text().split(f"\n{SECTION}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", body, re.MULTILINE | re.DOTALL)
    (code,) = [textwrap.dedent(b) for b in blocks if marker in b]
    return code


@pytest.fixture(scope="module")
def renderer(qwen_model):
    return Renderer.for_model(str(qwen_model))


def _turn(renderer, text: str) -> Sample:
    tok = renderer.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
    return Sample(text, tuple(ids), 0, len(ids), None, None, "stop")


def _call(name, **args):
    return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(args)}}}\n</tool_call>'


def _play(renderer, spec, task, *texts):
    ep = _Episode(task=task, seed=0, sample_idx=0)
    _open(ep, EnvBinding("d", "1", spec), renderer, 4000)
    for text in texts:
        assert ep.finish is None, (ep.finish, ep.error)
        _advance(ep, _turn(renderer, text), spec, renderer, 4000)
    return ep.result()


@pytest.mark.slow  # the server takes a few seconds to start
def test_the_minimal_mcp_server_of_the_page_runs_through_rldata(tmp_path, store, renderer):
    pytest.importorskip("openenv.core.env_server.mcp_environment")
    from rldata.ingest.env import ingest_env
    from tests.envs.openenv_server import free_port, wait_up

    (tmp_path / "addenv.py").write_text(_block("class AddEnv(MCPEnvironment)"))
    port = free_port()
    serve = f"import sys, uvicorn; sys.path.insert(0, {str(tmp_path)!r}); "
    serve += f"uvicorn.run('addenv:app', host='127.0.0.1', port={port}, log_level='warning')"
    proc = subprocess.Popen(
        [sys.executable, "-c", serve], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc)
        row, _ = register_env(store, openenv_spec("add", url, mcp=True, max_turns=2, tool_parser="hermes"))
        spec = spec_of(row)
        assert [t["function"]["name"] for t in spec.config["tools"]] == ["submit"]
        assert ingest_env(store, "add", n=2, seed=3).added == 2
        task = store.sql("SELECT * FROM tasks ORDER BY prompt").pl().to_dicts()[0]
        a, b = map(int, re.match(r"What is (\d+)\+(\d+)\?", task["prompt"]).groups())
        right = _play(renderer, spec, task, _call("submit", answer=a + b))
        assert right.finish_reason == "env_done" and right.env_info["env_reward"] == 1.0
        wrong = _play(renderer, spec, task, _call("submit", answer=a + b + 1))
        assert wrong.finish_reason == "env_done" and wrong.env_info["env_reward"] == 0.0
    finally:
        proc.kill()
        proc.wait()


def test_the_verifiers_environment_of_the_page_registers_ingests_and_plays(tmp_path, renderer, monkeypatch):
    pytest.importorskip("verifiers.v1")
    from rldata import open_store
    from rldata.cli import main

    (tmp_path / "docsums.py").write_text(_block("class Sums(vf.Taskset"))
    monkeypatch.syspath_prepend(str(tmp_path))
    st = str(tmp_path / "store")
    argv = [
        "--store",
        st,
        "env",
        "register",
        "sums",
        "--verifiers",
        "someone/docsums",
        "--tool-parser",
        "hermes",
    ]
    assert main(argv) == 0
    assert main(["--store", st, "ingest", "--env", "sums", "--n", "200"]) == 0
    store = open_store(st)
    tasks = store.sql("SELECT * FROM tasks ORDER BY prompt").pl().to_dicts()
    assert [t["prompt"] for t in tasks] == ["12+30=", "21+21=", "7+8="]
    ((spec,),) = store.sql("SELECT spec FROM environments").fetchall()
    spec = EnvSpec.from_dict({k: v for k, v in json.loads(spec).items() if k != "name"})
    r = _play(renderer, spec, tasks[0], _call("add", a=12, b=30), "42")
    assert r.messages[2]["content"] == "42" and r.env_info["env_reward"] == 1.0
    assert r.env_info["rewards"] == {"correct": {"score": 1.0, "weight": 1.0}}


def test_the_tool_env_example_of_the_page_runs_as_written(monkeypatch):
    """ "Standard tool calling": the block runs on its own (its imports included) and the schema its
    text describes comes out of the signature and the docstring."""
    from rldata.envs.base import REGISTRY

    body = DOC.read_text().split("\n## Standard tool calling\n", 1)[1].split("\n## ", 1)[0]
    (code,) = [
        b for b in re.findall(r"^```python\n(.*?)^```", body, re.MULTILINE | re.DOTALL) if "ToolEnv" in b
    ]
    monkeypatch.setitem(REGISTRY, "weather", None)  # the example's registration is undone after the test
    ns: dict = {"__name__": "docs_tool_env"}
    exec(compile(code, "docs/environments.md", "exec"), ns)  # noqa: S102 (the page's own code; a missing import fails here)
    assert REGISTRY["weather"] is ns["Weather"]
    (schema,) = ns["Weather"]().tool_schemas
    fn = schema["function"]
    assert fn["name"] == "lookup" and fn["description"] == "Look up the weather of a city."
    assert fn["parameters"]["required"] == ["city"]
    assert fn["parameters"]["properties"]["units"]["enum"] == ["c", "f"]
