"""OpenEnv RFC 008's statistical validation level, computed from rldata's store.

RFC 008 (OpenEnv's environment auto-validation) reserves a level 4, "statistical", for checks that
need a model, many tasks and inference: its severity policy lists their ids and severities, and
OpenEnv ships no implementation of them.  A learnability profile (``rldata env profile``) has exactly
that data: N samples per task of one model, counted in the pass-rate ledger.  This module is the
arithmetic (no store, no sampling): :mod:`rldata.jobs.profile` gathers the rows and writes the results.

What each check measures here (the reward of a sample is its verdict, 1 when every verification
layer passed, else 0; range [0, 1], and the floor, the reward of an empty or answer-less completion,
is 0: rldata never scores a missing answer or a verifier error above a wrong one).  The bounds are
the policy's own (``bounds`` of ``severity-v2.json``); RFC 008 gives no numeric rule for level 4, so
the rule that applies each bound is rldata's, stated here:

- ``reward_reachability`` (fail): pass@k over tasks (the unbiased estimator, k = the smallest N among
  the tasks) must reach the floor plus ``min_floor_margin``: the model reaches the maximum reward on
  at least that share of tasks.
- ``difficulty_separation`` (fail): with two or more models measured on the same tasks (same sampling
  parameters, verifier and environment version), the mean pass rates of the best and the worst must
  differ by at least ``min_floor_margin``, with a paired 95% interval over tasks above 0.  With one
  model: skip, naming the command that measures another.
- ``headroom`` (warn): the best measured model's mean pass rate must stay below the maximum minus
  ``max_oracle_tolerance``: a model within the oracle tolerance of the maximum already solves it.
- ``variance_bound`` (fail): the population variance of the reward over identical inputs (samples of
  one task with the same completion and transcript), pooled over such groups weighted by their
  samples, must stay within ``max_variance_tolerance`` (reward-squared units, the bound RFC 008's
  runtime level applies to replays of one input).  No repeated input: skip.  The signal beside it,
  the variance of the pass rate across tasks, is reported with it.
- ``training_signal`` (advisory): predicted, not trained: the expected share of GRPO groups of G
  samples with mixed outcomes (exact from the counts) and the in-band share with its Wilson interval;
  pass/fail/skip follow the learnability card's verdict (learnable / not learnable / undetermined).
- ``adversarial_floor`` (fail): RFC 008's panel (null, degenerate, grader-injection, reward-search
  policies) is not run; what the store holds is the model's own degenerate samples (an empty
  completion or no extractable answer), which must score at the floor, and, when the ``lint_findings``
  table exists (``rldata lint``), its ``semantic.canary_floor`` findings (a no-op answer that passes)
  on these tasks, which fail the check.  Neither present: skip.
- ``gameability_gap`` (warn): always skip.  It needs a task-success signal independent of the reward
  on the same episodes; a profile's samples are scored by the reward alone.  ``rldata audit --verifier
  V --against labels`` measures the reward's false positives against imported labels.

The verdict is OpenEnv's rule (``openenv.validation.policy.apply_policy``, lane hub): fail when a check
of severity fail failed or any check errored; warn when a check was skipped or a warn/advisory check
failed; else pass.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rldata.envs.profile import card_from_rates
from rldata.stats import Z95, pass_at_k

__all__ = [
    "BOUNDS",
    "CHECKS",
    "FLOOR",
    "LANE",
    "LEVEL",
    "MAX_REWARD",
    "POLICY_VERSION",
    "SEVERITY",
    "Evidence",
    "mixed_group_share",
    "run_checks",
    "verdict",
]

POLICY_VERSION = "v2"  # OpenEnv's severity policy these ids, severities and bounds come from
LANE, LEVEL = "hub", 4  # statistical checks are operator-side (lane hub), level 4
BOUNDS = {"max_oracle_tolerance": 0.1, "min_floor_margin": 0.1, "max_variance_tolerance": 0.2}
SEVERITY = {
    "statistical.reward_reachability": "fail",
    "statistical.difficulty_separation": "fail",
    "statistical.headroom": "warn",
    "statistical.variance_bound": "fail",
    "statistical.training_signal": "advisory",
    "statistical.adversarial_floor": "fail",
    "statistical.gameability_gap": "warn",
}
FLOOR, MAX_REWARD = 0.0, 1.0  # a verdict's reward range; the floor is an answer-less sample's reward


@dataclass(frozen=True)
class Evidence:
    """What the checks read, gathered from the store by the profile job.

    ``rows``: ``(task_id, n, n_correct, n_error)``, the profiled model's ledger rows (the ones
    ``rldata filter`` reads); ``others``: model -> task_id -> ``(n, n_correct)``, other models' rows of
    the same slice; ``repeats``: ``(samples, passes)`` per group of identical inputs; ``degenerate``:
    ``(samples, passes)`` of the empty or answer-less samples; ``canary``: tasks with a
    ``semantic.canary_floor`` lint finding (None: no lint_findings table)."""

    rows: Sequence[tuple[str, int, int, int]]
    model: str = "model"
    others: Mapping[str, Mapping[str, tuple[int, int]]] = field(default_factory=dict)
    repeats: Sequence[tuple[int, int]] = ()
    degenerate: tuple[int, int] = (0, 0)
    canary: int | None = None
    group_size: int = 8


def _result(check: str, status: str, measured: dict, evidence: list[str], remediation: str | None = None):
    return {
        "check_id": f"statistical.{check}",
        "status": status,
        "measured": measured,
        "evidence": evidence,
        "remediation": remediation if status in ("fail", "error") else None,
    }


def _rates(rows) -> list[tuple[str, int, int]]:
    return [(t, int(n), int(k)) for t, n, k, _ in rows if n > 0]


def reward_reachability(ev: Evidence) -> dict:
    rows = _rates(ev.rows)
    if not rows:
        return _result("reward_reachability", "skip", {"tasks": 0}, ["no task has a verified sample"])
    k = min(n for _, n, _ in rows)
    pak = statistics.fmean(pass_at_k(n, c, k) for _, n, c in rows)
    solved = sum(c > 0 for _, _, c in rows)
    need = FLOOR + BOUNDS["min_floor_margin"]
    measured = {
        "k": k,
        "pass_at_k": pak,
        "pass_at_1": statistics.fmean(c / n for _, n, c in rows),
        "tasks": len(rows),
        "tasks_solved": solved,
        "floor": FLOOR,
        "min_floor_margin": BOUNDS["min_floor_margin"],
    }
    return _result(
        "reward_reachability",
        "pass" if pak >= need else "fail",
        measured,
        [f"pass@{k} {pak:.3f} over {len(rows)} tasks ({solved} solved at least once); needs >= {need:g}"],
        "the model reaches the maximum reward on too few tasks: profile a stronger model, add easier "
        "tasks, or check that the verifier can pass at all (rldata audit)",
    )


def _common(ev: Evidence) -> tuple[list[str], dict[str, dict[str, float]]]:
    """Tasks every model has a verified sample of, and each model's pass rate on them."""
    by = {ev.model: {t: c / n for t, n, c in _rates(ev.rows)}}
    for m, rows in ev.others.items():
        by[m] = {t: c / n for t, (n, c) in rows.items() if n > 0}
    tasks = sorted(set.intersection(*(set(r) for r in by.values())))
    return tasks, by


