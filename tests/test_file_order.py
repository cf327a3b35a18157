"""tests/file_order.py: the files go to the workers longest first, each file's tests in their order."""

from __future__ import annotations

from dataclasses import dataclass

from tests.file_order import TABLE, file_seconds, load, longest_first


@dataclass
class Item:
    nodeid: str


LOG = """\
============================= slowest 30 durations =============================
98.76s call     tests/cli/test_quick_tour.py::test_readme_quick_tour_runs_in_order
21.11s setup    tests/trainer/test_driver.py::test_every_rollout_lands
20.00s call     tests/trainer/test_driver.py::test_async_kill_9_and_resume[fsdp]
0.50s teardown tests/trainer/test_driver.py::test_async_kill_9_and_resume[fsdp]
12.00s call     tests/jobs/test_sample.py::test_kill_driver_and_resume
not a duration line: 5.0s call tests/x.py::y
"""


def test_seconds_are_summed_per_file_from_a_durations_log():
    assert file_seconds(LOG) == {
        "tests/cli/test_quick_tour.py": 98.8,
        "tests/trainer/test_driver.py": 41.6,
        "tests/jobs/test_sample.py": 12.0,
    }
    assert file_seconds("no durations here") == {}


def test_files_go_longest_first_and_each_keeps_its_tests_in_order():
    ids = ["a.py::1", "b.py::1", "a.py::2", "c.py::1", "d.py::1", "b.py::2", "e.py::1"]
    got = [i.nodeid for i in longest_first([Item(i) for i in ids], {"b.py": 9.0, "d.py": 30.0, "a.py": 1.0})]
    # measured files longest first; unmeasured ones after, in collection order
    assert got == ["d.py::1", "b.py::1", "b.py::2", "a.py::1", "a.py::2", "c.py::1", "e.py::1"]
    assert sorted(got) == sorted(ids)  # nothing dropped or doubled


def test_the_table_names_files_that_exist():
    table = load()
    root = TABLE.parents[1]
    assert table and all((root / f).is_file() for f in table), [f for f in table if not (root / f).is_file()]
