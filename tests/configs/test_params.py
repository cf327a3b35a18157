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
        (["--seed", str(2**70)], "--seed: seed: must be in [0, 2**63)"),
        (["--seed", "-1"], "--seed: seed: must be in [0, 2**63)"),
        (["--engines", "0"], "--engines: engines: must be >= 1, got 0"),
        (["--batch-tasks", "0"], "--batch-tasks: batch_tasks: must be >= 1, got 0"),
        (["--max-model-len", "1"], "--max-model-len: max_model_len: must be >= 2, got 1"),
        (["--kv-cache-gib", "0"], "--kv-cache-gib: kv_cache_gib: must be > 0"),
        (["--kv-cache-gib", "nan"], "--kv-cache-gib: kv_cache_gib: must be > 0"),
        (["--dtype", "fp8"], "--dtype: dtype: must be one of auto, float32, bfloat16, float16, got 'fp8'"),
        (["--tensor-parallel-size", "0"], "--tensor-parallel-size: tensor_parallel_size: must be >= 1"),
        (["--round", "0"], "--round: round_size: must be >= 1"),
        (["--adaptive", "often"], "--adaptive: adaptive: must be one of fixed, exact, sequential"),
        (["--n", "0"], "--n: n: must be in [1, "),
        (["--temperature", "nan"], "--temperature: temperature: must be in [0, "),
        (["--temperature", "inf"], "--temperature: temperature: must be in [0, "),
        (["--top-p", "0"], "--top-p: top_p: must be in (0, 1]"),
        (["--max-tokens", "0"], "--max-tokens: max_tokens: must be in [1, "),
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
