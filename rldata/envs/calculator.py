"""The calculator: a standard tool ``calculate(expression: str) -> str`` (environment
``calculator-tools``: the chat template lays it out, the model calls it in its own format), and the
legacy ``calculator`` environment of the bundled tiny model, whose protocol is a private tag.

``calculator``: the model may call a calculator tool by writing ``<calc>EXPRESSION</calc>``.

Each call in an assistant turn is evaluated (at most ``max_calls`` per turn) and its result comes
back as a ``tool`` message; a turn with no ``<calc>`` ends the episode, and the final answer is
verified as for any task.  A malformed call (unclosed tag, bad expression) gets an ``error: ...``
tool message, never a crash.

Expressions are numbers with ``+ - * / // % **``, unary ``+``/``-`` and parentheses, evaluated by a
walker over Python's ``ast`` (no ``eval``); sizes are bounded so no input can make it slow.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from rldata.envs.base import BaseEnv, Message, StepResult, register
from rldata.envs.tools import ToolEnv

__all__ = ["CalcError", "CalculatorEnv", "CalculatorToolEnv", "calculate", "evaluate", "format_number"]

MAX_CHARS = 200  # longest expression accepted
MAX_DEPTH = 100  # deepest operator tree (a chain of 100 additions fits in MAX_CHARS)
MAX_PARENS = 30  # the parser recurses on parentheses: bound them before parsing
MAX_ABS = 10**100  # bound on every intermediate result
MAX_EXPONENT = 400  # bound on |exponent| of **

_CALL = re.compile(r"<calc>(.*?)</calc>", re.DOTALL)
_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


class CalcError(ValueError):
    pass


def _check(x: float) -> int | float:
    if isinstance(x, float) and not math.isfinite(x):
        raise CalcError("result is not a finite number")
    if abs(x) > MAX_ABS:
        raise CalcError("result too large")
    return x


def _pow(a: float, b: float) -> int | float:
    if abs(b) > MAX_EXPONENT:
        raise CalcError(f"exponent larger than {MAX_EXPONENT}")
    if abs(a) > 1 and abs(b) * math.log10(abs(a)) > 100:  # decide before computing a huge power
        raise CalcError("result too large")
    if a == 0 and b < 0:
        raise CalcError("division by zero")
    r = a**b
    if isinstance(r, complex):
        raise CalcError("result is not a real number")
    return r


def _walk(node: ast.AST, depth: int) -> int | float:
    if depth > MAX_DEPTH:
        raise CalcError("expression nested too deeply")
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        v = _walk(node.operand, depth + 1)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and (type(node.op) in _OPS or isinstance(node.op, ast.Pow)):
        a, b = _walk(node.left, depth + 1), _walk(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            return _check(_pow(a, b))
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
            raise CalcError("division by zero")
        return _check(_OPS[type(node.op)](a, b))
    raise CalcError(f"not allowed: {type(node).__name__}")


def evaluate(expr: str) -> int | float:
    """The value of an arithmetic expression, or CalcError saying why not (``^`` means ``**``)."""
    if not isinstance(expr, str):
        raise CalcError("expression must be text")
    expr = expr.strip()
    if not expr:
        raise CalcError("empty expression")
    if len(expr) > MAX_CHARS:
        raise CalcError(f"expression longer than {MAX_CHARS} characters")
    # the parser itself recurses: bound the nesting before handing it the text
    if expr.count("(") > MAX_PARENS:
        raise CalcError("expression nested too deeply")
    try:
        tree = ast.parse(expr.replace("^", "**"), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise CalcError(f"cannot parse: {type(e).__name__}") from None
    try:
        return _walk(tree.body, 0)
    except (OverflowError, RecursionError) as e:
        raise CalcError(f"{type(e).__name__}") from None


def format_number(x: float) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return str(x) if isinstance(x, int) else format(x, ".12g")


@register("calculator")
class CalculatorEnv(BaseEnv):
    name = "calculator"
    version = "1"

    def __init__(self, *, system_prompt: str | None = None, max_calls: int = 4, **config: Any):
        super().__init__(system_prompt=system_prompt, **config)
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
            raise ValueError(f"max_calls must be a positive integer, got {max_calls!r}")
        self.max_calls = max_calls
        self.calls = 0

    def reset(self, task, seed):
        self.calls = 0
        return self.opening(task)

    def step(self, assistant_message: Message) -> StepResult:
        text = str(assistant_message.get("content") or "")
        if "<calc>" not in text:
            return StepResult(observations=[], done=True, info={"tool_calls": self.calls})
        exprs = _CALL.findall(text)
        if not exprs:  # an opening tag with no closing one
            obs = [_tool("error: malformed call, write <calc>EXPRESSION</calc>")]
        else:
            obs = [_tool(_answer(e)) for e in exprs[: self.max_calls]]
            if len(exprs) > self.max_calls:
                obs.append(_tool(f"error: at most {self.max_calls} calls per turn"))
            self.calls += min(len(exprs), self.max_calls)
        return StepResult(observations=obs, done=False, info={"tool_calls": self.calls})


def _answer(expr: str) -> str:
    try:
        return format_number(evaluate(expr))
    except CalcError as e:
        return f"error: {e}"


def _tool(content: str) -> Message:
    return {"role": "tool", "content": content}


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression and return its value.

    Args:
        expression: numbers with + - * / // % ** (or ^) and parentheses, e.g. "(12 + 7) * 3"
    """
    return _answer(expression)


@register("calculator-tools")
class CalculatorToolEnv(ToolEnv):
    """The calculator as a standard tool: ``calculate`` in the chat template's ``tools``."""

    name = "calculator-tools"
    version = "1"
    tools = (calculate,)
