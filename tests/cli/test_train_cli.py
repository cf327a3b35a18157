"""``rldata train``: bad input fails with one clear line before anything starts, and (slow) a real
one-step run with held-out evaluation before and after, through the CLI."""

from __future__ import annotations

import json
import re

import pytest

from rldata import open_store
from rldata.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bad_config_names_file_and_field(capsys, tmp_path):
    cfg = tmp_path / "train.yaml"
    cfg.write_text("prompts_per_step: 3\nn: 8\nmicro_batch: 16\n")
    code, out, err = run(capsys, "--store", str(tmp_path / "s"), "train", "--config", str(cfg))
    assert code == 1 and out == ""
    assert "train.yaml" in err and "micro_batch" in err and err.count("\n") == 1
    code, _, err = run(capsys, "--store", str(tmp_path / "s"), "train", "--steps", "0")
    assert code == 1 and "steps" in err and "must be >= 1" in err


def test_async_options_are_checked_like_config_fields(capsys, tmp_path):
    store = ["--store", str(tmp_path / "s")]
    code, out, err = run(capsys, *store, "train", "--async", "--max-staleness", "0")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "max_staleness" in err and "must be >= 1 (0 is sync mode)" in err
    cfg = tmp_path / "train.yaml"
    cfg.write_text("mode: async\ntop_p: 0.9\n")
    code, _, err = run(capsys, *store, "train", "--config", str(cfg))
    assert code == 1 and "train.yaml" in err and "top_p" in err and "nucleus" in err


def test_contradicting_options_are_refused(capsys, tmp_path):
    store = ["--store", str(tmp_path / "s")]
    code, _, err = run(capsys, *store, "train", "--uniform", "--sampler", "mixture")
    assert code == 1 and "--uniform" in err
    code, _, err = run(capsys, *store, "train", "--eval-heldout", "--eval-where", "true")
    assert code == 1 and "--eval-heldout" in err
    code, _, err = run(capsys, *store, "train", "--curriculum", "b.yaml", "--where", "true")
    assert code == 1 and "--where" in err
    for other in (["--curriculum", "b.yaml"], ["--where", "true"]):
        code, _, err = run(capsys, *store, "train", "--selection", "band", *other)
        assert code == 1 and err.startswith("rldata: error: --selection: ") and err.count("\n") == 1


def test_missing_curriculum_file_is_an_input_error(capsys, tmp_path):
    open_store(tmp_path / "s").append(
        "tasks", [{"task_id": "t", "source": "u", "domain": "math", "prompt": "1+1=", "answer": "2"}]
    )
    code, _, err = run(capsys, "--store", str(tmp_path / "s"), "train", "--model", str(tmp_path / "nomodel"))
    assert code == 1 and "nomodel" in err and "not found" in err
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"x")
    code, _, err = run(
        capsys,
        "--store",
        str(tmp_path / "s"),
        "train",
        "--curriculum",
        str(tmp_path / "no.yaml"),
        "--model",
        str(model),
    )
    assert code == 1 and "no.yaml" in err and "cannot read" in err


@pytest.mark.slow
@pytest.mark.ray
def test_one_step_with_heldout_eval(capsys, tmp_path):

    from rldata.engine.core import default_model_path

    try:
        default_model_path()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"bundled tiny model missing: {e}")
    from tests.ray_helpers import ray_with_cpus

    with ray_with_cpus(4):  # engine, learner(s), verification, eval engine
        _one_step(capsys, tmp_path)


def _one_step(capsys, tmp_path):
    from rldata.ingest import ingest, sample_path

    root = tmp_path / "s"
    store = open_store(root)
    lines = sample_path("arith").read_text().splitlines()
    (tmp_path / "train.jsonl").write_text("\n".join(x for x in lines if '"level":1' in x) + "\n")
    held = sample_path("arith-heldout").read_text().splitlines()[:6]
    (tmp_path / "held.jsonl").write_text("\n".join(held) + "\n")
    ingest(store, tmp_path / "train.jsonl")
    ingest(store, tmp_path / "held.jsonl")
    cfg = tmp_path / "train.yaml"
    cfg.write_text("prompts_per_step: 4\nn: 4\nmax_tokens: 6\nlr: 1.0e-3\neval: {n: 4}\nmax_resample: 1\n")
    code, out, err = run(
        capsys,
        "--store",
        str(root),
        "train",
        "--config",
        str(cfg),
        "--steps",
        "1",
        "--out",
        str(tmp_path / "runs"),
        "--run-id",
        "cli",
        "--eval-heldout",
        "--format",
        "json",
    )
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["run_id"] == "cli" and row["last_step"] == 1 and 0 <= row["eval_first"] <= 1
    assert row["checkpoint"].endswith("step-000001") and "step 1/1" in err
    # stderr in a log: the effective setup, the start-up stages as they begin, one final line
    assert re.search(
        r"^train cli: tiny-arith@\w+, 1 step x 4 prompts x 4 samples, sync; 1 learner \w+ \w+; 1 engine; "
        r"\d+ tasks: every task uniform; held-out 6 tasks x 4 before and after$",
        err,
        re.MULTILINE,
    ), err
    for stage in ("starting 1 learner (", "held-out evaluation of the base model (6 tasks x 4) ..."):
        assert stage in err, err
    assert re.search(r"^training: 1/1 steps in .*, reward=[0-9.]+ v=1$", err, re.MULTILINE), err
    assert re.search(r"held-out accuracy [0-9.]+ \(95% CI [0-9.]+-[0-9.]+\) over 6 tasks", err), err
    assert "Token authentication is enabled" not in err  # Ray's start-up notice is not printed
    evals = store.sql(
        "SELECT step, value FROM metrics WHERE run_id = 'cli' AND name = 'eval/accuracy' ORDER BY step"
    ).fetchall()
    assert [s for s, _ in evals] == [0, 1]
    models = {m for (m,) in store.sql("SELECT DISTINCT model FROM passrates").fetchall()}
    assert any(m.startswith("step-000001@") for m in models)  # the checkpoint's eval, in the ledger
    # held-out tasks are never trained on
    assert (
        store.sql(
            "SELECT count(*) FROM trajectories t JOIN tasks USING (task_id) WHERE t.run_id = 'cli' "
            "AND json_extract_string(metadata, '$.split') = 'heldout'"
        ).fetchall()[0][0]
        == 0
    )
    assert store.sql("SELECT status FROM runs WHERE run_id = 'cli'").fetchall() == [("done",)]
