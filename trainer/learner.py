"""GRPO learners: one rank's model and optimizer (``Learner``), and W of them as DDP ranks in
long-lived Ray actors (``LearnerGroup``).

Why long-lived actors and not Ray Train's ``TorchTrainer``: one ``fit()`` costs ~20 s of start-up
here, so a fit per step is out, and one fit for the whole run would put the learners' loop, not
the driver, in charge of the engines.  The actors do what Ray Train's worker group does: Ray places
them (a placement group, one bundle per rank, a GPU each when there are GPUs), rank 0 publishes a
rendezvous address, and every rank calls ``torch.distributed.init_process_group`` (gloo on CPU,
NCCL on GPU) and wraps its model in ``DistributedDataParallel``.  The collectives are torch's.

Every rank receives the whole global batch (one object in Ray's store) and takes its shard, so it
knows the global loss denominator: each rank's loss is its share of one global mean, multiplied by
W because DDP averages gradients over ranks.  W learners then take the same step as one learner
on the same batch.
"""

from __future__ import annotations

import contextlib
import os
import socket
from datetime import timedelta
from pathlib import Path
from typing import Self

import ray
import torch
import torch.distributed as dist
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rldata.engine.actors import node_cores
from rldata.engine.weights import FlatWeights
from rldata.errors import RldataError
from rldata.trainer.checkpoint import (
    ADAPTER_DIR,
    load_model,
    load_optimizer,
    load_sharded_state,
    save_hf_tensors,
    save_model_state,
    save_sharded_state,
)
from rldata.trainer.config import TrainConfig
from rldata.trainer.loss import grpo_loss
from rldata.trainer.policy import RolloutBatch, token_logprobs
from rldata.trainer.sharding import (
    autocast,
    frozen_dtype,
    full_tensor,
    hf_model,
    hold_frozen,
    prepare_model,
    shard_model,
    stream_adapter,
    stream_hf_weights,
    weight_plan,
)

__all__ = ["Learner", "LearnerGroup", "combine_stats", "learner_threads"]

# Token means of grpo_loss's stats: each rank sums stat * tokens, combine_stats divides by all tokens.
_MEAN_STATS = ("clip_frac", "tis_frac", "clip_or_tis_frac", "kl", "ratio_mean", "rho_mean", "mismatch_kl")
# Per-rank sums that add up over ranks; combine_stats turns them into means.
_SUM_KEYS = ("tokens", *(f"{k}_sum" for k in _MEAN_STATS), "entropy_sum", "logp_sum", "loss", "sequences")


