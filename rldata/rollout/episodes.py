"""Rollouts against the engine actors: plain prompts (N samples sharing a prefill) and episodes.

:func:`generate` is the one entry point of ``rldata sample`` and the trainer.  Tasks without an
environment (or in a plain ``single-turn`` one) go to the engines as text prompts with ``n=N``,
as they always have.  Tasks in an environment run as episodes, all of them advanced together:
the episodes' next turns go to the engines in batched generate calls, two queued per engine on
large batches, so an engine generates one call's turns while the driver steps the previous call's
environments (in a thread pool: a slow tool does not hold the others up); the episodes that go on
join the next call.

An episode is a token sequence: the opening ids, then each assistant turn's generated ids (mask 1:
they enter the loss) and each observation's ids (mask 0: tool results and environment text never
do).  It ends with ``env_done`` (the environment said so), ``length`` (a turn hit its token cap,
or the episode its ``max_total_tokens`` / the engine's context), ``max_turns``, ``env_error`` (the
environment raised, hung or returned garbage: see :mod:`rldata.envs.guard`), or
``prompt_too_long``.  Its environment is closed in every case, also when generation itself fails.

Standard tool calls: an environment with ``tool_schemas`` (:class:`rldata.envs.tools.ToolEnv`) has
them rendered by the chat template's ``tools`` argument, and each assistant turn is parsed by the
spec's ``tool_parser`` (default: the one the template names).  The turn is stored with its
``tool_calls`` (ids ``call_id(turn, i)``); a call that does not parse, or names a tool the environment
does not have, is answered by a ``tool`` message ``error: ...`` and counted in the episode's info as
``tool_parse_fail``; the episode goes on.  A turn with a call that failed to parse keeps its whole text
as content, so the stored conversation shows what the model wrote.

Seeds: sample j of a task with request seed s uses seed s + j on its first turn (what vLLM gives
sample j of an ``n=N`` request), and a hash of (s, j, turn) after, so episodes are reproducible
whatever the batching.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rldata.configs.sampling import SamplingSpec
from rldata.envs.base import json_mapping_problem, make_env
from rldata.envs.guard import guarded_close, guarded_reset, guarded_step
from rldata.envs.tool_parsers import Parsed, ParseFailure, get_parser
from rldata.envs.tools import call_id
from rldata.errors import ConfigError
from rldata.heavy import ray
from rldata.rollout.bind import EnvBinding
from rldata.rollout.render import Renderer

__all__ = ["EpisodeStats", "Rollout", "generate", "run_episodes", "turn_seed"]


@dataclass(frozen=True)
class Rollout:
    """One sample: a single completion or a whole episode.  Duck-compatible with
    :class:`rldata.engine.core.Sample` (``text``, ``token_ids``, ``logprobs``, ...)."""

    text: str  # what the verifier checks: the completion, or the episode's last assistant turn
    token_ids: tuple[int, ...]  # everything after the prompt: generated turns and observations
    prompt_tokens: int
    completion_tokens: int  # tokens the model generated (the mask's ones)
    cumulative_logprob: float | None
    logprobs: tuple[float, ...] | None  # [len(token_ids)]; 0.0 at observation positions
    finish_reason: str
    prompt_ids: tuple[int, ...] | None = None  # None: the task's prompt text, tokenized as the engine did
    mask: tuple[int, ...] | None = None  # [len(token_ids)] 1 = generated; None = all generated
    messages: tuple[dict, ...] | None = None  # the whole conversation (episodes only)
    num_turns: int = 1
    num_tool_calls: int = 0
    env_info: Mapping[str, Any] | None = None
    env_error: str | None = None  # the environment's error message (finish_reason env_error)

    @classmethod
    def from_sample(cls, s, *, prompt_ids: Sequence[int] | None = None) -> Rollout:
        """A plain completion; ``prompt_ids``: the templated prompt it was generated from (None: the
        task's prompt text, tokenized by the engine)."""
        return cls(
            text=s.text,
            token_ids=tuple(s.token_ids),
            prompt_tokens=s.prompt_tokens,
            completion_tokens=s.completion_tokens,
            cumulative_logprob=s.cumulative_logprob,
            logprobs=s.logprobs,
            finish_reason=s.finish_reason,
            prompt_ids=tuple(prompt_ids) if prompt_ids is not None else None,
            num_turns=0 if s.finish_reason == "prompt_too_long" else 1,
        )


@dataclass
class EpisodeStats:
    """Where an episode batch's time went: the engines' busy share is generate / wall; and how much
    of the turns' prompts the engines' prefix cache served (turn k+1's prompt is turn k's ids).
    Calls are queued while the driver steps environments, so generate_s and env_s overlap."""

    rounds: int = 0  # generate calls
    generate_s: float = 0.0  # wall time with at least one generate call queued or running
    env_s: float = 0.0  # driver time opening and stepping environments
    wall_s: float = 0.0
    requests: int = 0
    prompt_tokens: int = 0  # prompt ids sent with the turns that were generated
    cached_tokens: int = 0  # of which the prefix cache held the KV (vLLM's num_cached_tokens)

    @property
    def engine_busy_frac(self) -> float:
        return self.generate_s / self.wall_s if self.wall_s else 0.0

    @property
    def cache_hit_frac(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass
class _Episode:
    task: Mapping[str, Any]
    seed: int | None
    sample_idx: int
    env: Any = None
    prompt_ids: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    turns: int = 0
    info: dict = field(default_factory=dict)
    finish: str | None = None
    error: str | None = None
    closed: bool = False
    tools: list[dict] | None = None  # the environment's tool schemas (standard tool calls)
    parser: str | None = None  # the tool-call parser its turns are read with
    parse_fail: int = 0  # calls that did not parse or named an unknown tool

    def result(self) -> Rollout:
        text = next((m["content"] for m in reversed(self.messages) if m["role"] == "assistant"), "")
        gen = sum(self.mask)
        lps = tuple(self.logprobs) if len(self.logprobs) == len(self.ids) else None
        calls = self.info.get("tool_calls", 0)
        if self.tools is not None:
            self.info.update(tool_parser=self.parser, tool_parse_fail=self.parse_fail)
        return Rollout(
            text=text,
            token_ids=tuple(self.ids),
            prompt_tokens=len(self.prompt_ids),
            completion_tokens=gen,
            cumulative_logprob=sum(lp for lp, m in zip(self.logprobs, self.mask) if m) if lps else None,
            logprobs=lps,
            finish_reason=self.finish or "max_turns",
            prompt_ids=tuple(self.prompt_ids),
            mask=tuple(self.mask),
            messages=tuple(self.messages),
            num_turns=self.turns,
            num_tool_calls=calls if isinstance(calls, int) and not isinstance(calls, bool) else 0,
            env_info=dict(self.info),
            env_error=self.error,
        )


def turn_seed(seed: int | None, sample_idx: int, turn: int) -> int | None:
    if seed is None:
        return None
    if turn == 0:
        return seed + sample_idx
    h = hashlib.sha256(f"{seed}|{sample_idx}|{turn}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x3FFFFFFF


def _split(engines: Sequence, n: int) -> list[tuple[int, int, int]]:
    k = len(engines)
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [(i, bounds[i], bounds[i + 1]) for i in range(k) if bounds[i + 1] > bounds[i]]


def _generate_plain(engines, tasks: list, seeds: list, spec: SamplingSpec, renderer) -> list[list[Rollout]]:
    """Plain tasks split over the engines, one call each (rldata.rollout.plain)."""
    # cycle: rldata.rollout.plain imports this module
    from rldata.rollout.plain import plain_rollouts, submit_plain

    calls = [
        submit_plain(engines[i], tasks[a:b], spec, seeds[a:b], renderer)
        for i, a, b in _split(engines, len(tasks))
    ]
    outs = ray.get([ref for ref, _ in calls])
    return [g for (_, ids), out in zip(calls, outs) for g in plain_rollouts(out, ids, spec.n)]


def _assistant_turn(ep: _Episode, text: str) -> tuple[dict, dict | None, list[dict]]:
    """(the stored assistant message, the message the environment steps on or None, tool error
    messages for calls that did not parse or name no tool of the environment)."""
    if ep.tools is None:
        msg = {"role": "assistant", "content": text}
        return msg, msg, []
    try:
        p = get_parser(ep.parser)(text)
    except Exception as e:  # noqa: BLE001 - a parser's bug is the model's failed call, not a crash
        p = Parsed(text, [], [ParseFailure(text[:200], f"the parser failed: {type(e).__name__}")])
    calls = [
        {"id": call_id(ep.turns, i), "name": c.name, "arguments": c.arguments} for i, c in enumerate(p.calls)
    ]
    known = {t["function"]["name"] for t in ep.tools}
    errors = [
        {"role": "tool", "content": f"error: the tool call does not parse: {f.reason}", "tool_call_id": None}
        for f in p.failures
    ]
    errors += [
        {
            "role": "tool",
            "content": f"error: unknown tool {c['name']!r}; tools: {', '.join(sorted(known))}",
            "tool_call_id": c["id"],
        }
        for c in calls
        if c["name"] not in known
    ]
    ep.parse_fail += len(errors)
    msg = {"role": "assistant", "content": text if p.failures else p.content}
    if calls:
        msg["tool_calls"] = calls
    good = [c for c in calls if c["name"] in known]
    if errors and not good:
        return msg, None, errors  # nothing for the environment to run: the errors go back to the model
    return msg, {**msg, "tool_calls": good}, errors


def _end(ep: _Episode, reason: str, *, timeout_s: float) -> None:
    ep.finish = reason
    if not ep.closed:
        ep.closed = True
        problem = guarded_close(ep.env, timeout_s=timeout_s)
        ep.info.update(problem)


def _open(ep: _Episode, binding: EnvBinding, renderer: Renderer, budget: int) -> None:
    """Build and reset the episode's environment, render its opening (with the environment's tools)."""
    es = binding.spec
    timeout = es.episode.step_timeout_s
    ep.env = make_env(es)
    g = guarded_reset(ep.env, ep.task, turn_seed(ep.seed, ep.sample_idx, 0), timeout_s=timeout)
    if g.finish_reason == "env_error":
        ep.closed, ep.finish, ep.error = True, "env_error", g.error
        ep.info.update(g.info)
        return
    ep.messages = list(g.messages)
    # an environment that scores episodes itself (OpenEnv: the reward so far) states it from the
    # start, so an episode cut short by length still carries the reward it has
    start = getattr(ep.env, "initial_info", None)
    if start and json_mapping_problem(start) is None:
        ep.info.update(start)
    schemas = getattr(ep.env, "tool_schemas", None)
    if schemas:
        ep.tools = [dict(t) for t in schemas]
        ep.parser = es.episode.tool_parser or renderer.default_tool_parser
        if ep.parser is None:
            raise ConfigError(
                f"environment {binding.env_id!r} declares tools but the model's chat template names "
                "no tool-call format: set tool_parser in its spec (hermes, llama3_json, mistral)",
                field="tool_parser",
            )
    ep.prompt_ids = renderer.opening(ep.messages, tools=ep.tools)
    if len(ep.prompt_ids) >= budget:
        _end(ep, "prompt_too_long", timeout_s=timeout)


def _advance(ep: _Episode, s, es, renderer: Renderer, budget: int) -> None:
    """Take one generated turn (an engine Sample) into the episode: its ids (mask 1), the parsed
    assistant message, the environment's step, and the observation's ids (mask 0) if it goes on."""
    timeout = es.episode.step_timeout_s
    if s.finish_reason == "prompt_too_long":  # no room left for another turn
        _end(ep, "length", timeout_s=timeout)
        return
    ep.turns += 1
    ep.ids += list(s.token_ids)
    ep.mask += [1] * len(s.token_ids)
    ep.logprobs += list(s.logprobs) if s.logprobs is not None else [0.0] * len(s.token_ids)
    msg, step_msg, errors = _assistant_turn(ep, s.text)
    ep.messages.append(msg)
    if s.finish_reason == "length":
        _end(ep, "length", timeout_s=timeout)
        return
    done, said = False, []
    if step_msg is not None:
        g = guarded_step(ep.env, step_msg, timeout_s=timeout)
        ep.info.update(g.info)
        if g.finish_reason == "env_error":
            ep.closed, ep.finish, ep.error = True, "env_error", g.error
            return
        done, said = g.done, list(g.messages)
    said += errors
    if done:
        ep.messages += said
        ep.closed, ep.finish = True, "env_done"
        return
    if ep.turns >= es.episode.max_turns:
        ep.messages += said
        _end(ep, "max_turns", timeout_s=timeout)
        return
    history = list(ep.messages)
    ep.messages += said
    obs = renderer.observation(history, said, tools=ep.tools)
    if len(ep.prompt_ids) + len(ep.ids) + len(obs) >= budget:
        # no room for another turn after it: the conversation keeps the observation, the
        # token sequence (what the learner trains on) stays within the budget
        _end(ep, "length", timeout_s=timeout)
        return
    ep.ids += obs
    ep.mask += [0] * len(obs)
    ep.logprobs += [0.0] * len(obs)


# Calls kept queued per engine: while the driver steps one call's episodes, the engine generates
# the next call's turns, so neither waits for the other.  Episode batches smaller than
# 2 * _MIN_CALL per engine go in one call per round (splitting them only shrinks the batches).
_DEPTH = 2
_MIN_CALL = 32


def _requests(eps: list[_Episode]) -> list[tuple[int, int]]:
    """(first episode, count) per engine request: the first turns of consecutive samples of one task
    with the same opening go as one request with n = count (sample j of it is seeded seed + j, which
    is each episode's own first-turn seed), so they share the request's processing; later turns go
    one request each."""
    out: list[tuple[int, int]] = []
    for k, ep in enumerate(eps):
        if out and ep.turns == 0 and ep.seed is not None:
            f, m = out[-1]
            head = eps[f]
            if (
                head.turns == 0
                and head.task is ep.task
                and head.seed == ep.seed
                and head.sample_idx + m == ep.sample_idx
                and head.prompt_ids == ep.prompt_ids
            ):
                out[-1] = (f, m + 1)
                continue
        out.append((k, 1))
    return out


def run_episodes(
    engines,
    tasks: Sequence[Mapping[str, Any]],
    seeds: Sequence[int | None],
    spec: SamplingSpec,
    binding: EnvBinding,
    renderer: Renderer,
    *,
    max_model_len: int,
    stats: EpisodeStats | None = None,
    pool_size: int = 8,
    first_index: Sequence[int] | None = None,
) -> list[list[Rollout]]:
    """``spec.n`` episodes per task in ``binding``'s environment; results in task order.  Task i's
    episodes are samples ``first_index[i] ..`` of it (default 0): a later round of adaptive sampling
    draws exactly the episodes a single N-sample draw would have.

    Scheduling: up to ``_DEPTH`` generate calls are queued on each engine.  When one returns, its
    episodes step their environments and every episode ready for its next turn goes out in one call
    to an engine with room, while the engines work through what is queued.  Each turn's seed is
    fixed by (seed, sample, turn), so the samples are the same however the turns are batched."""
    es = binding.spec
    timeout = es.episode.step_timeout_s
    stats = stats if stats is not None else EpisodeStats()
    t_start = time.monotonic()
    first = list(first_index) if first_index is not None else [0] * len(tasks)
    episodes = [
        _Episode(task=t, seed=s, sample_idx=o + j)
        for t, s, o in zip(tasks, seeds, first)
        for j in range(spec.n)
    ]
    budget = min(es.episode.max_total_tokens, max_model_len - 1)
    depth = _DEPTH if len(episodes) >= _DEPTH * _MIN_CALL * len(engines) else 1
    pool = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="rldata-env")
    inflight: dict[Any, tuple[int, list[_Episode], list[list[int]]]] = {}  # ref -> engine, episodes, prompts
    queued = [0] * len(engines)  # calls in flight per engine
    ready: list[_Episode] = []
    busy_since: float | None = None  # wall time with at least one call in flight: generate_s

    def dispatch() -> None:
        nonlocal busy_since
        free = [i for i in range(len(engines)) if queued[i] < depth]
        if not ready or not free:
            return
        batch, ready[:] = list(ready), []
        for j, a, b in _split(free, len(batch)):
            i, eps = free[j], batch[a:b]
            reqs = _requests(eps)
            prompts = [eps[k].prompt_ids + eps[k].ids for k, _ in reqs]
            caps = [budget - len(p) for p in prompts]
            seeds_now = [turn_seed(eps[k].seed, eps[k].sample_idx, eps[k].turns) for k, _ in reqs]
            counts = [m for _, m in reqs]
            ref = engines[i].generate_ids.remote(prompts, spec, seeds_now, caps, True, counts)
            inflight[ref] = (i, eps, [p for p, m in zip(prompts, counts) for _ in range(m)])
            queued[i] += 1
            stats.rounds += 1
            stats.requests += len(eps)
        if busy_since is None:
            busy_since = time.monotonic()

    try:
        # open in slices, so the first calls generate while the later episodes still open
        for part in [episodes[a:b] for _, a, b in _split(range(depth * len(engines)), len(episodes))]:
            t0 = time.monotonic()
            list(pool.map(lambda ep: _open(ep, binding, renderer, budget), part))
            stats.env_s += time.monotonic() - t0
            ready += [ep for ep in part if ep.finish is None]
            dispatch()
        while inflight:
            done, _ = ray.wait(list(inflight), num_returns=1)
            i, eps, prompts = inflight.pop(done[0])
            queued[i] -= 1
            outs = ray.get(done[0])
            if not inflight and busy_since is not None:
                stats.generate_s += time.monotonic() - busy_since
                busy_since = None
            ran = [(p, s) for p, s in zip(prompts, outs) if s.finish_reason != "prompt_too_long"]
            stats.prompt_tokens += sum(len(p) for p, _ in ran)
            stats.cached_tokens += sum(getattr(s, "cached_tokens", 0) for _, s in ran)
            t0 = time.monotonic()
            list(pool.map(lambda p: _advance(p[0], p[1], es, renderer, budget), zip(eps, outs)))
            stats.env_s += time.monotonic() - t0
            ready += [ep for ep in eps if ep.finish is None]
            dispatch()
    finally:
        if busy_since is not None:
            stats.generate_s += time.monotonic() - busy_since
        for ep in episodes:  # generation failed mid-way, or Ctrl-C: nothing stays open
            if ep.env is not None and not ep.closed:
                ep.closed = True
                guarded_close(ep.env, timeout_s=timeout)
        pool.shutdown(wait=False)
        stats.wall_s += time.monotonic() - t_start
    out: list[list[Rollout]] = []
    for i in range(len(tasks)):
        out.append([ep.result() for ep in episodes[i * spec.n : (i + 1) * spec.n]])
    return out


def generate(
    engines,
    tasks: Sequence[Mapping[str, Any]],
    seeds: Sequence[int | None],
    spec: SamplingSpec,
    *,
    bindings: Sequence[EnvBinding | None] | None = None,
    renderer: Renderer | None = None,
    max_model_len: int = 64,
    stats: EpisodeStats | None = None,
    first_index: Sequence[int] | None = None,
) -> list[list[Rollout]]:
    """``spec.n`` rollouts per task, in task order.  ``bindings[i]`` is task i's environment (None:
    a plain prompt, sent as text or through the chat template as ``spec.chat_template`` says, see
    rldata.rollout.plain; ``renderer`` renders it).  Tasks are grouped by environment: plain ones in one text-prompt call, each
    environment's in one episode batch.  ``first_index[i]``: the sample index task i's rollouts
    start at (adaptive rounds); vLLM seeds sample j of an n-request with seed + j, so request seed
    ``seed + first_index`` gives exactly samples first_index.. of a single N-sample request."""
    bindings = list(bindings) if bindings is not None else [None] * len(tasks)
    first = list(first_index) if first_index is not None else [0] * len(tasks)
    groups: dict[str | None, list[int]] = {}  # by env_id@version (specs hold dicts: not hashable)
    by_key: dict[str | None, EnvBinding | None] = {None: None}
    for i, b in enumerate(bindings):
        key = None if b is None or b.fast_single_turn else b.ledger_key
        by_key.setdefault(key, b)
        groups.setdefault(key, []).append(i)
    out: list[list[Rollout] | None] = [None] * len(tasks)
    for key, idx in groups.items():
        b = by_key[key]
        part_tasks, part_seeds = [tasks[i] for i in idx], [seeds[i] for i in idx]
        part_first = [first[i] for i in idx]
        if b is None:
            text_seeds = [None if s is None else s + o for s, o in zip(part_seeds, part_first)]
            res = _generate_plain(engines, part_tasks, text_seeds, spec, renderer)
        else:
            if renderer is None:
                raise ConfigError(
                    "episodes need a renderer (rldata.rollout.Renderer.for_model)", field="renderer"
                )
            res = run_episodes(
                engines,
                part_tasks,
                part_seeds,
                spec,
                b,
                renderer,
                max_model_len=max_model_len,
                stats=stats,
                first_index=part_first,
            )
        for i, r in zip(idx, res):
            out[i] = r
    return out  # type: ignore[return-value]


def info_json(r: Rollout) -> str | None:
    if r.env_info is None and r.env_error is None:
        return None
    d = dict(r.env_info or {})
    if r.env_error:
        d["error"] = r.env_error
    return json.dumps(d, sort_keys=True, default=str)
