"""Rollout + update throughput of ``rldata train`` against TRL's GRPOTrainer, side by side, on CPU.

    python benchmarks/bench_grpo_vs_trl.py [--sizes tiny,scaled] [--steps 6] [--warmup 2]
                                           [--modes sync,async1,async2,async4]
                                           [--baseline-python /path/to/other/checkout/.venv/bin/python]
                                           [--learner-cpus 1] [--engines 1]

Same model, same prompts (the bundled arith tasks), same G=16, 4 prompts per step (batch 64), same
completion cap, temperature 1, one optimizer step per batch, no KL term, token-level loss, clip
[0.8, 1.28], exact-answer reward from rldata's math verifier.  rldata: one vLLM engine actor + one
learner actor on local Ray, dynamic sampling off (exactly 64 rollouts per step, as TRL), every
rollout written to a Delta store.  TRL: GRPOTrainer with transformers' generate, in one process.

Sizes: ``tiny`` = the bundled model (0.83M parameters), 16-token cap; ``scaled`` = the same
architecture at ~27M parameters (hidden 512, 8 layers), random init, 64-token answers (its eos is a
token the model cannot emit, so every answer runs to the cap in both systems).

Samples/s = 64 x timed steps / wall time of those steps (warm-up steps excluded: engine/Ray start,
first-call compilation).  TRL's wall runs from the end of the last warm-up step to the end of the
last step; rldata's is the sum of the timed steps' ``time/step`` (the learner loop's wall: waiting
for rollouts, the update, bookkeeping; the background write-back is not in it, as it is not on the
step's path; until 2026-12-02 the metrics rows' commit times were used, which batched commits no
longer give; the two agreed within 3%).  Each side runs in its own child process, one after the
other.  rldata runs once per mode: ``sync`` (the default trainer) and ``asyncK`` (``mode: async``,
max_staleness K); with ``--baseline-python`` each mode also runs with another checkout's rldata
(e.g. main's venv) right before, for a before/after side by side.
Also reported for rldata: the learners' and the engine's idle fractions, the mean time split per step
and the mean staleness.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "grpo_vs_trl"
G, PROMPTS = 16, 4
SIZES = {"tiny": 16, "scaled": 64}  # completion cap per size


def _tasks(n: int) -> list[dict]:
    from rldata.ingest import sample_path

    rows = [json.loads(x) for x in sample_path("arith").read_text().splitlines() if x.strip()]
    return rows[:n]


def scaled_model(*, stops: bool = False) -> Path:
    """~27M-parameter Llama with the tiny model's tokenizer, random init (seed 0).  ``stops=False``:
    eos = a token beyond the model's vocabulary, so generation always runs to the cap.  ``stops=True``:
    the same weights with the tokenizer's own eos, which the random model samples with probability
    ~1/27 per token, so completion lengths spread from 1 token to the cap (bench_async_varlen.py)."""
    path = WORK / ("varlen-llama" if stops else "scaled-llama")
    if (path / "config.json").exists():
        return path
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from rldata.jobs.pretrain_tiny import build_tokenizer

    tok = build_tokenizer()
    vocab = len(tok)
    if not stops:
        tok.add_special_tokens({"eos_token": "<eos64>"})  # id == vocab: never sampled
    eos = tok.eos_token_id
    tok.model_max_length = 128
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=eos,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = eos
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def model_for(size: str) -> str:
    from rldata.engine.core import default_model_path

    return str(default_model_path() if size == "tiny" else scaled_model())


# ---- rldata ----------------------------------------------------------------------------------------
def run_rldata(
    size: str, steps: int, warmup: int, mode: str = "sync", *, model: str | None = None, lengths: bool = False
) -> dict:
    """One rldata run; samples/s over the timed steps.  The wall time of the timed steps is the sum of
    their ``time/step`` (the learner loop's wall per step: waiting for rollouts, update, bookkeeping;
    the write-back runs in its own thread and is not in it), the same measure on every version of
    the trainer.  ``lengths``: also the completion lengths of the timed steps' rollouts."""
    from rldata import open_store
    from rldata.trainer.config import TrainCommand, TrainConfig, TrainRun
    from rldata.trainer.driver import train

    tmp = Path(tempfile.mkdtemp(dir=WORK))
    store = open_store(tmp / "store")
    store.append(
        "tasks",
        [
            {
                "task_id": f"b{i:04d}",
                "source": "arith",
                "domain": "math",
                "prompt": r["prompt"],
                "answer": r["answer"],
            }
            for i, r in enumerate(_tasks(PROMPTS * (steps + warmup)))
        ],
    )
    cfg = TrainConfig(
        model=model or model_for(size),
        run_id="bench",
        output_dir=str(tmp / "runs"),
        steps=steps + warmup,
        prompts_per_step=PROMPTS,
        n=G,
        max_tokens=SIZES[size],
        dynamic_sampling=False,
        micro_batch=PROMPTS * G,
        lr=1e-5,
        seed=0,
        cpus_per_learner=float(os.environ.get("BENCH_LEARNER_CPUS", "1")),
        engines=int(os.environ.get("BENCH_ENGINES", "1")),
        mode="sync" if mode == "sync" else "async",
        max_staleness=int(mode[5:] or 1) if mode != "sync" else 1,
        max_model_len=64 if size == "tiny" else 128,
    )
    t0 = time.monotonic()
    train(store, TrainCommand(train=cfg, run=TrainRun()))
    total = time.monotonic() - t0
    m = store.sql("SELECT step, name, value FROM metrics WHERE run_id = 'bench'").pl()
    timed = m.filter(m["step"] > warmup)
    step_s = timed.filter(timed["name"] == "time/step").sort("step")["value"].to_list()
    if len(step_s) != steps:
        raise RuntimeError(f"expected {steps} timed steps, the store has {len(step_s)}")
    wall = sum(step_s)

    def mean(name):
        v = timed.filter(timed["name"] == name)["value"]
        return float(v.mean()) if len(v) else None

    extra = {}
    if lengths:
        rows = store.sql(
            "SELECT step, completion_tokens FROM trajectories WHERE run_id = 'bench' AND step > $1",
            params=[warmup],
        ).pl()
        import polars as pl

        tokens = pl.col("completion_tokens")
        per = rows.group_by("step").agg(tokens.mean().alias("mean"), tokens.max().alias("max"))
        q = rows["completion_tokens"]
        extra["lengths"] = {
            "p10": float(q.quantile(0.1)),
            "p50": float(q.quantile(0.5)),
            "p90": float(q.quantile(0.9)),
            "min": int(q.min()),
            "max": int(q.max()),
            "mean": float(q.mean()),
            "at_cap_frac": float((q >= SIZES[size]).mean()),
            "step_mean": sorted(round(float(x), 1) for x in per["mean"]),
            "step_max": sorted(int(x) for x in per["max"]),
        }
    return {
        "samples_per_s": PROMPTS * G * steps / wall,
        "wall_s": wall,
        "step_s": step_s,
        "total_s": total,
        **extra,
        "learner_idle_frac": mean("learner_idle_frac"),
        "engine_idle_frac": mean("engine_idle_frac"),
        "staleness_mean": mean("staleness"),
        "response_len_mean": mean("response_len_mean"),
        "time_split_s": {
            k: mean(f"time/{k}")
            for k in (
                "step",
                "generate",
                "reward",
                "update",
                "sync",
                "writeback",
                "learner_idle",
                "engine_idle",
            )
        },
    }


