"""Broken verifiers the lint's verifier rules must catch (used by path: module:Class)."""

from __future__ import annotations

import random

from rldata.verify import Verdict


class Coin:
    """Passes at random: the same completion, scored twice, may differ."""

    name = "coin"
    version = "1"
    in_process = True

    def verify(self, completion, task):
        ok = random.random() < 0.5
        return [Verdict(ok, float(ok), None)]


_SCORED: dict = {}  # (completion, prompt) -> times Flip scored it


class Flip:
    """Non-deterministic without chance: a completion passes the first time it is scored for a task,
    fails the second, and so on."""

    name = "flip"
    version = "1"
    in_process = True

    def verify(self, completion, task):
        key = (completion, task.get("prompt"))
        ok = _SCORED.get(key, 0) % 2 == 0
        _SCORED[key] = _SCORED.get(key, 0) + 1
        return [Verdict(ok, float(ok), None)]


class Anything:
    """Passes every completion, the empty one too."""

    name = "anything"
    version = "1"
    in_process = True

    def verify(self, completion, task):
        return [Verdict(True, 1.0, completion)]


class Nothing:
    """Fails every completion, the gold too."""

    name = "nothing"
    version = "1"
    in_process = True

    def verify(self, completion, task):
        return [Verdict(False, 0.0, completion)]
