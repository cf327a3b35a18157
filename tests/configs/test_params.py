"""Sampling parameters are checked where the spec is built, before Ray or an engine starts: one
ConfigError naming the field, from Python, from `rldata sample` (naming the flag) and from a
TrainConfig (naming the rollout's field); a refused `rldata sample` records no run."""

from __future__ import annotations

import math

import pytest

import rldata
from rldata import open_store
from rldata.cli import main
from rldata.configs.sampling import MAX_N, MAX_SEED, SampleConfig, SamplingSpec
from rldata.errors import ConfigError
from rldata.trainer.config import TrainConfig

BAD = [
    ({"n": 0}, "n"),
    ({"n": MAX_N + 1}, "n"),
    ({"n": 2.5}, "n"),
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": math.nan}, "temperature"),
    ({"temperature": math.inf}, "temperature"),
    ({"temperature": 1e6}, "temperature"),
    ({"temperature": 2.01}, "temperature"),  # vLLM's range is [0, 2]
    ({"n": 16385}, "n"),  # vLLM's VLLM_MAX_N_SEQUENCES
    ({"stop": ("",)}, "stop"),  # vLLM refuses an empty stop string
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_p": math.nan}, "top_p"),
    ({"top_k": -2}, "top_k"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"seed": -1}, "seed"),
    ({"seed": MAX_SEED}, "seed"),
    ({"seed": 2**70}, "seed"),
]


@pytest.mark.parametrize(("kw", "field"), BAD)
def test_a_bad_sampling_parameter_is_one_error_naming_it(kw, field):
    with pytest.raises(ConfigError) as e:
        SamplingSpec(**kw)
    assert e.value.field == field and str(e.value).startswith(field), e.value
    assert "\n" not in str(e.value)


def test_the_bounds_themselves_are_accepted():
    s = SamplingSpec(n=MAX_N, temperature=0.0, top_p=1e-9, top_k=0, max_tokens=1, seed=MAX_SEED - 1)
    assert s.seed == MAX_SEED - 1 and SamplingSpec(seed=None).request_seed("t") is None


@pytest.mark.parametrize(
    "kw",
    [
        {"n": 16384},
        {"n": 16385},
        {"temperature": 2.0},
        {"temperature": 2.01},
        {"temperature": 0.0},
        {"top_p": 1e-9},
        {"top_p": 1.0000001},
        {"top_k": -1},
        {"top_k": -2},
        {"top_k": 0},
        {"max_tokens": 1},
        {"max_tokens": 0},
        {"stop": ("",)},
        {"stop": ("\n\n",)},
    ],
)
def test_the_bounds_are_the_engines_own(kw):
    """What SamplingSpec accepts, vllm.SamplingParams accepts, and what it refuses the engine would
    refuse too (after Ray and the engines had started)."""
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError

    def accepts(build) -> bool:
        try:
            build()
        except (ConfigError, VLLMValidationError, ValueError):
            return False
        return True

    theirs = {k: list(v) if k == "stop" else v for k, v in kw.items()}
    assert accepts(lambda: SamplingSpec(**kw)) == accepts(lambda: SamplingParams(**theirs)), kw


def test_the_n_bound_follows_vllms_setting(monkeypatch):
    monkeypatch.setenv("VLLM_MAX_N_SEQUENCES", "20000")
    assert SamplingSpec(n=20000).n == 20000
    with pytest.raises(ConfigError, match="at most 20000"):
        SamplingSpec(n=20001)


@pytest.mark.parametrize("name", ["engines", "batch_tasks", "max_model_len"])
@pytest.mark.parametrize("value", [0, -3, 1.5, True])
def test_job_sizes_are_checked_before_anything_starts(name, value):
    with pytest.raises(ConfigError) as e:
        SampleConfig(**{name: value})
    assert e.value.field == name
    SampleConfig(**{name: 2})


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"engines": 0}, "engines"), ({"seed": 2**70}, "seed"), ({"batch_tasks": 1.5}, "batch_tasks")],
)
def test_the_sample_verb_refuses_before_opening_anything(tmp_path, kw, field):
    with pytest.raises(ConfigError) as e:
        rldata.sample(tmp_path / "nowhere", **kw)
    assert e.value.field == field
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"seed": 2**70}, "seed"),
        ({"temperature": math.inf}, "temperature"),
        ({"n": MAX_N + 1, "prompts_per_step": 1, "micro_batch": 1}, "n"),
        ({"temperature": 0.0}, "temperature"),  # the rollout's on-policy rule
        ({"temperature": 5.0}, "temperature"),
    ],
)
def test_the_trainer_names_the_rollouts_field(kw, field):
    with pytest.raises(ConfigError) as e:
        TrainConfig(**kw)
    assert e.value.field == field and str(e.value).startswith(f"{field}: "), e.value