# ---- TRL -------------------------------------------------------------------------------------------
def run_trl(size: str, steps: int, warmup: int) -> dict:
    import datasets
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rldata.verify import for_domain

    verifier = for_domain("math")
    lengths: list[float] = []

    def reward(completions, answer, completion_ids=None, **_):
        if completion_ids is not None:
            lengths.extend(len(c) for c in completion_ids)
        return [
            1.0 if all(v.passed for v in verifier.verify(c, {"answer": a})) else 0.0
            for c, a in zip(completions, answer)
        ]

    class Clock(TrainerCallback):
        def __init__(self):
            self.ends: list[float] = []

        def on_step_end(self, args, state, control, **kw):
            self.ends.append(time.monotonic())

    rows = [{"prompt": r["prompt"], "answer": r["answer"]} for r in _tasks(PROMPTS * (steps + warmup))]
    clock = Clock()
    out = tempfile.mkdtemp(dir=WORK)
    args = GRPOConfig(
        output_dir=out,
        use_cpu=True,
        per_device_train_batch_size=PROMPTS * G,
        num_generations=G,
        max_completion_length=SIZES[size],
        max_steps=steps + warmup,
        learning_rate=1e-5,
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.28,
        loss_type="dapo",
        temperature=1.0,
        num_iterations=1,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        disable_tqdm=True,
        seed=0,
    )
    t0 = time.monotonic()
    trainer = GRPOTrainer(
        model=model_for(size),
        reward_funcs=reward,
        args=args,
        train_dataset=datasets.Dataset.from_list(rows),
        callbacks=[clock],
    )
    trainer.train()
    wall = clock.ends[-1] - clock.ends[warmup - 1]
    timed_len = lengths[PROMPTS * G * warmup :]
    return {
        "samples_per_s": PROMPTS * G * steps / wall,
        "wall_s": wall,
        "total_s": time.monotonic() - t0,
        "response_len_mean": sum(timed_len) / len(timed_len) if timed_len else None,
    }


