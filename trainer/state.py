"""A training run's state: what one invocation of ``rldata train`` starts from and the loop advances.

:func:`plan_run` does every check that needs no Ray (run id, base model, checkpoints, held-out and
training tasks, environments), so a bad run fails before anything starts; :func:`restore` then
brings a resumed run back to its newest checkpoint (sampler, RNG, the store's rows after it).  The
driver's loop reads and mutates the one :class:`RunState` they build.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rldata.console import log
from rldata.curriculum import load as load_curriculum
from rldata.engine.core import ModelIdentity, model_context, model_identity
from rldata.errors import ConfigError, RldataError
from rldata.jobs.sample import override_verifier
from rldata.rollout import bind_envs, resolve_chat_template
from rldata.runs.core import new_run_id
from rldata.store.core import Store
from rldata.trainer import writeback as wb
from rldata.trainer.checkpoint import checkpoint_dir, latest_checkpoint, load_checkpoint
from rldata.trainer.config import TrainConfig, TrainRun
from rldata.trainer.evaluate import eval_task_ids
from rldata.trainer.rollout import build_sampler, load_reward

__all__ = ["RunState", "TrainSummary", "finished", "plan_run", "restore", "run_dir"]


@dataclass
class TrainSummary:
    run_id: str
    model: str  # base model's ledger name
    steps: int = 0  # steps done by this invocation
    last_step: int = 0
    policy_version: int = 0
    checkpoint: str | None = None
    samples: int = 0
    groups_kept: int = 0
    groups_dropped: int = 0
    evals: list = field(default_factory=list)  # [{"step", "model", "accuracy", "tasks"}]
    seconds: float = 0.0
    time: dict = field(default_factory=dict)  # seconds per phase, summed over steps

    def to_dict(self) -> dict:
        return asdict(self)


def run_dir(cfg: TrainConfig, run_id: str) -> Path:
    """OUTPUT_DIR/RUN_ID, absolute from the driver's working directory: the learners write into it
    from Ray workers, whose working directory is the one the Ray cluster started in (a job attached to
    a running cluster, a notebook that changed directory)."""
    return (Path(cfg.output_dir) / run_id).absolute()


@dataclass
class RunState:
    """What the training loop reads and advances; one per invocation, built by the driver."""

    run_id: str
    base: ModelIdentity  # the base model (the reference policy, and the ledger names' prefix)
    ckpt_root: Path  # OUTPUT_DIR/RUN_ID/checkpoints
    ckpt_path: Path | None  # the checkpoint this invocation resumed from; None = from the base model
    sampler: Any  # rldata.curriculum.CurriculumSampler
    tasks: dict  # task_id -> task row, the training tasks
    eval_ids: list  # held-out task ids ([] = no evaluation)
    bindings: dict  # task_id -> rldata.rollout.EnvBinding | None
    summary: TrainSummary
    start: int = 0  # the step the run starts after (the checkpoint's)
    version: int = 0  # policy version of the learners' weights; the loop raises it with each update
    pending: list = field(default_factory=list)  # outcomes the current version generated before a resume
    tracker: Any = None  # rldata.runs.trackers tracker, set once opened (it lives as long as the loop)
    flags: dict = field(default_factory=dict)  # flagged tasks left out: how many, versions, per reason

    @property
    def checkpoint_extra(self) -> dict:
        """What every checkpoint records about the run (a resume checks the base revision)."""
        return {
            "run_id": self.run_id,
            "base_model": self.base.path,
            "base_name": self.base.name,
            "base_revision": self.base.revision,
        }


def _resolve_run_id(cfg: TrainConfig, resume: bool) -> str:
    if cfg.run_id:
        return cfg.run_id
    if not resume:
        return new_run_id("train")
    runs = [p for p in Path(cfg.output_dir).glob("*/checkpoints") if latest_checkpoint(p) is not None]
    if not runs:
        raise ConfigError(
            f"resume: no run with a checkpoint under {cfg.output_dir}; give run_id", field="resume"
        )
    run = max(runs, key=lambda p: latest_checkpoint(p).stat().st_mtime).parent.name
    log(f"resuming the most recent run under {cfg.output_dir}: {run}")
    return run


def plan_run(
    store: Store,
    cfg: TrainConfig,
    run: TrainRun,
    *,
    exclude: Sequence[str] = (),
    exclude_info: Mapping[str, Any] | None = None,
) -> tuple[TrainConfig, RunState]:
    """The run's config (with its run id, the engines' context and the rollout's chat template
    resolved) and state at step 0; every check here runs before Ray starts.  ``exclude``: flagged
    task ids never drawn (rldata.ledger.flags), ``exclude_info`` what the run records about them."""
    run_id = _resolve_run_id(cfg, run.resume)
    cfg = cfg.replace(run_id=run_id)
    base = model_identity(cfg.engine.model)
    if cfg.engine.max_model_len is None:
        cfg = cfg.replace(max_model_len=model_context(base.path))
    ckpt_root = run_dir(cfg, run_id) / "checkpoints"
    ckpt_path = latest_checkpoint(ckpt_root)
    if not run.resume and (
        ckpt_path is not None
        or store.sql("SELECT count(*) FROM trajectories WHERE run_id = $1", params=[run_id]).fetchall()[0][0]
    ):
        raise ConfigError(
            f"run {run_id} already has checkpoints or rows: resume it, or give another run_id", field="run_id"
        )
    if (
        run.resume
        and ckpt_path is None
        and not store.sql("SELECT count(*) FROM runs WHERE run_id = $1", params=[run_id]).fetchall()[0][0]
    ):
        raise ConfigError(
            f"resume: unknown run {run_id!r}: no checkpoint under {ckpt_root} and no row in runs",
            field="run_id",
        )
    eval_ids = eval_task_ids(store, cfg)
    load_reward(cfg)  # a bad reward spec fails before Ray starts
    if cfg.curriculum:
        load_curriculum(cfg.curriculum)  # a missing or bad file fails before the model's tokenizer loads

    # chat_template auto becomes on or off for the base model: the rollout's params hash (every
    # rollout and ledger row, the live prior's slice, the evaluations') says how plain tasks were sent
    cfg = cfg.replace(rollout=resolve_chat_template(cfg.rollout, base.path))
    sampler, tasks = build_sampler(
        store,
        cfg,
        sampler=run.sampler_name,
        tasks_where=run.where,
        tasks_selection=run.selection,
        exclude=[*eval_ids, *exclude],  # held-out tasks, and flagged ones (rldata.quality)
        prior_model=base.name,
    )
    flags = {"exclude": len(exclude), **(exclude_info or {})}
    if exclude:
        why = ", ".join(f"{k} {v}" for k, v in flags.get("flagged", {}).items())
        log(f"train: {len(exclude)} flagged task(s) never drawn (--include-flagged trains on them): {why}")
    if cfg.live.reprofile_after and not eval_ids:
        raise ConfigError(
            "live.reprofile_after: re-profiling when held-out accuracy plateaus needs a held-out set "
            "(eval.heldout, eval.where or eval.selection)",
            field="live.reprofile_after",
        )
    if cfg.live.reprofile_after and sampler.live is None:
        raise ConfigError(
            f"live.reprofile_after: sampler {sampler.sampler!r} reads no pass rates; use gaussian or a live:* sampler",
            field="live.reprofile_after",
        )

    bindings = bind_envs(store, tasks.values(), env=cfg.env)  # an unregistered env fails before Ray starts
    if cfg.verify.verifier:
        _check_override(store, cfg, bindings, eval_ids)
    state = RunState(
        run_id=run_id,
        base=base,
        ckpt_root=ckpt_root,
        ckpt_path=ckpt_path,
        sampler=sampler,
        tasks=tasks,
        eval_ids=eval_ids,
        bindings=bindings,
        summary=TrainSummary(run_id=run_id, model=base.name),
        flags=flags,
    )
    return cfg, state


def _check_override(store: Store, cfg: TrainConfig, bindings: dict, eval_ids: list[str]) -> None:
    """A verifier override names a verifier that loads, and no task (trained or held out) runs as
    an episode: an episode's verdict may be its environment's reward, which the override's name
    would mislabel (rldata sample refuses the same)."""
    override_verifier(cfg.verify.verifier)
    held = []
    if eval_ids:
        rows = store.sql(
            "SELECT task_id, env_id, env_version FROM tasks WHERE task_id IN (SELECT unnest($ids))",
            params={"ids": eval_ids},
        ).pl()
        held = list(bind_envs(store, rows.iter_rows(named=True), env=cfg.env).values())
    episodes = sum(b is not None for b in [*bindings.values(), *held])
    if episodes:
        raise ConfigError(
            f"verifier: an override applies to single-turn tasks; {episodes} of the run's tasks run as "
            "episodes (train or evaluate on single-turn tasks, or give no verifier)",
            field="verifier",
        )


def restore(store: Store, cfg: TrainConfig, state: RunState, *, resume: bool) -> None:
    """Bring ``state`` to its checkpoint (step, policy version, sampler state and RNG); on ``resume``,
    delete the run's rows written after it; restore the ledger row of a version that already generated."""
    run_id, base = state.run_id, state.base
    if state.ckpt_path is not None:
        ck = load_checkpoint(state.ckpt_path, restore_rng=True)
        if ck.extra.get("base_revision") not in (None, base.revision):
            raise RldataError(
                f"{state.ckpt_path} was trained from revision {ck.extra['base_revision']}, "
                f"not from {base.name}: resume with the run's original model",
                field="model",
            )
        state.sampler.load_state_dict(ck.curriculum_state)
        state.start, state.version = ck.step, ck.policy_version
    start, version = state.start, state.version
    if resume:
        # Async mode: an older version may have generated steps after the checkpoint too; its ledger
        # row is recounted from the samples that stay.
        older = [
            m
            for m in wb.models_after(store, run_id, start)
            if m != wb.ledger_model(base.name, run_id, version)
        ]
        gone = wb.discard_after(store, run_id, start, keep_versions_upto=version - 1)
        wb.rebuild_ledger(store, run_id, older, step=start, params_hash=cfg.rollout.params_hash)
        log(f"resuming {run_id} at step {start} (policy v{version}); discarded rows written after it: {gone}")
    state.pending = wb.pending_outcomes(store, run_id, wb.ledger_model(base.name, run_id, version), start)
    if (
        state.pending
    ):  # the checkpoint's version already generated a step (its update was skipped): restore its row
        wb.write_ledger(
            store,
            state.pending,
            model=wb.ledger_model(base.name, run_id, version),
            params_hash=cfg.rollout.params_hash,
            run_id=run_id,
        )
    state.summary.last_step, state.summary.policy_version = start, version
    if state.ckpt_path is not None:
        _restore_totals(store, state)