def difficulty_separation(ev: Evidence) -> dict:
    tasks, by = _common(ev)
    own = list(by[ev.model].values())
    spread = statistics.pstdev(own) if own else None
    if len(by) < 2:
        return _result(
            "difficulty_separation",
            "skip",
            {"models": {ev.model: statistics.fmean(own) if own else None}, "task_rate_sd": spread},
            [
                (
                    "one model measured on these tasks: profile a weaker or stronger one with the same "
                    "sampling parameters (rldata env profile NAME --model M) to measure the separation"
                )
            ],
        )
    means = {m: statistics.fmean(r[t] for t in tasks) if tasks else None for m, r in by.items()}
    if len(tasks) < 2:
        return _result(
            "difficulty_separation",
            "skip",
            {"models": means, "tasks": len(tasks)},
            ["fewer than 2 common tasks"],
        )
    order = sorted(means, key=lambda m: (-means[m], m))
    best, worst = order[0], order[-1]
    diffs = [by[best][t] - by[worst][t] for t in tasks]
    gap = statistics.fmean(diffs)
    half = Z95 * statistics.stdev(diffs) / math.sqrt(len(diffs))
    margin = BOUNDS["min_floor_margin"]
    measured = {
        "models": means,
        "tasks": len(tasks),
        "best": best,
        "worst": worst,
        "gap": gap,
        "gap_lo": gap - half,
        "gap_hi": gap + half,
        "min_floor_margin": margin,
        "task_rate_sd": spread,
    }
    return _result(
        "difficulty_separation",
        "pass" if gap >= margin and gap - half > 0 else "fail",
        measured,
        [
            (
                f"{best} {means[best]:.3f} vs {worst} {means[worst]:.3f} on {len(tasks)} tasks: gap {gap:.3f} "
                f"[{gap - half:.3f}, {gap + half:.3f}]; needs >= {margin:g} with the interval above 0"
            )
        ],
        "the environment does not tell the models apart: its tasks are all too easy or too hard for "
        "both, or the reward does not follow the answer",
    )