# ---- driver ----------------------------------------------------------------------------------------
def child(
    which: str, size: str, steps: int, warmup: int, mode: str = "sync", *, python=None, script=None
) -> dict:
    """One measurement in a fresh process: ``python`` (default: this interpreter) runs ``script``
    (default: this file) with ``--child``.  Another interpreter is how the baseline runs: its
    environment imports another checkout of rldata."""
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "TOKENIZERS_PARALLELISM": "false"}
    p = subprocess.run(
        [
            python or sys.executable,
            script or __file__,
            "--child",
            which,
            "--sizes",
            size,
            "--steps",
            str(steps),
            "--warmup",
            str(warmup),
            "--modes",
            mode,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if p.returncode:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def rldata_version(python: str | None) -> str:
    """The git commit of the rldata that ``python`` imports (for the record)."""
    code = "import rldata, subprocess, pathlib; d = pathlib.Path(rldata.__file__).parent; print(subprocess.run(['git', '-C', str(d), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip(), d)"
    # from a neutral directory: a checkout root on sys.path would shadow the installed rldata
    p = subprocess.run(
        [python or sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd="/"
    )
    return p.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="tiny,scaled")
    ap.add_argument("--steps", type=int, default=6, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--child", choices=["rldata", "trl"])
    ap.add_argument(
        "--modes", default="sync", help="rldata modes: sync, asyncK (K = max_staleness), comma-separated"
    )
    ap.add_argument(
        "--baseline-python",
        help="also run every rldata mode with this interpreter (e.g. another checkout's venv), side by side",
    )
    ap.add_argument("--no-trl", action="store_true", help="skip TRL (rldata rows only)")
    ap.add_argument("--out", default=str(HERE / "bench_grpo_vs_trl.json"), help="results file (accumulates)")
    ap.add_argument(
        "--learner-cpus",
        type=int,
        default=1,
        help="rldata learner's CPUs = torch threads (TRL uses torch's default, all cores)",
    )
    ap.add_argument(
        "--engines", type=int, default=1, help="rldata's vLLM engine actors (TrainConfig.engines)"
    )
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    if args.child:
        got = (
            run_rldata(args.sizes, args.steps, args.warmup, args.modes)
            if args.child == "rldata"
            else run_trl(args.sizes, args.steps, args.warmup)
        )
        print(json.dumps(got))
        return
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}  # sizes run separately accumulate
    for size in args.sizes.split(","):
        os.environ["BENCH_LEARNER_CPUS"] = str(args.learner_cpus)
        os.environ["BENCH_ENGINES"] = str(args.engines)
        trl = {"error": "skipped"} if args.no_trl else child("trl", size, args.steps, args.warmup)
        for mode in args.modes.split(","):
            load = [round(x, 2) for x in os.getloadavg()]
            base = None
            if args.baseline_python:
                base = child("rldata", size, args.steps, args.warmup, mode, python=args.baseline_python)
                base["version"] = rldata_version(args.baseline_python)
            ours = child("rldata", size, args.steps, args.warmup, mode)
            ours["version"] = rldata_version(None)
            ratio = (
                ours["samples_per_s"] / trl["samples_per_s"]
                if "error" not in ours and "error" not in trl
                else None
            )
            key = f"{size}/{mode}" + (f"/learner-cpus-{args.learner_cpus}" if args.learner_cpus != 1 else "")
            key += f"/engines-{args.engines}" if args.engines != 1 else ""
            results[key] = {
                "rldata": ours,
                "trl": trl,
                "ratio": ratio,
                "steps": args.steps,
                "warmup": args.warmup,
                "mode": mode,
                "load_avg_before": load,
                "load_avg_after": [round(x, 2) for x in os.getloadavg()],
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            }
            if base is not None:
                results[key]["baseline"] = base
                if "error" not in base and "error" not in trl:
                    results[key]["baseline_ratio"] = base["samples_per_s"] / trl["samples_per_s"]
            print(
                f"{size} {mode}: rldata {ours.get('samples_per_s', float('nan')):.1f} samples/s"
                + (f" (baseline {base.get('samples_per_s', float('nan')):.1f})" if base else "")
                + f", TRL {trl.get('samples_per_s', float('nan')):.1f} samples/s, ratio {ratio or float('nan'):.2f}; "
                f"learner idle {ours.get('learner_idle_frac') or float('nan'):.0%}, engine idle "
                f"{ours.get('engine_idle_frac') or float('nan'):.0%}; load {load}",
                flush=True,
            )
    out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
