"""The calculator environment on the hard arithmetic levels (4 and 5), before and after GRPO, against
the same model trained without the tool; plus multi-turn sampling throughput against single-turn.

Per seed, on a fresh store with the bundled train tasks of levels 4-5 and their held-out tasks:

1. held-out accuracy of the bundled model, N samples per task, single-turn and in the calculator
   environment (the same tasks, the same sampling params);
2. GRPO for ``--steps`` steps in the calculator environment, and (separately, same settings and seed)
   without it; held-out accuracy of each final checkpoint, each in the setting it was trained in;
3. the share of training episodes that called the tool, per step (metric ``episode/tool_call_frac``).

Throughput (first seed only): the base model's held-out sampling, single-turn against calculator
episodes: samples/s, generate rounds, and the engines' busy share of the episode time.

Run: ``python benchmarks/bench_calculator.py --seeds 0,1,2 --steps 40 --out benchmarks/bench_calculator.json``

Standard tool calls (issue 27 §2): ``--env calculator-tools --model DIR`` runs the same comparison with
the ``calculate`` tool in the chat template's ``tools`` and the model's own call format, for a chat
model whose template lays tools out (the Qwen2 fixture: ``python -m rldata.models.fixture --out DIR``;
it has random weights, so it needs pretraining on tool calls before the gain means anything), or the
bundled chat model ``sample_data/models/tiny-arith-chat``.  The no-tool runs send plain tasks as
``rldata sample`` does: through a chat model's template (``chat_template`` auto), the bare prompt for
tiny-arith; the chat model's numbers in RESULTS.md were measured before that, on the bare prompt.  The result keys stay ``calculator``;
``args.env`` says which protocol ran.
(prints one JSON object; RESULTS.md reports it with the machine's load).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def _store(root: Path, levels: tuple[int, ...], heldout: int):
    from rldata import open_store
    from rldata.sample_data.arith import load_bundled

    store = open_store(root)
    rows = []
    for split in ("train", "heldout"):
        part = [r for r in load_bundled(split) if r["metadata"]["level"] in levels]
        if split == "heldout":
            part = part[:heldout]
        rows += [
            {
                "task_id": f"{split[0]}{i:05d}",
                "source": "arith",
                "domain": "math",
                "prompt": r["prompt"],
                "answer": r["answer"],
                "category": r["category"],
                "metadata": json.dumps(r["metadata"]),
            }
            for i, r in enumerate(part)
        ]
    store.append("tasks", rows)
    return store


def _eval(store, model: str, *, env: str | None, n: int, seed: int) -> dict:
    from rldata.configs.sampling import SampleConfig, SamplingSpec
    from rldata.engine.core import model_identity
    from rldata.jobs.sample import run_sample

    spec = SamplingSpec(n=n, temperature=1.0, max_tokens=32, seed=seed)
    t0 = time.monotonic()
    s = run_sample(store, SampleConfig(sampling=spec, model=model, where="t.task_id LIKE 'h%'", env=env))
    wall = time.monotonic() - t0
    name = model_identity(model).name
    key = (
        ""
        if env is None
        else store.sql(
            "SELECT DISTINCT env_version FROM passrates WHERE env_version LIKE $1", params=[f"{env}@%"]
        ).fetchall()[0][0]
    )
    acc = store.sql(
        "SELECT avg(pass_rate) FROM passrates p WHERE model = $1 AND params_hash = $2 AND env_version = $3 "
        "AND task_id LIKE 'h%'",
        params=[name, s.params_hash, key],  # the job's: its chat_template resolved for the model
    ).fetchall()[0][0]
    return {
        "accuracy": round(float(acc), 4),
        "samples": s.samples,
        "wall_s": round(wall, 1),
        "samples_per_s": round(s.samples / max(s.seconds, 1e-9), 1),
        "episode_rounds": s.episode_rounds,
        "engine_busy_frac": s.engine_busy_frac,
        "tool_call_frac": s.tool_call_frac,
    }


def _train(
    store, out: Path, run_id: str, *, env: str | None, steps: int, seed: int, args, model: str
) -> dict:
    from rldata.trainer.config import TrainCommand, TrainConfig, TrainRun
    from rldata.trainer.driver import train

    cfg = TrainConfig(
        model=model,
        run_id=run_id,
        output_dir=str(out),
        steps=steps,
        seed=seed,
        prompts_per_step=args.prompts,
        n=args.group,
        max_tokens=32,
        lr=args.lr,
        micro_batch=args.prompts * args.group,
        max_resample=1,
        env=env,
    )
    t0 = time.monotonic()
    s = train(store, TrainCommand(train=cfg, run=TrainRun(where="task_id LIKE 't%'")))
    calls = store.sql(
        "SELECT step, value FROM metrics WHERE run_id = $1 AND name = 'episode/tool_call_frac' ORDER BY step",
        params=[run_id],
    ).fetchall()
    acc = store.sql(
        "SELECT step, value FROM metrics WHERE run_id = $1 AND name = 'accuracy' ORDER BY step",
        params=[run_id],
    ).fetchall()
    return {
        "checkpoint": s.checkpoint,
        "wall_s": round(time.monotonic() - t0, 1),
        "samples": s.samples,
        "tool_call_frac": [round(v, 4) for _, v in calls],
        "train_accuracy": [round(v, 4) for _, v in acc],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--eval-n", type=int, default=8)
    ap.add_argument("--heldout", type=int, default=120)
    ap.add_argument("--out", default=None)
    ap.add_argument("--model", default=None, help="default: the bundled model")
    ap.add_argument(
        "--env",
        default="calculator",
        choices=("calculator", "calculator-tools"),
        help="calculator: the tiny model's <calc> tag; calculator-tools: standard tool calls",
    )
    args = ap.parse_args()
    from rldata.engine.actors import ensure_ray
    from rldata.engine.core import default_model_path

    base = args.model or str(default_model_path())
    ensure_ray(None, num_cpus=4)  # engine + learner + verification slots (phases alternate, as in the demo)
    result = {"args": vars(args), "load_before": os.getloadavg(), "seeds": {}}
    for seed in [int(s) for s in args.seeds.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            store = _store(tmp / "store", (4, 5), args.heldout)
            r = {
                "base": {
                    "plain": _eval(store, base, env=None, n=args.eval_n, seed=seed),
                    "calculator": _eval(store, base, env=args.env, n=args.eval_n, seed=seed),
                }
            }
            tool = _train(
                store,
                tmp / "runs",
                f"calc-{seed}",
                env=args.env,
                steps=args.steps,
                seed=seed,
                args=args,
                model=base,
            )
            plain = _train(
                store,
                tmp / "runs",
                f"plain-{seed}",
                env=None,
                steps=args.steps,
                seed=seed,
                args=args,
                model=base,
            )
            r["trained"] = {
                "calculator": {
                    "train": tool,
                    "eval": _eval(store, tool["checkpoint"], env=args.env, n=args.eval_n, seed=seed),
                },
                "plain": {
                    "train": plain,
                    "eval": _eval(store, plain["checkpoint"], env=None, n=args.eval_n, seed=seed),
                },
            }
            r["gain_points"] = round(
                100
                * (
                    r["trained"]["calculator"]["eval"]["accuracy"] - r["trained"]["plain"]["eval"]["accuracy"]
                ),
                1,
            )
            result["seeds"][seed] = r
            print(json.dumps({seed: r}), flush=True)
    gains = [r["gain_points"] for r in result["seeds"].values()]
    result["gain_points"] = {"mean": round(sum(gains) / len(gains), 1), "min": min(gains), "max": max(gains)}
    result["load_after"] = os.getloadavg()
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