class Learner:
    """One rank: the policy, its AdamW optimizer and, when kl_coef > 0, a frozen reference model.

    With ``world_size > 1`` the caller must have initialised torch.distributed first.
    """

    def __init__(
        self,
        model_path: str | Path,
        cfg: TrainConfig,
        *,
        rank: int = 0,
        world_size: int = 1,
        device: str = "cpu",
        ref_path: str | Path | None = None,
        resume: bool = False,
    ):
        self.cfg, self.rank, self.world_size, self.device = cfg, rank, world_size, device
        self.model_path = Path(model_path)
        self.sharded = cfg.strategy == "fsdp"
        # Sharded and LoRA runs checkpoint with torch.distributed.checkpoint; DDP runs keep optimizer.pt.
        self.uses_dcp = self.sharded or cfg.lora is not None
        if self.sharded and not dist.is_initialized():
            raise RldataError(
                "strategy: fsdp needs torch.distributed initialised first (LearnerGroup does it)"
            )
        # A LoRA run resumes from the base model plus the checkpoint's adapter (the checkpoint's HF
        # weights have the adapter merged in already).
        base = ref_path if resume and cfg.lora is not None and ref_path is not None else model_path
        # A LoRA base is frozen: under bf16 compute it stays in the checkpoint's bf16 (peft keeps the
        # adapters, all that trains, in fp32).
        dtype = frozen_dtype(base, cfg) if cfg.lora is not None else torch.float32
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(
                cfg.rollout.seed
            )  # LoRA's initial A: the same on every rank (FSDP does not broadcast)
            self.model = prepare_model(hold_frozen(load_model(base, dtype=dtype, device=device)), cfg)
        if any(p.dtype != torch.float32 for p in self.model.parameters() if p.requires_grad):
            raise RldataError("a trained parameter is not fp32 (the optimizer keeps fp32 masters)")
        self.model.train()
        self.ddp = None
        if self.sharded:
            shard_model(self.model, cfg, device=device)
        elif world_size > 1:
            # DDP broadcasts rank 0's parameters at construction: all ranks start identical.  Frozen
            # ones (LoRA's base) are read from the same checkpoint on every rank, so they are left
            # out: broadcasting them writes into every weight (copy-on-write pages of the mmapped
            # checkpoint) through bucket buffers, ~2.5 models of transient memory for no change.
            frozen = [n for n, p in self.model.named_parameters() if not p.requires_grad]
            torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
                self.model, frozen
            )
            self.ddp = torch.nn.parallel.DistributedDataParallel(
                self.model,
                device_ids=[torch.device(device).index or 0] if device.startswith("cuda") else None,
            )
        self.ref = None
        if cfg.kl_coef > 0:
            # The reference is the model training started from, also when resuming from a checkpoint.
            ref = ref_path or model_path
            self.ref = hold_frozen(load_model(ref, dtype=frozen_dtype(ref, cfg), device=device))
            self.ref.eval().requires_grad_(False)
            if self.sharded:
                shard_model(self.ref, cfg, device=device)
        # Under LoRA only the adapters require grad: only they get AdamW moments.
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=cfg.lr,
            betas=cfg.adam_betas,
            weight_decay=cfg.weight_decay,
        )
        self.plan = weight_plan(self.model, cfg)
        if resume and self.uses_dcp:
            load_sharded_state(
                model_path, model=self.model, optimizer=self.optimizer, trainable_only=cfg.lora is not None
            )
        elif resume:
            load_optimizer(model_path, self.optimizer)

    # --- the update -----------------------------------------------------------------------------
    def step(self, batch: RolloutBatch) -> dict[str, float]:
        """One optimizer step on this rank's shard of the global batch; returns per-rank sums."""
        cfg = self.cfg
        denom = batch.global_denominator(cfg.agg)
        if cfg.micro_batch_tokens:
            micro = batch.shard_by_tokens(self.rank, self.world_size, cfg.micro_batch_tokens)
        else:
            micro = batch.shard(self.rank, self.world_size, cfg.micro_batch_rows)
        forward = self.ddp if self.ddp is not None else self.model
        sums = dict.fromkeys(_SUM_KEYS, 0.0) | {"rho_max": 0.0}
        self.optimizer.zero_grad(set_to_none=True)
        for i, mb in enumerate(micro):
            mb = _to(mb, self.device)
            # Gradients all-reduce only on the last micro-batch's backward.
            last = i == len(micro) - 1
            # FSDP reduce-scatters after every micro-batch: skipping it would keep a full unsharded
            # gradient on each rank until the last one, the memory sharding is there to save.
            no_sync = self.ddp.no_sync() if self.ddp is not None and not last else contextlib.nullcontext()
            with no_sync, autocast(cfg, self.device):
                logp, entropy = token_logprobs(
                    forward, mb.input_ids, mb.attention_mask, temperature=cfg.rollout.temperature
                )  # [b, l-1] each
                # The proximal policy is the weights this update starts from.  The batch is ONE
                # optimizer step, so those are exactly the weights of this forward: its detached
                # log-probs are what a separate no_grad pass would compute (bit-identical, tested),
                # at no extra cost.  The behaviour log-probs (the engine's) enter only through the
                # truncated weight min(pi_prox / pi_behav, C).
                prox = logp.detach()  # [b, l-1]
                ref = None
                if self.ref is not None:
                    with torch.no_grad():
                        ref, _ = token_logprobs(
                            self.ref,
                            mb.input_ids,
                            mb.attention_mask,
                            temperature=cfg.rollout.temperature,
                            with_entropy=False,
                        )  # [b, l-1]
                loss, st = grpo_loss(
                    logp,
                    prox,
                    ref,
                    mb.advantages,
                    mb.loss_mask,
                    behav_logp=mb.old_logp,
                    behav_cap=cfg.behav_weight_cap,
                    behav_weight=cfg.behav_weight,
                    eps_low=cfg.eps_low,
                    eps_high=cfg.eps_high,
                    kl_coef=cfg.kl_coef,
                    agg=cfg.agg,
                    denom=denom,
                )
                (loss * self.world_size).backward()
            n = float(st["tokens"])
            sums["tokens"] += n
            for k in _MEAN_STATS:
                sums[f"{k}_sum"] += float(st[k]) * n
            sums["rho_max"] = max(sums["rho_max"], float(st["rho_max"]) if n else 0.0)
            sums["entropy_sum"] += float((entropy * mb.loss_mask).sum())
            sums["logp_sum"] += float((logp.detach() * mb.loss_mask).sum())
            sums["loss"] += float(loss.detach())
            sums["sequences"] += float((mb.loss_mask.sum(dim=1) > 0).sum())
        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        sums["grad_norm"] = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        self.optimizer.step()
        return sums

    # --- weights and checkpoints ----------------------------------------------------------------
    def get_weights(self) -> list[tuple[str, torch.Tensor]]:
        """(name, tensor) pairs in HF naming, LoRA merged in, on CPU: what an engine's
        ``reload_weights`` takes.  Under FSDP a collective: every rank must call it."""
        return list(zip((e.name for e in self.plan.entries), stream_hf_weights(self.model, self.plan)))

    def flat_weights(self) -> FlatWeights | None:
        """The same tensors packed into one buffer: what the driver ships to the engines (one object
        for Ray to store and for the engine to read in place, instead of one pickle per tensor).

        Under FSDP every rank joins the per-tensor all-gathers and rank 0 packs each tensor into the
        buffer as it arrives, so its extra memory is one tensor; the other ranks return None."""
        stream = stream_hf_weights(self.model, self.plan)
        if self.rank != 0:
            for _ in stream:
                pass
            return None
        return FlatWeights.pack_stream(self.plan.specs, stream)

    def get_grads(self) -> list[tuple[str, torch.Tensor]]:
        """The last step's gradients (after the reduction and clipping), full and on CPU, for
        diagnostics (a collective under FSDP)."""
        return [(k, full_tensor(p.grad)) for k, p in self.model.named_parameters() if p.grad is not None]

    def save(self, path: str | Path) -> None:
        """Model (HF format), tokenizer files and optimizer state; all ranks call it.

        DDP: rank 0 writes the model and optimizer.pt.  FSDP or LoRA: every rank writes its shard of
        model and optimizer (torch.distributed.checkpoint, under ``dcp/``), and rank 0 writes the
        consolidated HF model (LoRA merged in) from tensors gathered one at a time, plus, for LoRA,
        the adapter in peft's format under ``adapter/``."""
        if not self.uses_dcp:
            if self.rank == 0:
                save_model_state(path, model=self.model, optimizer=self.optimizer, source_dir=self.model_path)
        else:
            save_sharded_state(
                path, model=self.model, optimizer=self.optimizer, trainable_only=self.cfg.lora is not None
            )
            self.save_hf(path)
            adapter = dict(stream_adapter(self.model, self.plan))
            if self.rank == 0 and self.cfg.lora is not None:
                from safetensors.torch import save_file

                (Path(path) / ADAPTER_DIR).mkdir(parents=True, exist_ok=True)
                save_file(adapter, str(Path(path) / ADAPTER_DIR / "adapter_model.safetensors"))
                self.model.peft_config["default"].save_pretrained(str(Path(path) / ADAPTER_DIR))
        if self.world_size > 1:
            dist.barrier()

    def save_hf(self, path: str | Path) -> None:
        """The consolidated HF model directory (LoRA merged); all ranks call it, rank 0 writes."""
        tensors = dict(self.get_weights())
        if self.rank == 0:
            save_hf_tensors(path, tensors, config=hf_model(self.model).config, source_dir=self.model_path)


