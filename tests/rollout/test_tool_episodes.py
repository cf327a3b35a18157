"""Standard tool calls in episodes, on the Qwen2-architecture fixture's ChatML template (real
transformers tokenizer): the tools are in the prompt, the model's ``<tool_call>`` is parsed and
stored with its id, the result comes back as a tool message, and the ids stay exact: the episode's
ids are the whole conversation as the template renders it, the mask 1 exactly on the model's tokens.

Hand-built turns go through the same functions ``run_episodes`` uses for each engine turn."""

from __future__ import annotations

import json

import pytest

from rldata.engine.core import Sample
from rldata.envs import EnvSpec
from rldata.rollout import EnvBinding, Renderer
from rldata.rollout.episodes import _advance, _Episode, _open

BUDGET = 2000
SPEC = EnvSpec(env="calculator-tools", system_prompt="Use the tool.", max_turns=4)
BINDING = EnvBinding("calculator-tools", "1", SPEC)


@pytest.fixture(scope="module")
def renderer(qwen_model):
    return Renderer.for_model(str(qwen_model))


def _turn(renderer, text: str) -> Sample:
    tok = renderer.tokenizer
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
    return Sample(text, tuple(ids), 0, len(ids), None, None, "stop")


def _call(name: str, args: dict) -> str:
    return '<tool_call>\n{"name": "' + name + '", "arguments": ' + json.dumps(args) + "}\n</tool_call>"


def _episode(renderer, *texts):
    ep = _Episode(task={"prompt": "What is 12*7?"}, seed=0, sample_idx=0)
    _open(ep, BINDING, renderer, BUDGET)
    turns = []
    for text in texts:
        assert ep.finish is None
        s = _turn(renderer, text)
        turns.append(s.token_ids)
        _advance(ep, s, SPEC, renderer, BUDGET)
    return ep, turns


def test_the_template_names_hermes_and_lays_out_the_tools(renderer):
    assert renderer.default_tool_parser == "hermes"
    ep, _ = _episode(renderer)
    prompt = renderer.tokenizer.decode(ep.prompt_ids)
    assert (
        '"name": "calculate"' in prompt and "<tools>" in prompt and prompt.endswith("<|im_start|>assistant\n")
    )


def test_a_tool_call_episode_has_exact_ids_and_mask(renderer):
    ep, (t1, t2) = _episode(renderer, _call("calculate", {"expression": "12*7"}), "84")
    r = ep.result()
    assert r.finish_reason == "env_done" and r.num_turns == 2 and r.num_tool_calls == 1
    assert list(r.messages[2:]) == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c00010000", "name": "calculate", "arguments": '{"expression": "12*7"}'}],
        },
        {"role": "tool", "content": "84", "tool_call_id": "c00010000"},
        {"role": "assistant", "content": "84"},
    ]
    assert r.env_info["tool_parser"] == "hermes" and r.env_info["tool_parse_fail"] == 0
    obs = len(r.token_ids) - len(t1) - len(t2)
    assert r.token_ids == t1 + r.token_ids[len(t1) : len(t1) + obs] + t2
    assert r.mask == (1,) * len(t1) + (0,) * obs + (1,) * len(t2)
    # the learner's ids are the conversation as the template renders it (all of it, tool results
    # and their template tokens included), up to the final <|im_end|>
    tok = renderer.tokenizer
    whole = renderer.encode(renderer.text(r.messages, generation_prompt=False, tools=ep.tools))
    assert list(r.prompt_ids + r.token_ids) == whole[: -len(tok("\n", add_special_tokens=False)["input_ids"])]
    masked = tok.decode([t for t, m in zip(r.token_ids, r.mask) if not m])
    assert (
        masked
        == "\n<|im_start|>user\n<tool_response>\n84\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_bad_and_unknown_calls_come_back_as_tool_errors_and_the_episode_goes_on(renderer):
    bad, unknown = "<tool_call>{not json}</tool_call>", _call("nope", {})
    ep, turns = _episode(renderer, bad, unknown, "84")
    r = ep.result()
    assert r.finish_reason == "env_done" and r.num_turns == 3 and r.num_tool_calls == 0
    assert r.env_info["tool_parse_fail"] == 2
    a1, e1, a2, e2, a3 = r.messages[2:]
    assert a1 == {"role": "assistant", "content": bad}  # what the model wrote, kept whole
    assert e1["role"] == "tool" and e1["content"].startswith(
        "error: the tool call does not parse: not valid JSON"
    )
    assert a2["tool_calls"] == [{"id": "c00020000", "name": "nope", "arguments": "{}"}]
    assert e2 == {
        "role": "tool",
        "content": "error: unknown tool 'nope'; tools: calculate",
        "tool_call_id": "c00020000",
    }
    assert a3 == {"role": "assistant", "content": "84"}
    assert sum(r.mask) == sum(len(t) for t in turns) and r.completion_tokens == sum(r.mask)
    whole = renderer.encode(renderer.text(r.messages, generation_prompt=False, tools=ep.tools))
    assert list(r.prompt_ids + r.token_ids) == whole[:-1]


def test_a_template_without_a_tool_format_needs_a_parser_in_the_spec():
    from rldata.engine.core import default_model_path
    from rldata.errors import ConfigError

    tiny = Renderer.for_model(str(default_model_path()))
    assert tiny.default_tool_parser is None
    ep = _Episode(task={"prompt": "1+1="}, seed=0, sample_idx=0)
    with pytest.raises(ConfigError, match="set tool_parser in its spec"):
        _open(ep, BINDING, tiny, BUDGET)
    ep.env.close()
    spec = EnvSpec(env="calculator-tools", tool_parser="llama3_json")
    ep = _Episode(task={"prompt": "1+1="}, seed=0, sample_idx=0)
    _open(ep, EnvBinding("calculator-tools", "1", spec), tiny, BUDGET)
    assert ep.parser == "llama3_json"


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
def test_tool_episodes_run_on_the_real_engine(ray_session, qwen_model, renderer):
    """The Qwen2 fixture on vLLM (random weights: it rarely calls a tool, but every turn is parsed,
    and whatever it writes never crashes the episode)."""
    import ray

    from rldata.configs.sampling import SamplingSpec
    from rldata.engine.actors import start_engines
    from rldata.rollout import generate

    engines = start_engines(1, str(qwen_model), engine_kwargs={"max_model_len": 1024})
    try:
        tasks = [
            {"task_id": "t0", "prompt": "What is 12*7?", "domain": "math", "answer": "84", "tests": None}
        ]
        spec = EnvSpec(
            env="calculator-tools", system_prompt="Use the tool.", max_turns=3, max_total_tokens=1000
        )
        (group,) = generate(
            engines,
            tasks,
            [5],
            SamplingSpec(n=4, max_tokens=24),
            bindings=[EnvBinding("calculator-tools", "1", spec)],
            renderer=renderer,
            max_model_len=1024,
        )
    finally:
        for e in engines:
            ray.kill(e)
    assert len(group) == 4
    for r in group:
        assert r.finish_reason in ("env_done", "length", "max_turns")
        assert r.env_info["tool_parser"] == "hermes" and isinstance(r.env_info["tool_parse_fail"], int)
        assert '"name": "calculate"' in renderer.tokenizer.decode(r.prompt_ids)
        assert len(r.mask) == len(r.token_ids) == len(r.logprobs) and r.completion_tokens == sum(r.mask)
        assert [m["role"] for m in r.messages[:3]] == ["system", "user", "assistant"]
