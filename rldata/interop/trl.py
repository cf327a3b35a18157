"""TRL reward functions that score with rldata's own verifiers, for ``rldata export --format trl``.

TRL's GRPOTrainer calls each reward function with the batch's ``prompts`` and ``completions`` and
every other column of the dataset as a keyword (a list, one value per completion).  The TRL export
writes the task's answer under ``solution`` (``-O answer_column``), its ``domain`` and its ``tests``,
so :func:`reward_fn` scores each completion exactly as ``rldata sample`` and ``rldata train`` do: the
domain's verifier (or the one named), the same answer extraction, the same rules.  A generic reward
such as ``trl.rewards.accuracy_reward`` reads answers its own way and disagrees with the pass rates
the selection was made from.

    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer
    from rldata.interop.trl import reward_fn

    trainer = GRPOTrainer(model=MODEL, reward_funcs=[reward_fn()], train_dataset=load_dataset(DIR)["train"], ...)

A reward is 1.0 when every layer of the verdict passed, else 0.0 (rldata's default reward); a
verifier error (a crash, a timeout) scores 0.0, as a wrong answer, never above one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rldata.errors import ConfigError
from rldata.verify.base import all_passed
from rldata.verify.run import resolve_verifier, verify_many

__all__ = ["completion_text", "reward_fn"]


def completion_text(completion: Any) -> str:
    """What the verifier reads: the completion text, or the last assistant turn's content of a
    conversational completion (TRL's ``[{"role": "assistant", "content": ...}, ...]``), as rldata
    verifies an episode's last assistant turn."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        for m in reversed(list(completion)):
            if isinstance(m, Mapping) and m.get("role") == "assistant":
                content = m.get("content")
                return content if isinstance(content, str) else ""
    return ""


def _prompt_text(prompt: Any) -> str | None:
    """The task's prompt for the verifier (the math verifier skips boxes quoted from it): the text, or
    a conversational prompt's last user turn (the task's ``prompt`` column in the store)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        for m in reversed(list(prompt)):
            if isinstance(m, Mapping) and m.get("role") == "user" and isinstance(m.get("content"), str):
                return m["content"]
    return None


def reward_fn(
    verifier: str | None = None,
    *,
    answer_column: str = "solution",
    timeout_s: float = 10.0,
    verdicts: list | None = None,
) -> Callable[..., list[float]]:
    """A TRL reward function scoring with rldata's verifier.

    ``verifier``: a registry name (math, exact, code, ...), a plugin's, or ``module:Class``; default:
    each row's ``domain`` verifier, as rldata picks it.  ``answer_column``: the export's answer column
    (``-O answer_column``).  ``timeout_s``: per distinct check.  ``verdicts``: a list the function
    appends each batch's verdicts to (one list of Verdicts per completion), for logging or checks.
    """
    if verifier is not None:
        verifier = resolve_verifier(verifier)  # an unknown name fails here, not in the first step
    if not answer_column:
        raise ConfigError("answer_column must be non-empty", field="answer_column")

    def rldata_reward(prompts, completions, **kwargs) -> list[float]:
        n = len(completions)
        if answer_column not in kwargs:
            raise ConfigError(
                f"the dataset has no {answer_column!r} column (the TRL export's answer column; "
                f"columns given: {', '.join(sorted(k for k in kwargs if not k.startswith(('trainer_', 'log_'))))})",
                field="answer_column",
            )
        answers = kwargs[answer_column]
        domains = kwargs.get("domain") or ["math"] * n
        tests = kwargs.get("tests") or [None] * n
        items = [
            (
                verifier or domains[i] or "math",
                completion_text(completions[i]),
                {
                    "answer": answers[i],
                    "tests": tests[i],
                    "prompt": _prompt_text(prompts[i]) if prompts else None,
                },
            )
            for i in range(n)
        ]
        out = verify_many(items, timeout_s=timeout_s)
        if verdicts is not None:
            verdicts.extend(out)
        return [1.0 if all_passed(v) else 0.0 for v in out]  # an error (None) scores as wrong

    rldata_reward.__name__ = f"rldata_{(verifier or 'verifier').replace(':', '_').replace('.', '_')}"
    return rldata_reward