def _to(mb: RolloutBatch, device: str) -> RolloutBatch:
    if device == "cpu":
        return mb
    return RolloutBatch(**{k: None if v is None else v.to(device) for k, v in vars(mb).items()})


def combine_stats(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """Per-rank sums -> the step's stats (token means over the global batch)."""
    tot = {k: sum(s[k] for s in per_rank) for k in _SUM_KEYS}
    n = max(tot["tokens"], 1.0)
    return {
        "loss": tot["loss"],  # the global loss: the ranks' shares add up
        **{k: tot[f"{k}_sum"] / n for k in _MEAN_STATS},
        "rho_max": max(s["rho_max"] for s in per_rank),
        "entropy": tot["entropy_sum"] / n,
        "logp_mean": tot["logp_sum"] / n,
        "grad_norm": per_rank[0]["grad_norm"],  # identical on every rank after the all-reduce
        "tokens": tot["tokens"],
        "sequences": tot["sequences"],
    }


# --- Ray ------------------------------------------------------------------------------------------
def learner_threads(cfg: TrainConfig, *, cores: int) -> int:
    """Torch threads for one learner on a node with ``cores`` cores (config ``learner_threads``).

    In sync mode the engines sit idle while the learners update, so by default the learners take the
    node's cores between them (at the scaled size this made a sync step 1.5x faster on 2 cores); in
    async mode the engines generate meanwhile, and a learner keeps to the cores it reserved."""
    if cfg.learner_threads:
        return cfg.learner_threads
    reserved = max(1, int(cfg.cpus_per_learner))
    if cfg.mode != "sync":
        return reserved
    return max(reserved, cores // cfg.num_learners)


@ray.remote
class _LearnerActor:
    """A Learner in its own process, one DDP rank."""

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0: an address and a free port for the others to meet at."""
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def setup(
        self,
        *,
        rank: int,
        world_size: int,
        master: tuple[str, int],
        model_path: str,
        cfg: TrainConfig,
        use_gpu: bool,
        ref_path: str | None,
        resume: bool,
        timeout_s: float,
    ) -> int:
        torch.set_num_threads(learner_threads(cfg, cores=node_cores()))
        device = "cuda" if use_gpu else "cpu"
        if use_gpu:
            torch.cuda.set_device(0)  # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU
        if world_size > 1 or cfg.strategy == "fsdp":
            dist.init_process_group(
                "nccl" if use_gpu else "gloo",
                init_method=f"tcp://{master[0]}:{master[1]}",
                rank=rank,
                world_size=world_size,
                timeout=timedelta(seconds=timeout_s),
            )
        self.learner = Learner(
            model_path, cfg, rank=rank, world_size=world_size, device=device, ref_path=ref_path, resume=resume
        )
        return os.getpid()

    def step(self, batch: RolloutBatch) -> dict[str, float]:
        return self.learner.step(batch)

    def get_weights(self) -> list[tuple[str, torch.Tensor]]:
        return self.learner.get_weights()

    def flat_weights(self) -> FlatWeights | None:
        return self.learner.flat_weights()

    def save_hf(self, path: str) -> None:
        self.learner.save_hf(path)

    def get_grads(self) -> list[tuple[str, torch.Tensor]]:
        return self.learner.get_grads()

    def save(self, path: str) -> None:
        self.learner.save(path)

    def shutdown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


class LearnerGroup:
    """W learner actors in one placement group, stepping together as DDP ranks.

    ``resume=True`` takes ``model_path`` to be a checkpoint dir and restores the optimizer from it;
    pass the original model as ``ref_path`` then, so the KL reference stays the starting model.
    """

    def __init__(
        self,
        model_path: str | Path,
        cfg: TrainConfig,
        *,
        use_gpu: bool | None = None,
        ref_path: str | Path | None = None,
        resume: bool = False,
        timeout_s: float = 300.0,
    ):
        w = cfg.num_learners
        if use_gpu is None:
            use_gpu = ray.cluster_resources().get("GPU", 0) >= w
        bundle = {"CPU": cfg.cpus_per_learner, **({"GPU": 1} if use_gpu else {})}
        self.pg = placement_group([dict(bundle) for _ in range(w)], strategy="PACK")
        ray.get(self.pg.ready(), timeout=timeout_s)
        self.actors = [
            _LearnerActor.options(
                num_cpus=cfg.cpus_per_learner,
                num_gpus=1 if use_gpu else 0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=self.pg, placement_group_bundle_index=i
                ),
            ).remote()
            for i in range(w)
        ]
        master = ray.get(self.actors[0].rendezvous.remote())
        # All ranks must enter init_process_group together: start every setup, then wait.
        self.pids = ray.get(
            [
                a.setup.remote(
                    rank=i,
                    world_size=w,
                    master=master,
                    model_path=str(model_path),
                    cfg=cfg,
                    use_gpu=use_gpu,
                    ref_path=None if ref_path is None else str(ref_path),
                    resume=resume,
                    timeout_s=timeout_s,
                )
                for i, a in enumerate(self.actors)
            ]
        )
        self.world_size, self.use_gpu, self.sharded = w, use_gpu, cfg.strategy == "fsdp"

    def step(self, batch: RolloutBatch) -> dict[str, float]:
        ref = ray.put(batch)  # one copy in the object store, read by every rank
        return combine_stats(ray.get([a.step.remote(ref) for a in self.actors]))

    def _on(self, rank: int, method: str):
        """A rank's result of ``method``; under FSDP every rank runs it (it gathers collectively)."""
        if not self.sharded:
            return ray.get(getattr(self.actors[rank], method).remote())
        return ray.get([getattr(a, method).remote() for a in self.actors])[rank]

    def get_weights(self, rank: int = 0) -> list[tuple[str, torch.Tensor]]:
        return self._on(rank, "get_weights")

    def get_grads(self, rank: int = 0) -> list[tuple[str, torch.Tensor]]:
        return self._on(rank, "get_grads")

    def flat_weights_ref(self) -> ray.ObjectRef:
        """A ref to rank 0's packed weights after the calls queued so far (the driver publishes it
        to the engines); under FSDP the other ranks join the gathers and their None is dropped."""
        refs = [a.flat_weights.remote() for a in (self.actors if self.sharded else self.actors[:1])]
        return refs[0]

    def save_hf(self, path: str | Path) -> None:
        """The consolidated HF model directory (LoRA merged in) at ``path``."""
        ray.get([a.save_hf.remote(str(path)) for a in self.actors])

    def save(self, path: str | Path) -> None:
        """Model + optimizer into ``path`` (a staging dir; the driver adds trainer state and commits)."""
        ray.get([a.save.remote(str(path)) for a in self.actors])

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            ray.get([a.shutdown.remote() for a in self.actors], timeout=30)
        for a in self.actors:
            ray.kill(a)
        remove_placement_group(self.pg)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
