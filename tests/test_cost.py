"""rldata.cost: the seed's worked example, presets, MoE, and measured token counts of stored runs."""

from __future__ import annotations

import pytest

from rldata.cost import GEN_FLOPS_PER_PARAM_TOKEN, GPUS, CostSpec, gpu_hours, parse_count, run_tokens
from rldata.errors import RldataError


def test_seed_worked_example():
    # 7B dense, 1e9 tokens, 989 TFLOPS, MFU 40% -> about 29.5 GPU-hours
    assert gpu_hours(7e9, 1e9, CostSpec(989, 0.4)) == pytest.approx(29.49, abs=0.01)
    assert gpu_hours(7e9, 1e9, CostSpec.from_gpu("H100", mfu=0.4)) == pytest.approx(29.49, abs=0.01)


def test_formula_scales_linearly_and_generation_is_a_third():
    spec = CostSpec(989, 0.4)
    base = gpu_hours(7e9, 1e9, spec)
    assert gpu_hours(14e9, 1e9, spec) == pytest.approx(2 * base)
    assert gpu_hours(7e9, 1e9, CostSpec(989, 0.2)) == pytest.approx(2 * base)
    assert gpu_hours(7e9, 1e9, spec, flops_per_param_token=GEN_FLOPS_PER_PARAM_TOKEN) == pytest.approx(
        base / 3
    )


def test_moe_uses_active_parameters():
    # a 200B-total / 20B-active MoE costs like a 20B dense model per token
    spec = CostSpec.from_gpu("h100")
    assert gpu_hours(20e9, 1e9, spec) == pytest.approx(gpu_hours(7e9, 1e9, spec) * 20 / 7)


def test_presets_and_errors():
    assert GPUS["a100"] == 312 and GPUS["h100"] == 989
    assert CostSpec.from_gpu("a100").tflops == 312
    assert CostSpec.from_gpu("h100", tflops=500).tflops == 500  # explicit --tflops wins
    with pytest.raises(RldataError, match="unknown GPU 'z80'.*h100"):
        CostSpec.from_gpu("z80")
    with pytest.raises(RldataError, match="give tflops or gpu"):
        CostSpec.from_gpu(None)
    with pytest.raises(RldataError, match="mfu"):
        CostSpec(989, 1.5)


@pytest.mark.parametrize(
    ("text", "value"),
    [("7e9", 7e9), ("7B", 7e9), ("1.5T", 1.5e12), ("500M", 5e8), ("20b", 2e10), (" 3k ", 3e3), (12, 12.0)],
)
def test_parse_count(text, value):
    assert parse_count(text) == value


def test_parse_count_rejects_garbage():
    with pytest.raises(RldataError, match="--params: expected a number"):
        parse_count("seven billion", what="--params")
    for zero in ("0", "0B", "0e5", 0):  # found by benchmarks/hostile29.py: `cost --tokens 0` printed a cost
        with pytest.raises(RldataError, match="tokens: expected a number above 0"):
            parse_count(zero, what="tokens")


def _traj(run, task, i, *, prompt=5, completion=10, step=None, model="m", kept=None):
    return {
        "kept": kept,
        "traj_id": f"{run}/{task}/{i}/{step}",
        "task_id": task,
        "run_id": run,
        "sample_idx": i,
        "model": model,
        "policy_version": 0,
        "params_hash": "p",
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "step": step,
    }


def test_run_tokens_measures_stored_sampling_runs(store):
    rows = [_traj("r1", f"t{t}", i, completion=10 + t) for t in range(3) for i in range(4)]
    rows += [_traj("r2", "t0", i, model="other") for i in range(2)]
    rows += [_traj("train", "t0", i, step=1) for i in range(4)]  # training rollouts are not a sampling run
    store.append("trajectories", rows, dedupe=True)  # merge-written files: string_view columns
    got = {r["run_id"]: r for r in run_tokens(store).to_dicts()}
    assert set(got) == {"r1", "r2"}
    assert got["r1"]["tasks"] == 3 and got["r1"]["samples"] == 12
    assert got["r1"]["prompt_tokens"] == 60 and got["r1"]["completion_tokens"] == 4 * (10 + 11 + 12)
    assert run_tokens(store, model="other")["run_id"].to_list() == ["r2"]
    with pytest.raises(RldataError, match="no trajectories for run 'zz'"):
        run_tokens(store, run_id="zz")


def test_cost_of_a_training_run_prices_rollouts_and_updates(store, capsys):
    import json

    from rldata.cli import main

    rows = [_traj("tr", f"t{t}", i, step=s, kept=t != 2) for s in (1, 2) for t in range(3) for i in range(2)]
    store.append("trajectories", rows, dedupe=True)
    (got,) = run_tokens(store, run_id="tr").to_dicts()
    assert (got["steps"], got["samples"], got["prompt_tokens"], got["completion_tokens"]) == (2, 12, 60, 120)
    assert got["trained_tokens"] == 8 * 15  # kept groups only: tasks t0, t1 at both steps
    code = main(
        ["--store", store.root, "cost", "--params", "1e9", "--run", "tr", "--gpu", "h100", "-f", "json"]
    )
    out = {r["scenario"]: r for r in json.loads(capsys.readouterr().out)}
    assert code == 0 and set(out) == {"run tr", "run tr updates"}
    assert out["run tr"]["flops"] == 2 * 1e9 * 180 and out["run tr updates"]["flops"] == 6 * 1e9 * 120
