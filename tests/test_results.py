"""rldata.results: a job's mutable summary and its frozen result share one field list."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

import pytest

from rldata.jobs.sample import SampleSummary
from rldata.jobs.verify import VerifySummary
from rldata.results import Result, SampleResult, VerifyResult, accumulator


def shape(cls):
    return [(f.name, f.default) for f in fields(cls)]


def test_verify_summary_has_exactly_the_fields_of_verify_result():
    assert shape(VerifySummary) == shape(VerifyResult)
    s = VerifySummary(None, ["math@1"], 3, 0)
    s.verified += 3
    assert s.result() == VerifyResult(None, ("math@1",), 3, 0, verified=3)
    assert s.to_dict()["verifiers"] == ["math@1"]


def test_sample_summary_has_exactly_the_fields_and_defaults_of_sample_result():
    assert shape(SampleSummary) == shape(SampleResult)
    s = SampleSummary(None, "m", "h", 3, 1)
    s.samples, s.seconds, s.time_commit_s = 6, 2.0, 0.123456
    r = s.result()
    assert type(r) is SampleResult and r.samples == 6 and s.samples_per_s == r.samples_per_s == 3.0
    assert s.to_dict() == r.to_dict() and r.to_dict()["time_commit_s"] == 0.123
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.samples = 7  # the result is frozen; the summary is not


def test_a_field_declared_on_the_result_appears_in_its_accumulator():
    @dataclass(frozen=True)
    class Toy(Result):
        name: str
        count: int = 0
        seen: list = dataclasses.field(default_factory=list)

    ToySummary = accumulator(Toy, "ToySummary")
    t = ToySummary("a")
    t.count += 2
    t.seen.append("x")
    assert [f.name for f in fields(ToySummary)] == ["name", "count", "seen"]
    assert t.result() == Toy("a", 2, ("x",))  # lists frozen to tuples
    assert ToySummary("b").seen == []  # a fresh default per instance
