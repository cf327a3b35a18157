"""The filter / stratify / stats / report / cost commands, end to end through `rldata.cli.main`."""

from __future__ import annotations

import json

import polars as pl
import pytest

from rldata import open_store
from rldata.cli import main
from rldata.curriculum import load


@pytest.fixture
def root(tmp_path):
    store = open_store(tmp_path / "store")
    store.append(
        "tasks",
        [
            {
                "task_id": f"t{k}",
                "source": "s",
                "domain": "math",
                "prompt": "q",
                "category": "add" if k % 2 else "mul",
            }
            for k in range(18)
        ],
    )
    store.upsert(
        "passrates",
        [
            {
                "task_id": f"t{k}",
                "model": "tiny",
                "params_hash": "p",
                "verifier_key": "math@1",
                "n": 16,
                "n_correct": k,
                "n_error": 0,
                "pass_rate": k / 16,
            }
            for k in range(17)
        ],
    )
    store.append(
        "trajectories",
        [
            {
                "traj_id": f"t{k}/{j}",
                "task_id": f"t{k}",
                "run_id": "r1",
                "sample_idx": j,
                "model": "tiny",
                "policy_version": 0,
                "params_hash": "p",
                "prompt_tokens": 4,
                "completion_tokens": 6,
            }
            for k in range(17)
            for j in range(16)
        ],
    )
    return str(tmp_path / "store")


def _run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_filter_that_keeps_nothing_warns_in_one_line_and_exits_0(root, capsys):
    code, out, err = _run(
        capsys, "--store", root, "filter", "--band", "0.95,0.99", "--name", "top", "-f", "json"
    )
    assert code == 0  # the selection is written: every task's decision and reason, a truthful record
    warn = [x for x in err.splitlines() if x.startswith("warning: filter 'top' kept 0")]
    assert len(warn) == 1 and "widen --band" in warn[0] and "too_hard 16" in warn[0]
    assert sum(r["tasks"] for r in json.loads(out)) == 18
    code, _, err = _run(capsys, "--store", root, "stratify", "--selection", "top", "--quantiles", "3")
    assert code == 1 and err.count("\n") == 1 and "keeps no tasks" in err and "filter --band" in err
    code, _, err = _run(capsys, "--store", root, "--quiet", "filter", "--band", "0.95,0.99", "--name", "top")
    assert code == 0 and err.startswith("warning: filter 'top' kept 0") and err.count("\n") == 1


def test_filter_after_a_training_run_defaults_to_the_base_model(root, capsys):
    store = open_store(root)
    rows = store.sql("SELECT * EXCLUDE (model) FROM passrates").pl()
    store.upsert("passrates", rows.with_columns(model=pl.lit("tiny+run1/v1")).to_dicts())
    code, _, err = _run(capsys, "--store", root, "filter", "--band", "0.1,0.9", "--name", "b")
    assert code == 0, err
    assert "read the base model tiny: left out 1 model(s) a training run wrote" in err
    assert "--model picks one, e.g. tiny+run1/v1" in err


@pytest.mark.slow  # the whole chain, report plots included
def test_filter_stratify_stats_report(root, tmp_path, capsys):
    code, out, err = _run(
        capsys, "--store", root, "filter", "--band", "0.1,0.9", "--name", "s1", "-f", "json"
    )
    assert code == 0, err
    rows = {r["reason"]: r["tasks"] for r in json.loads(out)}
    assert rows == {"in_band": 13, "too_hard": 2, "too_easy": 2, "insufficient_samples": 0, "not_sampled": 1}
    assert "kept 13 of 18" in err and "not_sampled" in err

    yaml_path = tmp_path / "buckets.yaml"
    code, out, err = _run(
        capsys,
        "--store",
        root,
        "stratify",
        "-s",
        "s1",
        "--quantiles",
        "3",
        "--curriculum",
        str(yaml_path),
        "--seed",
        "4",
        "-f",
        "json",
    )
    assert code == 0, err
    cur = load(yaml_path)
    assert (
        cur.selection == "s1"
        and cur.seed == 4
        and [b.name for b in cur.buckets] == ["easy", "medium", "hard"]
    )
    assert sum(r["count"] for r in json.loads(out)) == 13

    code, out, err = _run(capsys, "--store", root, "stats", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["kept"] == 13 and summary["tasks"] == 18 and sum(summary["buckets"].values()) == 13
    assert summary["savings"]["saved_tokens"] == 4 * 16 * 6  # 4 out-of-band tasks x G=16 x 6 tokens

    code, out, err = _run(capsys, "--store", root, "stats")
    assert code == 0, err
    assert "pass-rate histogram" in out and "16/16" in out and "retained" not in err
    assert "generation saved per epoch" in out

    code, out, err = _run(capsys, "--store", root, "report", "--out", str(tmp_path / "rep"))
    assert code == 0, err
    assert (tmp_path / "rep" / "index.html").stat().st_size > 10_000 and out.strip().endswith("index.html")


def test_filter_exclusive_and_min_n(root, capsys):
    code, out, _ = _run(
        capsys,
        "--store",
        root,
        "filter",
        "--band",
        "0.25,0.75",
        "--exclusive",
        "--min-n",
        "16",
        "--name",
        "x",
        "-f",
        "json",
    )
    assert code == 0
    assert {r["reason"]: r["tasks"] for r in json.loads(out)}["in_band"] == 7  # 5..11 of 16


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["filter", "--band", "0.9,0.1", "--name", "s"], "band low 0.9 is above high 0.1"),
        (["filter", "--band", "abc", "--name", "s"], "--band: band must be LO,HI"),
        (["filter", "--band", "0.1,0.9", "--name", "s", "--model", "big"], "no passrates for model 'big'"),
        (["stratify", "-s", "nope", "--quantiles", "3"], "no selection 'nope'"),
        (["stats"], "no selections in the store"),
        (["cost", "--params", "7B"], "--tokens: give tokens, run_id or model (what to price)"),
        (["cost", "--params", "7B", "--tokens", "1e9", "--gpu", "z80"], "unknown GPU 'z80'"),
    ],
)
def test_errors_are_one_line(root, capsys, args, message):
    code, _, err = _run(capsys, "--store", root, *args)
    assert code == 1
    assert err.startswith("rldata: error: ") and message in err and err.count("\n") == 1


