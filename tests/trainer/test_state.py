"""rldata.trainer.state: where a run's files go."""

from __future__ import annotations

from rldata.trainer.config import TrainConfig
from rldata.trainer.state import run_dir


def test_the_run_directory_is_absolute_from_the_drivers_working_directory(tmp_path, monkeypatch):
    """Learners write checkpoints from Ray workers, whose working directory is the cluster's, not
    the driver's: a relative output_dir is resolved where the driver runs."""
    monkeypatch.chdir(tmp_path)
    d = run_dir(TrainConfig(output_dir="runs"), "r1")
    assert d.is_absolute() and d == tmp_path / "runs" / "r1"
