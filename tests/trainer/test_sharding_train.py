"""``rldata train`` end to end with sharded learners: FSDP over 2 ranks with bf16, activation
checkpointing, token-budget micro-batches and LoRA, the engine fed the merged weights after every
step; then the run resumed at 1 rank from its sharded checkpoint."""

from __future__ import annotations

import json

import pytest

from rldata import open_store
from rldata.cli import main


@pytest.mark.slow
@pytest.mark.ray
def test_fsdp_lora_run_and_resharded_resume(capsys, tmp_path):

    from tests.ray_helpers import ray_with_cpus

    with ray_with_cpus(4):  # engine, learner(s), verification, eval engine
        _run(capsys, tmp_path)


def _train(capsys, root, cfg, *extra):
    code = main(
        ["--store", str(root), "train", "--config", str(cfg), "--run-id", "fs", "--format", "json", *extra]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)[0]


def _run(capsys, tmp_path):
    from rldata.ingest import ingest, sample_path

    root = tmp_path / "s"
    store = open_store(root)
    lines = sample_path("arith").read_text().splitlines()
    (tmp_path / "train.jsonl").write_text("\n".join(x for x in lines if '"level":1' in x) + "\n")
    ingest(store, tmp_path / "train.jsonl")
    common = (
        "prompts_per_step: 4\nn: 4\nmax_tokens: 6\nlr: 1.0e-3\nmax_resample: 1\n"
        "strategy: fsdp\nmixed_precision: bf16\ngradient_checkpointing: true\nmicro_batch_tokens: 64\n"
        "lora: {r: 4, alpha: 8}\ncheckpoint_every: 1\n"
        f"output_dir: {tmp_path / 'runs'}\n"
    )
    cfg2, cfg1 = tmp_path / "w2.yaml", tmp_path / "w1.yaml"
    cfg2.write_text(common + "num_learners: 2\n")
    cfg1.write_text(common + "num_learners: 1\n")
    row = _train(capsys, root, cfg2, "--steps", "2")
    assert row["last_step"] == 2 and row["checkpoint"].endswith("step-000002")
    ckpt = tmp_path / "runs" / "fs" / "checkpoints" / "step-000002"
    assert (
        len(list((ckpt / "dcp").glob("*.distcp"))) == 2
        and (ckpt / "adapter" / "adapter_config.json").exists()
    )
    row = _train(capsys, root, cfg1, "--steps", "3", "--resume")
    assert row["last_step"] == 3
    # Every step's samples landed once: no step lost or repeated across the resume.
    steps = store.sql("SELECT DISTINCT step FROM trajectories WHERE run_id = 'fs' ORDER BY step").fetchall()
    assert [s for (s,) in steps] == [1, 2, 3]
    n, distinct = store.sql(
        "SELECT count(*), count(DISTINCT traj_id) FROM trajectories WHERE run_id = 'fs'"
    ).fetchall()[0]
    assert n == distinct > 0
    assert store.sql("SELECT status FROM runs WHERE run_id = 'fs'").fetchall()[-1] == ("done",)