def test_curriculum_check(root, tmp_path, capsys):
    path = tmp_path / "b.yaml"
    assert _run(capsys, "--store", root, "filter", "--band", "0.1,0.9", "--name", "s1")[0] == 0
    assert (
        _run(
            capsys,
            "--store",
            root,
            "stratify",
            "-s",
            "s1",
            "--buckets",
            "easy:0.5-0.9,hard:0.1-0.5",
            "--curriculum",
            str(path),
            "--phase-steps",
            "40",
        )[0]
        == 0
    )
    code, out, err = _run(capsys, "curriculum", str(path), "-f", "json")
    assert code == 0, err
    phases = json.loads(out)
    assert [p["phase"] for p in phases] == ["easy", "hard"] and phases[0]["until_step"] == 40
    assert "valid" in err
    path.write_text(path.read_text().replace("hard: 0.3", "hrad: 0.3"))
    code, _, err = _run(capsys, "curriculum", str(path))
    assert code == 1
    assert (
        err.strip()
        == f"rldata: error: {path}:phases[0].weights.hrad: unknown bucket 'hrad' (buckets: easy, hard)"
    )


def test_cost_worked_example_and_measured_run(root, capsys):
    code, out, err = _run(
        capsys, "cost", "--params", "7e9", "--tokens", "1e9", "--tflops", "989", "--mfu", "0.4", "-f", "json"
    )
    assert code == 0, err
    assert json.loads(out)[0]["gpu_hours"] == pytest.approx(29.49, abs=0.01)
    code, out, err = _run(
        capsys,
        "--store",
        root,
        "cost",
        "--params",
        "20B",
        "--active-params",
        "2B",
        "--gpu",
        "a100",
        "--run",
        "r1",
        "--scale-tasks",
        "1.7e6",
        "--gpus",
        "8",
        "-f",
        "json",
    )
    assert code == 0, err
    measured, scaled = json.loads(out)
    assert measured["tokens"] == 17 * 16 * 10 and measured["active_params"] == 2e9
    assert scaled["tokens"] == pytest.approx(measured["tokens"] * 1e5)
    assert scaled["wall_hours"] == pytest.approx(scaled["gpu_hours"] / 8)


def test_cost_generation_has_its_own_mfu_and_moe_without_active_params_warns(capsys, tmp_path):
    code, out, err = _run(
        capsys,
        "cost",
        "--params",
        "7e9",
        "--tokens",
        "1e9",
        "--gpu",
        "h100",
        "--kind",
        "generate",
        "-f",
        "json",
    )
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["mfu"] == 0.1  # decoding is memory-bound: not the training default 0.4
    assert row["gpu_hours"] == pytest.approx(29.49 / 3 * 4, abs=0.01)
    code, out, err = _run(capsys, "cost", "--params", "7e9", "--tokens", "1e9", "--gpu", "h100", "-f", "json")
    assert json.loads(out)[0]["mfu"] == 0.4 and "warning" not in err
    code, out, err = _run(
        capsys, "cost", "--params", "47B", "--name", "Mixtral-8x7B", "--tokens", "1e9", "--gpu", "h100"
    )
    assert code == 0 and "mixture of experts" in err and "active_params was not given" in err
    model = tmp_path / "sparse"
    model.mkdir()
    (model / "config.json").write_text('{"num_local_experts": 8}')
    code, out, err = _run(
        capsys, "cost", "--params", "47B", "--name", str(model), "--tokens", "1e9", "--gpu", "h100"
    )
    assert "mixture of experts" in err
    code, out, err = _run(
        capsys,
        "cost",
        "--params",
        "47B",
        "--active-params",
        "13B",
        "--name",
        "Mixtral-8x7B",
        "--tokens",
        "1e9",
        "--gpu",
        "h100",
    )
    assert "warning" not in err
