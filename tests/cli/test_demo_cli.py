"""``rldata demo``, the README's first command, end to end at a small size: every stage runs on the real
engine, Ray, verifier and store, and the artifacts it names exist and agree with the store.

The demos of the bundled model run in this process (rldata.cli.main, the command's entry point) on
the session's Ray and warm engines, as a notebook's ``with pools.active():`` block would run them:
the demo's sample and training share that pool (rows equal to fresh engines':
tests/engine/test_pool.py).  The chat model's demo runs as a shell runs it, engines and all (the
``rldata`` process, its own local Ray and one engine start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TINY = ["--tasks", "48", "--steps", "2", "--eval-tasks", "8"]


def _demo_here(capsys, tmp_path, *argv) -> tuple[dict, str]:
    """``rldata --store STORE demo --out DEMO ARGV`` in this process: (its JSON summary, its stderr)."""
    from rldata.cli import main

    capsys.readouterr()
    code = main(["--store", str(tmp_path / "store"), "demo", "--out", str(tmp_path / "demo"), *argv])
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    return json.loads(out), err  # stdout holds the JSON summary only; logs went to stderr


@pytest.mark.ray
@pytest.mark.vllm
def test_demo_runs_every_stage_and_names_its_artifacts(tmp_path, capsys, engine_pools):
    store = tmp_path / "store"
    started = engine_pools.started
    result, err = _demo_here(capsys, tmp_path, *TINY)
    for stage in ("1/6 ingest", "2/6 sample", "3/6 filter", "4/6 stratify", "5/6 train", "6/6 report"):
        assert stage in err
    assert err.count("rldata --store") == 3  # the three queries worth running next
    # no engine start but the session pool's own (if it was not warm yet): training (its rollouts and
    # evaluations) borrowed the engines sampling borrowed (each start logs what vLLM built)
    assert err.count(" engine(s) of rldata/tiny-arith: ") == engine_pools.started - started <= 1, err[-3000:]
    assert Path(result["buckets_yaml"]).is_file() and Path(result["report"]).is_file()
    assert (Path(result["checkpoint"]) / "model.safetensors").is_file()
    training = Path(result["training_report"])  # the run's training page, linked from the selection page
    assert "Held-out accuracy" in training.read_text() and (training.parent / "train_heldout.png").is_file()
    assert 'href="training.html"' in Path(result["report"]).read_text()
    assert result["sampled_tasks"] == 48 and result["samples"] == 48 * 16
    assert 0 <= result["heldout_accuracy_before"] <= 1 and 0 <= result["heldout_accuracy_after"] <= 1

    from rldata import open_store

    s = open_store(store)
    kept = s.sql(
        "SELECT count(*) FROM selections WHERE selection = 'demo-band' AND decision = 'keep'"
    ).fetchall()
    assert kept[0][0] == result["kept_tasks"] > 0
    steps = s.sql("SELECT count(DISTINCT step) FROM trajectories WHERE step IS NOT NULL").fetchall()[0][0]
    assert steps == 2


@pytest.mark.ray
@pytest.mark.vllm
def test_demo_env_calculator_runs_the_loop_as_episodes(tmp_path, capsys):
    store = tmp_path / "store"
    result, err = _demo_here(capsys, tmp_path, *TINY, "--env", "calculator")
    assert result["env"] == "calculator" and result["tool_call_frac_sampled"] is not None
    assert "episodes in calculator" in err and err.count("rldata --store") == 4

    from rldata import open_store

    s = open_store(store)
    # sampling, training and both evaluations ran as calculator episodes, and the ledger kept them apart
    assert s.sql(
        "SELECT count(*) FROM trajectories WHERE env_id IS DISTINCT FROM 'calculator'"
    ).fetchall() == [(0,)]
    assert s.sql("SELECT count(DISTINCT step) FROM trajectories WHERE step IS NOT NULL").fetchall() == [(2,)]
    keys = s.sql("SELECT DISTINCT env_version FROM passrates").fetchall()
    assert len(keys) == 1 and keys[0][0].startswith("calculator@")
    assert s.sql("SELECT count(*) FROM metrics WHERE name = 'episode/tool_call_frac'").fetchall()[0][0] == 2


def test_demo_env_calculator_tools_runs_standard_tool_calls_with_the_chat_model(tmp_path):
    """The path Qwen models take: the bundled tiny-arith-chat model, tools in its ChatML template,
    Hermes <tool_call> JSON parsed, tool_calls and tool_call_id in the store.  As a shell runs it, so
    the demo starts its own engines: one start for the whole demo."""
    store = tmp_path / "store"
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    argv = ["--tasks", "48", "--steps", "2", "--eval-tasks", "8", "--env", "calculator-tools"]
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "rldata",
            "--store",
            str(store),
            "demo",
            "--out",
            str(tmp_path / "demo"),
            *argv,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout)
    assert result["env"] == "calculator-tools" and result["model"].startswith("tiny-arith-chat@")
    assert 0 < result["tool_call_frac_sampled"] < 1
    # one engine start for the whole demo: training (its rollouts and evaluations) borrowed the
    # engines sampling started (each start logs what vLLM built)
    assert p.stderr.count(" engine(s) of ") == 1, p.stderr[-3000:]

    from rldata import open_store

    s = open_store(store)
    assert s.sql(
        "SELECT count(*) FROM trajectories WHERE env_id IS DISTINCT FROM 'calculator-tools'"
    ).fetchall() == [(0,)]
    assert s.sql("SELECT count(DISTINCT step) FROM trajectories WHERE step IS NOT NULL").fetchall() == [(2,)]
    calls = s.sql(
        "SELECT m.tool_calls[1].id, m.tool_calls[1].name, json_extract_string(env_info, '$.tool_parser') "
        "FROM (SELECT unnest(messages) AS m, env_info FROM trajectories) WHERE len(m.tool_calls) > 0"
    ).fetchall()
    assert calls and {(name, parser) for _, name, parser in calls} == {("calculate", "hermes")}
    answered = s.sql(
        "SELECT count(*) FROM (SELECT unnest(messages) AS m FROM trajectories) WHERE m.role = 'tool' "
        "AND m.tool_call_id IS NOT NULL"
    ).fetchall()[0][0]
    assert answered >= len(calls)
