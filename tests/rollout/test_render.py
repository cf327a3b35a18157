"""Rendering conversations into token ids with the bundled model's tokenizer (real transformers)."""

from __future__ import annotations

import pytest

from rldata.engine.core import default_model_path
from rldata.errors import RldataError
from rldata.rollout import DEFAULT_TEMPLATE, Renderer


@pytest.fixture(scope="module")
def renderer():
    return Renderer.for_model(str(default_model_path()))


def test_opening_is_the_plain_prompt_for_a_user_message(renderer):
    tok = renderer.tokenizer
    # the same ids the engine sees for the text prompt "12+7=" (bos, then one id per character)
    assert renderer.opening([{"role": "user", "content": "12+7="}]) == tok("12+7=")["input_ids"]


def test_an_opening_is_rendered_once_and_its_copy_is_the_callers(renderer):
    """A task's N episodes share their opening: rendered once; changing the list one episode got
    changes no other's; other messages or tools render anew."""
    msgs = [{"role": "user", "content": "5+6="}]
    first = renderer.opening(msgs)
    first.append(99)
    assert renderer.opening(msgs) == renderer.tokenizer("5+6=")["input_ids"]
    assert renderer.opening([{"role": "user", "content": "5+7="}]) != renderer.opening(msgs)
    calls = []
    real = renderer.text
    renderer.text = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        for _ in range(3):
            renderer.opening([{"role": "user", "content": "8+1="}])
    finally:
        del renderer.text
    assert len(calls) == 1


def test_observation_ids_are_the_template_delta(renderer):
    tok = renderer.tokenizer
    hist = [{"role": "user", "content": "3+4="}, {"role": "assistant", "content": "7"}]
    obs = [{"role": "user", "content": "1+1="}]
    ids = renderer.observation(hist, obs)
    assert ids == tok("1+1=", add_special_tokens=False)["input_ids"]  # no bos in the middle of a conversation
    # opening + generated turn (with its eos) + observation == the whole conversation rendered at once
    whole = renderer.opening([*hist, *obs])
    turn = tok("7", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert renderer.opening(hist[:1]) + turn + ids == whole


def test_default_template_renders_tool_messages():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    text = tok.apply_chat_template(
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": "A"},
            {"role": "tool", "content": "T"},
        ],
        tokenize=False,
        chat_template=DEFAULT_TEMPLATE,
    )
    assert text == "<s>SUA</s><tool>T</tool>"


def test_a_template_that_rewrites_earlier_turns_is_refused(renderer):
    class Rewriting(Renderer):
        def text(self, messages, *, generation_prompt, tools=None):
            return "".join(m["content"] for m in messages)[::-1]

    r = Rewriting(renderer.tokenizer)
    with pytest.raises(RldataError, match="earlier turns stay as they were"):
        r.observation(
            [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "c"}],
            [{"role": "user", "content": "d"}],
        )


def test_chatml_observation_keeps_what_the_template_writes_after_the_eos(qwen_model):
    """ChatML closes a turn with <|im_end|> and a newline.  The engine's ids end at <|im_end|>, so the
    observation must start with that newline: the episode's ids are then exactly the ids of the whole
    conversation rendered at once, as the model sees it at inference."""
    r = Renderer.for_model(str(qwen_model))
    tok = r.tokenizer
    call = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "3+4"}}\n</tool_call>'
    hist = [{"role": "user", "content": "3+4="}, {"role": "assistant", "content": call}]
    obs = [{"role": "tool", "content": "7"}]
    turn = r.encode(call) + [tok.convert_tokens_to_ids("<|im_end|>")]  # what the engine generated
    ids = r.opening(hist[:1]) + turn + r.observation(hist, obs)
    assert ids == r.opening([*hist, *obs])
    assert tok.decode(r.observation(hist, obs)).startswith("\n<|im_start|>user\n<tool_response>\n7")