def _restore_totals(store: Store, state: RunState) -> None:
    """A resumed run's summary counts the steps before its checkpoint too (their rows stay): samples
    and groups from their metrics, and the held-out evaluations made up to it."""
    rows = store.sql(
        "SELECT name, step, value FROM metrics WHERE run_id = $1 AND step <= $2 AND name IN "
        "('samples', 'groups_kept', 'groups_dropped', 'eval/accuracy') ORDER BY step, name",
        params=[state.run_id, state.start],
    ).fetchall()
    s = state.summary
    for name, step, value in rows:
        if name == "eval/accuracy":  # evaluate() names a checkpoint's samples by its directory
            model = state.base.name if step == 0 else str(checkpoint_dir(state.ckpt_root, step).resolve())
            s.evals.append({"step": step, "model": model, "accuracy": value, "tasks": len(state.eval_ids)})
        else:
            setattr(s, name, getattr(s, name) + int(value))


def finished(store: Store, cfg: TrainConfig, state: RunState) -> TrainSummary | None:
    """The stored summary of a run that is already done (its row says so and its newest checkpoint is
    at the last step): what ``--resume`` of it returns, doing nothing (``steps`` 0)."""
    import json

    ckpt = state.ckpt_path
    if ckpt is None or int(ckpt.name.split("-")[1]) < cfg.steps:
        return None
    row = store.sql(
        "SELECT summary FROM runs WHERE run_id = $1 AND status = 'done'", params=[state.run_id]
    ).fetchall()
    try:
        stored = json.loads(row[0][0]) if row else None
        names = set(TrainSummary.__dataclass_fields__)
        summary = TrainSummary(**{k: v for k, v in stored.items() if k in names})
    except (TypeError, ValueError, AttributeError):
        return None
    summary.steps, summary.seconds, summary.time = 0, 0.0, {}
    return summary
