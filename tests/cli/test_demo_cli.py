"""``rldata demo``, the README's first command, end to end at a small size: every stage runs on the real
engine, Ray, verifier and store, and the artifacts it names exist and agree with the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_demo_runs_every_stage_and_names_its_artifacts(tmp_path):
    store = tmp_path / "store"
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
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
            "--tasks",
            "48",
            "--steps",
            "2",
            "--eval-tasks",
            "8",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout)  # stdout holds the JSON summary only; logs went to stderr
    for stage in ("1/6 ingest", "2/6 sample", "3/6 filter", "4/6 stratify", "5/6 train", "6/6 report"):
        assert stage in p.stderr
    assert p.stderr.count("rldata --store") == 3  # the three queries worth running next
    # one engine start for the whole demo: training (its rollouts and evaluations) borrowed the
    # engines sampling started (each start logs what vLLM built)
    assert p.stderr.count(" engine(s) of rldata/tiny-arith: ") == 1, p.stderr[-3000:]
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


def test_demo_env_calculator_runs_the_loop_as_episodes(tmp_path):
    store = tmp_path / "store"
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
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
            "--tasks",
            "48",
            "--steps",
            "2",
            "--eval-tasks",
            "8",
            "--env",
            "calculator",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout)
    assert result["env"] == "calculator" and result["tool_call_frac_sampled"] is not None
    assert "episodes in calculator" in p.stderr and p.stderr.count("rldata --store") == 4

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
    Hermes <tool_call> JSON parsed, tool_calls and tool_call_id in the store."""
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