def headroom(ev: Evidence) -> dict:
    tasks, by = _common(ev)
    if not tasks:
        return _result("headroom", "skip", {"tasks": 0}, ["no task has a verified sample"])
    means = {m: statistics.fmean(r[t] for t in tasks) for m, r in by.items()}
    best = max(means, key=lambda m: (means[m], m))
    ceiling = MAX_REWARD - BOUNDS["max_oracle_tolerance"]
    measured = {
        "model": best,
        "pass_at_1": means[best],
        "headroom": MAX_REWARD - means[best],
        "max": MAX_REWARD,
        "max_oracle_tolerance": BOUNDS["max_oracle_tolerance"],
        "tasks": len(tasks),
    }
    return _result(
        "headroom",
        "pass" if means[best] < ceiling else "fail",
        measured,
        [f"best model {best}: mean reward {means[best]:.3f} on {len(tasks)} tasks; needs < {ceiling:g}"],
        "the best model already solves it within the oracle tolerance: add harder tasks",
    )


def variance_bound(ev: Evidence) -> dict:
    rates = [c / n for _, n, c in _rates(ev.rows)]
    signal = statistics.variance(rates) if len(rates) >= 2 else None
    groups = [(s, p) for s, p in ev.repeats if s >= 2]
    if not groups:
        return _result(
            "variance_bound",
            "skip",
            {"identical_input_groups": 0, "between_task_variance": signal},
            [
                (
                    "no input was sampled twice (no repeated completion of a task): the reward's variance on "
                    "identical inputs is not measured"
                )
            ],
        )
    samples = sum(s for s, _ in groups)
    pooled = sum(s * (p / s) * (1 - p / s) for s, p in groups) / samples  # population variance per group
    bound = BOUNDS["max_variance_tolerance"]
    measured = {
        "identical_input_groups": len(groups),
        "samples": samples,
        "reward_variance": pooled,
        "inconsistent_groups": sum(0 < p < s for s, p in groups),
        "max_variance_tolerance": bound,
        "between_task_variance": signal,
    }
    return _result(
        "variance_bound",
        "pass" if pooled <= bound else "fail",
        measured,
        [
            (
                f"reward variance {pooled:.4f} over {len(groups)} repeated inputs ({samples} samples, "
                f"{measured['inconsistent_groups']} scored both ways); needs <= {bound:g}"
            )
        ],
        "the same input gets different rewards: make the verifier or the environment's reward "
        "deterministic (rldata lint's semantic.verifier_determinism finds such tasks)",
    )


def mixed_group_share(n: int, c: int, g: int) -> float:
    """The probability that g of the n samples, drawn without replacement, hold both a pass and a
    fail: an unbiased estimate of 1 - p^g - (1-p)^g (g <= n)."""
    total = math.comb(n, g)
    return 1.0 - (math.comb(c, g) + math.comb(n - c, g)) / total


