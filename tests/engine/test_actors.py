"""How many engine actors a job starts when it is not told (jobs.actors.default_engines)."""

from __future__ import annotations

import pytest

from rldata.engine import actors
from rldata.engine.actors import CPU_ENGINES_MAX, default_engines, node_cores


def test_one_engine_per_gpu_group():
    assert default_engines({"GPU": 8, "CPU": 64}) == 8
    assert default_engines({"GPU": 8, "CPU": 64}, tensor_parallel_size=2) == 4
    assert default_engines({"GPU": 1, "CPU": 64}, tensor_parallel_size=2) == 1  # never zero


@pytest.mark.parametrize(("cpus", "expected"), [(1, 1), (2, 2), (3, 3), (64, CPU_ENGINES_MAX)])
def test_on_cpu_one_engine_per_core_up_to_the_cap(cpus, expected, monkeypatch):
    monkeypatch.setattr(actors, "_STARTED_LOCAL", {})  # a cluster: its logical CPUs are its cores
    assert default_engines({"CPU": cpus}) == expected


def test_never_more_engines_than_batches(monkeypatch):
    monkeypatch.setattr(actors, "_STARTED_LOCAL", {})
    assert default_engines({"CPU": 4}, batches=1) == 1
    assert default_engines({"CPU": 4}, batches=3) == 3
    assert default_engines({"CPU": 4}, batches=0) == 1  # an empty job still has its engine
    assert default_engines({"GPU": 8}, batches=2) == 2


def test_a_local_ray_with_more_slots_than_cores_is_capped_at_the_cores(monkeypatch):
    # ensure_ray may start a local Ray with more logical CPUs than the machine has (the trainer's
    # slots); engines beyond the cores would only take turns on them.
    cores = node_cores()
    monkeypatch.setattr(actors, "_STARTED_LOCAL", {"num_cpus": cores + 8})
    assert default_engines({"CPU": cores + 8}) == min(cores, CPU_ENGINES_MAX)