@pytest.mark.parametrize(
    ("eval_", "field"), [({"temperature": math.nan}, "eval.temperature"), ({"n": MAX_N + 1}, "eval.n")]
)
def test_the_eval_section_names_its_field_with_the_section_in_front(eval_, field):
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict({"eval": eval_})
    assert e.value.field == field and str(e.value).startswith(f"{field}: "), e.value


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--seed", str(2**70)], f"--seed: seed: must be in [0, 2**63), got {2**70}"),
        (["--seed", "-1"], "--seed: seed: must be in [0, 2**63), got -1"),
        (["--engines", "0"], "--engines: engines: must be >= 1, got 0"),
        (["--batch-tasks", "0"], "--batch-tasks: batch_tasks: must be >= 1, got 0"),
        (["--max-model-len", "1"], "--max-model-len: max_model_len: must be >= 2, got 1"),
        (["--kv-cache-gib", "0"], "--kv-cache-gib: kv_cache_gib: must be > 0"),
        (["--kv-cache-gib", "nan"], "--kv-cache-gib: kv_cache_gib: must be > 0"),
        (["--dtype", "fp8"], "--dtype: dtype: must be one of auto, float32, bfloat16, float16, got 'fp8'"),
        (["--tensor-parallel-size", "0"], "--tensor-parallel-size: tensor_parallel_size: must be >= 1"),
        (["--round", "0"], "--round: round_size: must be >= 1"),
        (["--adaptive", "often"], "--adaptive: adaptive: must be one of fixed, exact, sequential"),
        (["--n", "0"], "--n: n: must be at least 1, got 0"),
        # vLLM's own bounds (SamplingParams._verify_args): refused here, before Ray starts
        (["--n", "20000"], "--n: n: must be at most 16384 (vLLM's limit on samples per request"),
        (["--n", "16385"], "--n: n: must be at most 16384 "),
        (
            ["--temperature", "5"],
            "--temperature: temperature: must be in [0, 2] (vLLM's range; 0 = greedy), got 5",
        ),
        (
            ["--temperature", "2.5"],
            "--temperature: temperature: must be in [0, 2] (vLLM's range; 0 = greedy), got 2.5",
        ),
        (["--top-k", "-2"], "--top-k: top_k: must be >= 1, or -1 or 0 (off), got -2"),
        (
            ["--temperature", "nan"],
            "--temperature: temperature: must be in [0, 2] (vLLM's range; 0 = greedy), got nan",
        ),
        (
            ["--temperature", "inf"],
            "--temperature: temperature: must be in [0, 2] (vLLM's range; 0 = greedy), got inf",
        ),
        (["--top-p", "0"], "--top-p: top_p: must be in (0, 1], got 0"),
        (["--max-tokens", "0"], "--max-tokens: max_tokens: must be in [1, 2147483647], got 0"),
    ],
)
def test_rldata_sample_refuses_before_starting_and_records_no_run(tmp_path, capsys, args, line):
    root = tmp_path / "store"
    store = open_store(root)
    store.append(
        "tasks", [{"task_id": "t0", "source": "s", "domain": "math", "prompt": "1+1?", "answer": "2"}]
    )
    code = main(["--store", str(root), "sample", *args])
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and out == "" and len(lines) == 1, err
    assert lines[0].removeprefix("rldata: error: ").startswith(line), lines[0]
    assert "Traceback" not in err
    assert open_store(root).sql("SELECT count(*) FROM runs").fetchall() == [(0,)]