def training_signal(ev: Evidence) -> dict:
    rows = _rates(ev.rows)
    card = card_from_rates([c / n for _, n, c in rows])
    g = min([ev.group_size, *(n for _, n, _ in rows)]) if rows else ev.group_size
    mixed = statistics.fmean(mixed_group_share(n, c, g) for _, n, c in rows) if rows and g >= 2 else None
    measured = {
        "group_size": g,
        "mixed_group_share": mixed,
        "in_band": card["in_band"],
        "in_band_lo": card["in_band_lo"],
        "in_band_hi": card["in_band_hi"],
        "tasks": len(rows),
    }
    status = {"learnable": "pass", "not learnable by this model": "fail"}.get(card["verdict"], "skip")
    lines = [
        (
            f"predicted from pass rates (no training run): {mixed if mixed is None else f'{mixed:.1%}'} of "
            f"groups of {g} would have mixed outcomes; {card['verdict']}"
        )
    ]
    if status == "skip":
        lines.append("too few tasks to tell whether 5% of them are in the band [0.1, 0.9]")
    return _result(
        "training_signal",
        status,
        measured,
        lines,
        "almost every task is always or never solved by this model: nothing for GRPO to learn from",
    )


def adversarial_floor(ev: Evidence) -> dict:
    samples, passes = ev.degenerate
    measured = {
        "degenerate_samples": samples,
        "degenerate_passed": passes,
        "floor": FLOOR,
        "canary_findings": ev.canary,
    }
    lines = [
        "RFC 008's panel (null, degenerate, grader-injection, reward-search policies) is not run; "
        "measured: the model's own empty or answer-less samples"
        + (", and rldata lint's semantic.canary_floor findings" if ev.canary is not None else "")
    ]
    if ev.canary:
        lines.append(f"{ev.canary} task(s) pass a no-op answer (lint_findings, semantic.canary_floor)")
    if samples:
        lines.append(f"{passes} of {samples} degenerate samples passed; the floor is {FLOOR:g}")
    failed = bool(ev.canary) or passes > 0
    if not failed and not samples:
        lines.append(
            "not measured: no degenerate sample and no canary finding (run rldata lint for a no-op panel)"
        )
    return _result(
        "adversarial_floor",
        "fail" if failed else "pass" if samples else "skip",
        measured,
        lines,
        "a non-solving answer earns reward: fix the verifier or the environment's reward so that an "
        "empty or degenerate answer scores the floor",
    )


def gameability_gap(ev: Evidence) -> dict:
    return _result(
        "gameability_gap",
        "skip",
        {},
        [
            (
                "not measured: needs a task-success signal independent of the reward on the same episodes; "
                "a profile's samples are scored by the reward alone (rldata audit --against labels measures "
                "the reward's false positives against imported labels)"
            )
        ],
    )


CHECKS: dict[str, Callable[[Evidence], dict]] = {
    "statistical.reward_reachability": reward_reachability,
    "statistical.difficulty_separation": difficulty_separation,
    "statistical.headroom": headroom,
    "statistical.variance_bound": variance_bound,
    "statistical.training_signal": training_signal,
    "statistical.adversarial_floor": adversarial_floor,
    "statistical.gameability_gap": gameability_gap,
}


def run_checks(ev: Evidence) -> list[dict[str, Any]]:
    """Every statistical check, in RFC 008's order, each as OpenEnv's ``CheckResult`` fields; a check
    that raises is an ``error`` result naming the exception (the policy fails it closed)."""
    out = []
    for check_id, fn in CHECKS.items():
        t0 = time.perf_counter()
        try:
            r = fn(ev)
        except Exception as e:  # noqa: BLE001 - one broken check must not hide the others
            r = _result(
                check_id.split(".", 1)[1], "error", {}, [f"{type(e).__name__}: {e}"[:500]], "a bug in rldata"
            )
        r["duration_s"] = time.perf_counter() - t0
        out.append(r)
    return out


def verdict(results: Sequence[Mapping[str, Any]]) -> str:
    """OpenEnv's policy rule: fail when a fail-severity check failed or any check errored; warn when a
    check was skipped or a warn/advisory check failed; else pass."""
    out = "pass"
    for r in results:
        status, severity = r["status"], SEVERITY[r["check_id"]]
        if status == "error" or (status == "fail" and severity == "fail"):
            return "fail"
        if status in ("fail", "skip"):
            out = "warn"
    return out
