"""`rldata demo`: the whole loop on the embedded model and the bundled arithmetic tasks.

ingest -> sample N=16 -> filter to the [0.1, 0.9] band -> stratify into buckets.yaml -> a short
curriculum GRPO run (held-out accuracy before and after) -> report (the selection page and the
run's training page).  Each stage calls the same
library function as its CLI command; the demo only chooses small sizes so the loop fits in a
few minutes on two CPU cores.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from rldata.configs.fields import at_least, config, nested, param, validate
from rldata.configs.sampling import ENVIRONMENTS, HELDOUT_WHERE, EngineConfig, SampleConfig, SamplingSpec
from rldata.console import log
from rldata.engine.pool import shared_pool
from rldata.errors import RldataError
from rldata.ingest import ingest, sample_path
from rldata.store.core import Store
from rldata.store.outputs import check_output_path

__all__ = ["ENV_QUERY", "NEXT_QUERIES", "DemoConfig", "run_demo"]

ENV_QUERY = (
    "SELECT step, round(avg((num_tool_calls > 0)::int), 3) AS tool_share, round(avg(reward), 3) AS reward "
    "FROM trajectories WHERE step IS NOT NULL AND env_id IS NOT NULL GROUP BY 1 ORDER BY 1"
)

NEXT_QUERIES = [
    # how pass rates spread over the generator's difficulty levels
    (
        "SELECT json_extract_string(t.metadata, '$.level') AS level, count(*) AS tasks, round(avg(p.pass_rate), 3) AS mean "
        "FROM passrates p JOIN tasks t USING (task_id) WHERE p.model NOT LIKE '%+%' GROUP BY 1 ORDER BY 1"
    ),
    # why tasks were dropped by the filter
    "SELECT selection, decision, reason, count(*) AS tasks FROM selections GROUP BY ALL ORDER BY 1, 4 DESC",
    # training reward per step and bucket, from the written-back rollouts
    (
        "SELECT step, bucket, round(avg(reward), 3) AS reward, count(*) AS rollouts FROM trajectories "
        "WHERE step IS NOT NULL GROUP BY ALL ORDER BY step, bucket LIMIT 30"
    ),
]


@config
class DemoConfig:
    """The demo loop: how many tasks, samples, steps and held-out tasks."""

    out: str = param("rldata-demo", help="Directory for buckets.yaml, the report and checkpoints.")
    tasks: int = param(
        1500, check=at_least(1), help="Bundled training tasks to sample (of 3,000), N per task."
    )
    # n: samples per task for the pass-rate ledger (and per held-out task); the seed: sampling's and
    # training's.  The demo picks the rest of the sampling (max_tokens by environment, temperature 1).
    sampling: SamplingSpec = nested(SamplingSpec, only=("n", "seed"))
    steps: int = param(60, check=at_least(1), help="GRPO steps.")
    eval_tasks: int = param(
        200, check=at_least(1), help="Held-out tasks evaluated before and after training."
    )
    env: str | None = param(
        None,
        choices=ENVIRONMENTS,
        strict=False,
        help="Run the loop in this environment: calculator-tools (standard tool calls: the tools in the chat "
        "template, Hermes <tool_call> JSON, with the bundled tiny-arith-chat model unless --model is given) "
        "or calculator (tiny-arith's legacy <calc> tag); sample, filter, train and evaluate as episodes. "
        "Default: single-turn.",
    )
    engine: EngineConfig = nested(EngineConfig, only=("model",))

    def __post_init__(self):
        validate(self)


def _stage(name: str):
    log(f"\n== {name}")
    return time.monotonic()


def run_demo(store: Store, cfg: DemoConfig | None = None) -> dict:
    """Run every stage; returns the artifacts' locations and headline numbers."""
    cfg = cfg if cfg is not None else DemoConfig()
    # the stages' modules load Ray, vLLM and torch: imported when the demo runs, not with rldata
    from rldata.engine.actors import default_engines, ensure_ray  # start-up: loads ray

    out = check_output_path(Path(cfg.out), store=store, name="out")  # before any stage runs
    n, seed, model = cfg.sampling.n, cfg.sampling.seed, cfg.engine.model
    if model is None and cfg.env == "calculator-tools":
        # start-up: `rldata tables` does not load rldata.engine.core
        from rldata.engine.core import chat_model_path

        # tiny-arith only knows the legacy <calc> tag; the chat model calls tools as Qwen models do
        model = str(chat_model_path())
    out.mkdir(parents=True, exist_ok=True)
    # One local Ray for every stage, with at least the logical CPUs the trainer schedules (engine,
    # learner, verification); the phases alternate, so two physical cores are enough.
    resources = ensure_ray(None, num_cpus=max(4, os.cpu_count() or 1))
    t_all = time.monotonic()
    times: dict[str, float] = {}

    t = _stage("1/6 ingest the bundled arithmetic tasks (train and held-out splits)")
    for name in ("arith", "arith-heldout"):
        s = ingest(store, sample_path(name))
        log(f"{name}: read {s.read}, added {s.added}, duplicates {s.duplicates}, rejected {s.rejected}")
    times["ingest"] = time.monotonic() - t

    t = _stage(
        f"2/6 sample N={n} per task with {model or 'the embedded model'} (vLLM on Ray), verify, "
        "fill the ledger"
    )
    where = (
        f"t.task_id IN (SELECT task_id FROM tasks WHERE source = 'arith' AND NOT ({HELDOUT_WHERE}) "
        f"ORDER BY task_id LIMIT {cfg.tasks})"
    )
    # a calculator episode's call turn is `<calc>EXPR</calc>` + eos (up to ~24 tokens on these tasks), or
    # tiny-arith-chat's `<tool_call>` JSON (up to ~27: the fixed JSON words are one token each)
    max_tokens = 8 if cfg.env is None else 32
    spec = dataclasses.replace(cfg.sampling, temperature=1.0, max_tokens=max_tokens)
    job = SampleConfig(sampling=spec, where=where, env=cfg.env, model=model)
    # One set of engines for the sample and the training run (its rollouts and its evaluations): their
    # model and engine settings agree, so training borrows what sampling started (as many engines as
    # the sampling job would start; the run takes the first)
    k = default_engines(resources, batches=-(-cfg.tasks // job.batch_tasks))
    with shared_pool(EngineConfig(model=model, engines=k), seed=seed) as pool:
        return _on_engines(store, cfg, job, pool, out=out, model=model, clocks=(t, t_all, times))


def _on_engines(store: Store, cfg: DemoConfig, job, pool, *, out: Path, model: str | None, clocks) -> dict:
    """Stages 2-6 on the pool's engines (``clocks``: stage 2's start, the demo's, the stage times)."""
    from rldata.jobs.sample import run_sample  # start-up: `rldata tables` does not load rldata.adaptive
    from rldata.ledger.select import Band, filter_store, stratify_store  # start-up: loads yaml
    from rldata.report.overview import gather  # start-up: loads yaml
    from rldata.report.page import render  # start-up: loads matplotlib
    from rldata.trainer.config import TrainCommand, TrainConfig  # start-up: loads yaml
    from rldata.trainer.driver import train  # start-up: loads ray, torch

    t, t_all, times = clocks
    n, seed, max_tokens = cfg.sampling.n, cfg.sampling.seed, job.sampling.max_tokens
    sampled = run_sample(store, job, engines=pool)
    if cfg.env is not None:
        log(
            f"episodes in {cfg.env}: {sampled.tool_call_frac or 0:.1%} called the tool; engines busy "
            f"{sampled.engine_busy_frac or 0:.0%} of the episode time"
        )
    times["sample"] = time.monotonic() - t

    t = _stage("3/6 filter: keep the tasks the model sometimes solves (pass rate in [0.1, 0.9])")
    result, _ = filter_store(
        store,
        name="demo-band",
        band=Band.parse("0.1,0.9"),
        model=sampled.model,
        params_hash=sampled.params_hash,
    )
    log(f"kept {result.kept} of {result.total} tasks; by reason: {result.counts}")
    if result.kept == 0:  # nothing to stratify or train on: say why instead of failing further on
        raise RldataError(
            f"the filter kept no task: {sampled.model} solved none of the {sampled.tasks} sampled tasks "
            "sometimes (pass rate in [0.1, 0.9]); the demo's loop needs a model that does (the "
            "ledger and samples are in the store)",
            field="model" if cfg.engine.model else None,
        )
    times["filter"] = time.monotonic() - t

    t = _stage("4/6 stratify the kept tasks into easy / medium / hard buckets")
    buckets_yaml = out / "buckets.yaml"
    # phases advance by promotion rules (a bucket's recent accuracy), the default stratify writes
    strat = stratify_store(store, selection="demo-band", quantiles=3, out=buckets_yaml, seed=seed)
    for w in strat.warnings:
        log(f"warning: {w}")
    log(f"wrote {buckets_yaml}")
    times["stratify"] = time.monotonic() - t

    t = _stage(f"5/6 train {cfg.steps} GRPO steps with the curriculum; held-out accuracy before and after")
    tcfg = TrainConfig.from_dict(
        {
            "curriculum": str(buckets_yaml),
            "steps": cfg.steps,
            "output_dir": str(out / "runs"),
            # 32 prompts x G=8 at lr 1e-4: the setting that raised held-out accuracy in the benchmarks
            # (smaller batches or lr >= 2e-4 made it noisier or lowered it; see benchmarks/RESULTS.md)
            "rollout": {"n": 8, "max_tokens": max_tokens, "seed": seed},
            "prompts_per_step": 32,
            "lr": 1e-4,
            "micro_batch": 256,
            "eval": {"heldout": True, "size": cfg.eval_tasks, "n": n},
            "env": cfg.env,
            "model": model,
        }
    )
    trained = train(store, TrainCommand(train=tcfg), engines=pool)
    times["train"] = time.monotonic() - t

    t = _stage("6/6 report")
    files = render(gather(store, "demo-band"), out / "report", store=store, runs=(trained.run_id,))
    times["report"] = time.monotonic() - t

    evals = trained.evals
    return {
        "store": store.root,
        "buckets_yaml": str(buckets_yaml),
        "checkpoint": trained.checkpoint,
        "report": str(files["html"]),
        "training_report": str(files["training_html"]),
        "train_run": trained.run_id,
        "model": sampled.model,
        "sampled_tasks": sampled.tasks,
        "samples": sampled.samples,
        "kept_tasks": result.kept,
        "heldout_accuracy_before": evals[0]["accuracy"] if evals else None,
        "heldout_accuracy_after": evals[-1]["accuracy"] if len(evals) > 1 else None,
        "env": cfg.env,
        "tool_call_frac_sampled": sampled.tool_call_frac,
        "seconds": {k: round(v, 1) for k, v in times.items()} | {"total": round(time.monotonic() - t_all, 1)},
    }
