"""``rldata train``: curriculum GRPO on Ray (vLLM engines + DDP learners), written back to the store."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.cli._common import FORMAT_OPT, Format, emit, lazy_store
from rldata.errors import RldataError

__all__ = ["register", "train"]

_CURRICULUM = typer.Option(
    None,
    "--curriculum",
    "-c",
    help="buckets.yaml (rldata stratify). Without it, tasks are drawn uniformly from the tasks table.",
)
_CONFIG = typer.Option(None, "--config", help="train.yaml with TrainConfig fields (options below win).")
_REWARD_SPEC = typer.Option(
    None,
    "--reward-spec",
    help="YAML reward spec (judge mix, length penalty, per-domain z-scores). Default: the verifier's 1/0.",
)
_OUT = typer.Option(None, "--out", help="Output dir; checkpoints go to OUT/RUN_ID/checkpoints/.")
_REWARD_SPEC = typer.Option(
    None,
    "--reward-spec",
    help="YAML reward spec (judge mix, length penalty, per-domain z-scores). Default: the verifier's 1/0.",
)
_TAG = typer.Option(
    None,
    "--tag",
    help="A name shared by runs of one setting (e.g. its seeds): "
    "rldata report --group-by tag draws their mean and spread.",
)
_TRACKER = typer.Option(
    "none",
    "--tracker",
    help="Also stream every metric to tensorboard, wandb "
    "(offline) or mlflow (file store); none: the store only.",
)
_TRACKER_DIR = typer.Option(
    None, "--tracker-dir", help="Where the tracker writes (default: OUT/RUN_ID/TRACKER)."
)


def train(
    ctx: typer.Context,
    curriculum: Path = _CURRICULUM,
    config: Path = _CONFIG,
    model: str = typer.Option(
        None, help="Starting HF model directory. Default: the bundled tiny-arith model."
    ),
    steps: int = typer.Option(None, help="Optimizer steps."),
    learners: int = typer.Option(None, "--learners", help="DDP learner actors (W)."),
    engines: int = typer.Option(None, "--engines", help="vLLM engine actors (K)."),
    out: Path = _OUT,
    resume: bool = typer.Option(
        False, "--resume", help="Continue RUN_ID (default: the newest run in OUT) from its newest checkpoint."
    ),
    run_id: str = typer.Option(None, "--run-id", help="Run id (default: a fresh one)."),
    sampler: str = typer.Option(
        None, "--sampler", help="Override the curriculum's sampler: mixture or uniform."
    ),
    uniform: bool = typer.Option(False, "--uniform", help="Shorthand for --sampler uniform (the baseline)."),
    where: str = typer.Option(
        None, "--where", help="Without --curriculum: SQL predicate over tasks to train on."
    ),
    eval_heldout: bool = typer.Option(
        False,
        "--eval-heldout",
        help="Evaluate on the bundled held-out split "
        "(metadata split = 'heldout') before, every --eval-every steps, and after.",
    ),
    eval_where: str = typer.Option(
        None, "--eval-where", help="SQL predicate over tasks naming the held-out set."
    ),
    eval_every: int = typer.Option(
        None, "--eval-every", help="Evaluate every K steps (0: before and after only)."
    ),
    checkpoint_every: int = typer.Option(
        None, "--checkpoint-every", help="Checkpoint every K steps (and at the end)."
    ),
    seed: int = typer.Option(None, help="Run seed (sampler, engines' per-request seeds)."),
    address: str = typer.Option(None, help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray)."),
    max_model_len: int = typer.Option(
        None, "--max-model-len", help="Engine context length (prompt + completion). Default: the model's."
    ),
    env: str = typer.Option(
        None,
        "--env",
        help="Train every task as an episode in this environment (NAME or NAME@VERSION; config "
        "env). Default: each task's own environment, else single-turn.",
    ),
    async_mode: bool = typer.Option(
        None,
        "--async/--sync",
        help="Async: engines generate the next batches while "
        "the learners update (config mode; default sync).",
    ),
    max_staleness: int = typer.Option(
        None,
        "--max-staleness",
        help="Async: generation runs at most K policy "
        "versions ahead of the learners (config max_staleness; default 1).",
    ),
    reward_spec: Path = _REWARD_SPEC,
    tag: str = _TAG,
    tracker: str = _TRACKER,
    tracker_dir: Path = _TRACKER_DIR,
    fmt: Format = FORMAT_OPT,
) -> None:
    """Train a policy with GRPO on verifiable rewards, following a curriculum.

    Every rollout (dropped groups too), its verifications, the pass-rate ledger of each policy
    version and per-step metrics land in the store; HF checkpoints land in OUT/RUN_ID/checkpoints.
    """
    import polars as pl

    from rldata.api import train as run_train

    # --uniform is the CLI's shorthand for --sampler uniform (two spellings of one parameter);
    # every other combination and the predicates are checked by the verb
    if uniform and sampler not in (None, "uniform"):
        raise RldataError("--uniform contradicts --sampler " + sampler)
    settings = {
        "curriculum": None if curriculum is None else str(curriculum),
        "model": model,
        "steps": steps,
        "num_learners": learners,
        "num_engines": engines,
        "output_dir": None if out is None else str(out),
        "run_id": run_id,
        "eval_every": eval_every,
        "checkpoint_every": checkpoint_every,
        "seed": seed,
        "reward_spec": None if reward_spec is None else str(reward_spec),
        "env": env,
        "mode": None if async_mode is None else ("async" if async_mode else "sync"),
        "max_staleness": max_staleness,
    }
    # a ConfigError names the field; main() puts the option that set it in front
    s = run_train(
        lazy_store(ctx),
        config=config,
        sampler="uniform" if uniform else sampler,
        where=where,
        resume=resume,
        eval_heldout=eval_heldout,
        eval_where=eval_where,
        address=address,
        max_model_len=max_model_len,
        tag=tag,
        tracker=tracker,
        tracker_dir=tracker_dir,
        **settings,
    )
    row = {
        "run_id": s.run_id,
        "model": s.model,
        "steps": s.steps,
        "last_step": s.last_step,
        "policy_version": s.policy_version,
        "samples": s.samples,
        "groups_kept": s.groups_kept,
        "groups_dropped": s.groups_dropped,
        "eval_first": s.eval_first,
        "eval_last": s.eval_last,
        "seconds": round(s.seconds, 1),
        "checkpoint": s.checkpoint,
    }
    emit(pl.DataFrame([row]), fmt)


def register(app: typer.Typer) -> None:
    app.command("train")(train)
