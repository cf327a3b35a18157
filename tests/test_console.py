"""rldata.console, the one progress facility: plain lines in a log, a live display on a terminal (run
in a real pseudo-terminal), nothing but warnings under --quiet, and never a byte on stdout."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest

from rldata import console
from tests.term_helpers import run_in_terminal


@pytest.fixture(autouse=True)
def _loud():
    console.configure(quiet=None)
    yield
    console.configure(quiet=None)


def test_off_a_terminal_a_stage_is_one_line_and_a_bar_one_final_line(capsys, monkeypatch):
    monkeypatch.delenv("RLDATA_QUIET", raising=False)
    assert console.mode() == "plain"  # pytest's stderr is no terminal
    with console.stage("starting Ray") as s:
        s.update("1/2 ready")
    with console.progress("sampling", total=3, unit="tasks") as bar:
        for _ in range(3):
            bar.advance(1, note="batch", reward="0.50")
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == ""
    assert lines[:2] == ["starting Ray ...", "starting Ray: 1/2 ready"]
    # fewer than 10 s: no periodic line, only the final one (extra fields kept, the note dropped)
    assert len(lines) == 3 and lines[2].startswith("sampling: 3/3 tasks in ")
    assert lines[2].endswith("tasks/s, reward=0.50") and "batch" not in lines[2]


def test_a_slow_bar_prints_a_line_with_its_rate_and_eta(capsys, monkeypatch):
    monkeypatch.setattr(console, "PLAIN_EVERY_S", 0.0)
    with console.progress("training", total=4, unit="steps") as bar:
        time.sleep(0.01)
        bar.advance(1)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("training: 1/4 steps (") and "ETA" in err[0]
    assert err[-1].startswith("training: 1/4 steps in ")


def test_quiet_silences_progress_and_logs_but_not_warnings(capsys, monkeypatch):
    for how in ("configure", "env"):
        if how == "configure":
            console.configure(quiet=True)
        else:
            console.configure(quiet=None)
            monkeypatch.setenv("RLDATA_QUIET", "1")
        assert console.mode() == "off"
        with console.stage("starting Ray"), console.progress("sampling", total=2) as bar:
            bar.advance(2)
        console.log("sampled 2 tasks")
        console.warn("filter kept 0 tasks")
        console.log("warning: a warning written as a log line")
        out, err = capsys.readouterr()
        assert out == "" and err.splitlines() == [
            "warning: filter kept 0 tasks",
            "warning: a warning written as a log line",
        ], how


_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from rldata.console import log, progress, stage
    with stage("starting Ray") as s:
        time.sleep(0.6)
        s.update("1/2 ready")
        time.sleep(0.6)
    log("a log line")
    with progress("sampling", total=4, unit="tasks") as p:
        for i in range(4):
            time.sleep(0.4)
            p.advance(1, reward="0.5")
    print("DATA")
    """
)


def test_on_a_terminal_stages_and_bars_are_live_and_leave_one_line_each():
    env = {k: v for k, v in os.environ.items() if k != "RLDATA_QUIET"}
    out, term, code = run_in_terminal([sys.executable, "-c", _SCRIPT], env=env)
    assert code == 0 and out == "DATA\n"  # stdout carries the data alone
    assert "starting Ray (1/2 ready)" in term  # the live stage, as it happens
    assert "✓ starting Ray" in term and "a log line" in term
    assert "ETA" in term and "tasks/s" in term  # the live bar
    assert "sampling: 4/4 tasks in " in term  # the final line
    assert "\x1b[" in term  # a live display, drawn with terminal controls
