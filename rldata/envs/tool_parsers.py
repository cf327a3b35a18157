"""Tool-call parsers: a model's completion text to its content and tool calls, by the model's format.

Each parser is a plain function ``parse(text) -> Parsed``, registered by name in :data:`PARSERS` (a
:class:`rldata.registry.Registry`: an installed package adds one with an ``rldata.tool_parsers``
entry point, and a ``module:function`` path names one with no registration):

- ``hermes`` (alias ``qwen``): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, once or
  more (Hermes 2 Pro, Qwen2.5, Qwen3);
- ``llama3_json``: a JSON object ``{"name": ..., "parameters": {...}}`` (``arguments`` accepted too)
  as the whole turn, optionally after ``<|python_tag|>``, several separated by ``;`` (Llama 3.1-3.3);
- ``mistral``: ``[TOOL_CALLS]`` then a JSON list of ``{"name", "arguments"}`` objects, or the newer
  ``[TOOL_CALLS]name[ARGS]{...}`` form, repeated.

The formats are vLLM's (``vllm/tool_parsers/{hermes,llama,mistral}_tool_parser.py``); its classes are
not reused because they need a server request object and swallow the reason a call fails to parse,
which the model gets back here as a tool error (``tool_parse_fail``).  A call that fails to parse is
a :class:`ParseFailure`, never an exception.

:func:`default_parser` picks a parser from a chat template's text: the template names its format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rldata.errors import RldataError
from rldata.registry import Registry

__all__ = ["PARSERS", "ParseFailure", "Parsed", "ParsedCall", "default_parser", "get_parser", "parser_names"]


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: str  # JSON text of an object


@dataclass(frozen=True)
class ParseFailure:
    text: str  # the call's text, as the model wrote it (cut to 200 characters)
    reason: str


@dataclass(frozen=True)
class Parsed:
    content: str  # the text outside the calls (what the assistant said)
    calls: list[ParsedCall] = field(default_factory=list)
    failures: list[ParseFailure] = field(default_factory=list)


def _call(obj: Any, raw: str, *, args_keys: tuple[str, ...] = ("arguments",)) -> ParsedCall | ParseFailure:
    if not isinstance(obj, dict):
        return ParseFailure(raw[:200], "a tool call must be a JSON object with 'name' and 'arguments'")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ParseFailure(raw[:200], "the call has no 'name' string")
    args: Any = next((obj[k] for k in args_keys if k in obj), {})
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return ParseFailure(raw[:200], f"the arguments of {name!r} are not JSON")
    if not isinstance(args, dict):
        return ParseFailure(raw[:200], f"the arguments of {name!r} must be a JSON object")
    try:
        return ParsedCall(name, json.dumps(args, ensure_ascii=False, allow_nan=False))
    except (ValueError, RecursionError):  # 1e999 reads as infinity, which JSON cannot carry
        return ParseFailure(raw[:200], f"the arguments of {name!r} are not valid JSON")


def _json(raw: str) -> tuple[Any, str | None]:
    try:
        return json.loads(raw), None
    except ValueError as e:
        return None, f"not valid JSON ({str(e).split(':')[0]})"
    except RecursionError:
        return None, "not valid JSON (nested too deeply)"


_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def parse_hermes(text: str) -> Parsed:
    start = text.find("<tool_call>")
    if start < 0:
        return Parsed(text)
    calls, failures = [], []
    for m in _HERMES.finditer(text, start):
        raw = m.group(1).strip()
        obj, err = _json(raw)
        if err and not m.group(0).endswith("</tool_call>"):
            # A last call left open is still a call when its JSON is whole (the model ended its turn
            # right after it, as vLLM's hermes parser accepts); cut off mid-JSON, it is a failure.
            failures.append(
                ParseFailure(raw[:200], "unclosed <tool_call> (write <tool_call>{...}</tool_call>)")
            )
            continue
        got = ParseFailure(raw[:200], err) if err else _call(obj, raw)
        (failures if isinstance(got, ParseFailure) else calls).append(got)
    return Parsed(text[:start].rstrip(), calls, failures)


def _json_objects(text: str) -> tuple[list[tuple[Any, str]], str | None]:
    """Consecutive JSON values in ``text`` separated by ``;`` or whitespace: [(value, raw)], error."""
    dec, out, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and (text[i].isspace() or text[i] == ";"):
            i += 1
        if i >= len(text):
            return out, None
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError as e:
            return out, f"not valid JSON ({str(e).split(':')[0]})"
        except RecursionError:
            return out, "not valid JSON (nested too deeply)"
        out.append((obj, text[i:end]))
        i = end


def parse_llama3_json(text: str) -> Parsed:
    tag = text.find("<|python_tag|>")
    body, content = (text[tag + len("<|python_tag|>") :], text[:tag].rstrip()) if tag >= 0 else (text, "")
    stripped = body.strip()
    if tag < 0 and not (stripped.startswith("{") and '"name"' in stripped):
        return Parsed(text)  # plain text: no call
    objs, err = _json_objects(stripped)
    calls, failures = [], []
    for obj, raw in objs:
        got = _call(obj, raw, args_keys=("parameters", "arguments"))
        (failures if isinstance(got, ParseFailure) else calls).append(got)
    if err:
        failures.append(ParseFailure(stripped[:200], err))
    return Parsed(content, calls, failures)


_MISTRAL_NEW = re.compile(r"\s*([A-Za-z_][\w.-]*)\[ARGS\]")


def parse_mistral(text: str) -> Parsed:
    start = text.find("[TOOL_CALLS]")
    if start < 0:
        return Parsed(text)
    content, calls, failures = text[:start].rstrip(), [], []
    for chunk in text[start:].split("[TOOL_CALLS]")[1:]:
        m = _MISTRAL_NEW.match(chunk)
        if m:  # [TOOL_CALLS]name[ARGS]{...}
            objs, err = _json_objects(chunk[m.end() :])
            if err or len(objs) != 1:
                failures.append(
                    ParseFailure(chunk.strip()[:200], err or "expected one JSON object after [ARGS]")
                )
                continue
            got = _call({"name": m.group(1), "arguments": objs[0][0]}, chunk)
        else:  # [TOOL_CALLS][{"name": ..., "arguments": ...}, ...]
            objs, err = _json_objects(chunk.strip())
            if err or len(objs) != 1 or not isinstance(objs[0][0], list):
                failures.append(
                    ParseFailure(
                        chunk.strip()[:200], err or "expected a JSON list of calls after [TOOL_CALLS]"
                    )
                )
                continue
            for obj in objs[0][0]:
                got = _call(obj, json.dumps(obj))
                (failures if isinstance(got, ParseFailure) else calls).append(got)
            continue
        (failures if isinstance(got, ParseFailure) else calls).append(got)
    return Parsed(content, calls, failures)


def _check_parser(obj: Any, what: str) -> Callable[[str], Parsed]:
    if not callable(obj):
        raise RldataError(f"tool parser {what} is not a function of the completion text")
    return obj


PARSERS: Registry = Registry(
    "tool parser", group="rldata.tool_parsers", paths=True, check=_check_parser, field="tool_parser"
)
PARSERS.register("hermes", parse_hermes)
PARSERS.register("qwen", parse_hermes)
PARSERS.register("llama3_json", parse_llama3_json)
PARSERS.register("mistral", parse_mistral)


def parser_names() -> list[str]:
    return sorted(PARSERS.names())


def get_parser(name: str) -> Callable[[str], Parsed]:
    """The parser ``name`` names: registered, an entry point, or a ``module:function`` path."""
    return PARSERS.resolve(name)


# what a chat template writes when it lays out tool calls, most specific first
_TEMPLATE_MARKS = (
    ("<tool_call>", "hermes"),
    ("[TOOL_CALLS]", "mistral"),
    ("<|python_tag|>", "llama3_json"),
    ("ipython", "llama3_json"),
)


def default_parser(template: str | None) -> str | None:
    """The parser a chat template's own tool-call format needs, or None when it has no tool format."""
    for mark, name in _TEMPLATE_MARKS:
        if template and mark in template:
            return name
    return None
